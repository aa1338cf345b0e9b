#!/bin/sh
# check_help.sh SDP_TRAIN: `SDP_TRAIN --help` exits 0 and mentions every flag:
# the ones that are not config fields, and --foo-bar for every config field
# foo_bar that `--print-config` shows (so a new field without a flag fails).
bin=$1
out=$("$bin" --help) || { echo "FAIL: --help exited $?" >&2; exit 1; }
printf '%s\n' "$out"
fields=$("$bin" --print-config | sed -n 's/^  "\([a-z0-9_]*\)":.*/\1/p' | tr _ -)
[ -n "$fields" ] || { echo "FAIL: --print-config listed no fields" >&2; exit 1; }
missing=
for flag in help config list-models print-config dry-run $fields; do
  printf '%s\n' "$out" | grep -qE -- "--$flag([^a-z0-9-]|\$)" || missing="$missing --$flag"
done
if [ -n "$missing" ]; then
  echo "FAIL: --help does not mention:$missing" >&2
  exit 1
fi
echo "ok: --help mentions every flag"

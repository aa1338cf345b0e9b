#!/bin/sh
# expect_fail.sh EXPECTED_TEXT COMMAND [ARGS...]
# Runs COMMAND; passes when it exits non-zero (and was not killed by a
# signal) and its stderr contains EXPECTED_TEXT (fixed string). Prints the
# command's output either way, so ctest --output-on-failure shows it.
if [ $# -lt 2 ]; then
  echo "usage: $0 EXPECTED_TEXT COMMAND [ARGS...]" >&2
  exit 2
fi
expected=$1
shift
err=$(mktemp) || exit 2
trap 'rm -f "$err"' EXIT
"$@" 2>"$err"
rc=$?
echo "--- exit status $rc; stderr:"
cat "$err"
if [ "$rc" -eq 0 ]; then
  echo "FAIL: expected a non-zero exit status" >&2
  exit 1
fi
if [ "$rc" -gt 128 ]; then
  echo "FAIL: killed by signal $((rc - 128)) instead of failing cleanly" >&2
  exit 1
fi
if ! grep -qF -- "$expected" "$err"; then
  echo "FAIL: stderr does not contain: $expected" >&2
  exit 1
fi
echo "ok: exit $rc, stderr names: $expected"

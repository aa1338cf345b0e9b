#!/bin/sh
# Runs one fuzz target for a bounded time on its seed corpus; fails on any
# crash, sanitizer report, leak or escaping exception (libFuzzer's exit
# status). New inputs go to BUILD_DIR/corpus-work/TARGET, never into the
# repository's seeds; a failing input is saved as BUILD_DIR/artifacts/TARGET-*.
#   run_fuzzer.sh BUILD_DIR TARGET SEED_DIR SECONDS [libFuzzer flags...]
set -eu
build=$1
target=$2
seeds=$3
seconds=$4
shift 4
if [ -f "$build/UNAVAILABLE" ]; then
  cat "$build/UNAVAILABLE"
  exit 77
fi
binary=$build/fuzz_$target
[ -x "$binary" ] || { echo "fuzz target $binary was not built"; exit 1; }
work=$build/corpus-work/$target
mkdir -p "$work" "$build/artifacts"
exec "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$build/artifacts/$target-" "$@" "$work" "$seeds"

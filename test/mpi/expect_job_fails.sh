#!/bin/sh
# expect_job_fails.sh EXPECTED_TEXT MAX_SECONDS COMMAND [ARGS...]
# Runs COMMAND (an mpiexec line); passes when it exits non-zero, its output
# (stdout and stderr: mpiexec forwards the ranks' stderr) contains
# EXPECTED_TEXT (fixed string), and it ended within MAX_SECONDS, i.e. the
# job was ended rather than left to hang or run out. Prints the output
# either way, so ctest --output-on-failure shows it.
if [ $# -lt 3 ]; then
  echo "usage: $0 EXPECTED_TEXT MAX_SECONDS COMMAND [ARGS...]" >&2
  exit 2
fi
expected=$1
max_seconds=$2
shift 2
out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT
start=$(date +%s)
"$@" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "--- exit status $rc after ${elapsed} s; output:"
cat "$out"
if [ "$rc" -eq 0 ]; then
  echo "FAIL: expected a non-zero exit status" >&2
  exit 1
fi
if ! grep -qF -- "$expected" "$out"; then
  echo "FAIL: the output does not contain: $expected" >&2
  exit 1
fi
if [ "$elapsed" -gt "$max_seconds" ]; then
  echo "FAIL: took ${elapsed} s, more than ${max_seconds} s" >&2
  exit 1
fi
echo "ok: exit $rc within ${elapsed} s, output names: $expected"

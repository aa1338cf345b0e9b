#!/bin/sh
# expect_status.sh STATUS EXPECTED_TEXT COMMAND [ARGS...]
# Runs COMMAND; passes when it exits with exactly STATUS and its stderr
# contains EXPECTED_TEXT (fixed string). Prints the command's stderr either
# way, so ctest --output-on-failure shows it.
if [ $# -lt 3 ]; then
  echo "usage: $0 STATUS EXPECTED_TEXT COMMAND [ARGS...]" >&2
  exit 2
fi
status=$1
expected=$2
shift 2
err=$(mktemp) || exit 2
trap 'rm -f "$err"' EXIT
"$@" >/dev/null 2>"$err"
rc=$?
echo "--- exit status $rc; stderr:"
cat "$err"
if [ "$rc" -ne "$status" ]; then
  echo "FAIL: expected exit status $status" >&2
  exit 1
fi
if ! grep -qF -- "$expected" "$err"; then
  echo "FAIL: stderr does not contain: $expected" >&2
  exit 1
fi
echo "ok: exit $rc, stderr names: $expected"

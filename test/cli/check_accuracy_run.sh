#!/bin/sh
# Usage: check_accuracy_run.sh METRICS RANKS PYTHON3 COMMAND...
# Runs COMMAND (an sdp-train run of a 10-class classifier for 2 steps,
# evaluated at step 2, or a launcher running one) with --metrics METRICS;
# its printed evaluation line must show the training and evaluation top-1
# and top-5 beside the losses, and its metrics must carry them
# (check_accuracy.py, with RANKS ranks).
set -eu
metrics=$1
ranks=$2
py=$3
shift 3
rm -f "$metrics"
out="$metrics.out"
if ! "$@" --metrics "$metrics" >"$out" 2>&1; then
  cat "$out"
  exit 1
fi
number='[0-9]+[.][0-9]+'
accuracy="[(]top-1 $number%, top-5 $number%[)]"
if ! grep -Eq "^step +2  train loss $number $accuracy  eval loss $number $accuracy" "$out"; then
  cat "$out"
  echo "check_accuracy_run: no evaluation line with top-1 and top-5 beside both losses" >&2
  exit 1
fi
exec "$py" "$(dirname "$0")/check_accuracy.py" "$metrics" 2 1,5 "$ranks"

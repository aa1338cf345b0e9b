#!/bin/sh
# expect_no_gpu_error.sh SDP_TRAIN
# On a machine with no usable GPU, `sdp-train --device cuda` must end with a
# clear message, not a crash. Where a GPU answers (nvidia-smi lists one) the
# check does not apply and the test is skipped (exit 77).
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIPPED: a GPU is present; this test checks the message when there is none"
  exit 77
fi
here=$(dirname "$0")
exec sh "$here/expect_fail.sh" "--device cuda" "$1" --device cuda --model tiny --steps 1

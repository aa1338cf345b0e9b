#!/bin/sh
# make_resume_checkpoints.sh DIR SDP_TRAIN [FLAGS...]
# Writes three save dirs, each named `ck` inside its own working directory,
# for the tests of ranks that resume different checkpoints behind the same
# relative path: DIR/step2/ck and DIR/step4/ck (steps 2 and 4 of one run)
# and DIR/step2_other_lr/ck (step 2, trained with another learning rate, so
# other weights at the same step). FLAGS go to every run.
set -e
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR SDP_TRAIN [FLAGS...]" >&2
  exit 2
fi
dir=$1
train=$2
shift 2
rm -rf "$dir"
mkdir -p "$dir/step2" "$dir/step4" "$dir/step2_other_lr"
(cd "$dir/step2" && "$train" "$@" --steps 2 --save-dir ck >/dev/null)
(cd "$dir/step4" && "$train" "$@" --steps 4 --save-dir ck >/dev/null)
(cd "$dir/step2_other_lr" && "$train" "$@" --steps 2 --lr 0.02 --save-dir ck >/dev/null)
echo "ok: checkpoints of steps 2, 4 and 2 (other weights) under $dir"

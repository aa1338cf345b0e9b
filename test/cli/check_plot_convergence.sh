#!/bin/sh
# check_plot_convergence.sh PYTHON SDP_TRAIN SOURCE_DIR
# bench/plot_convergence.py against the current sdp-train: two short tiny
# runs laid out as bench/convergence.sh lays them out (equal steps, equal
# FLOPs), summarized without a plot (matplotlib is optional); the summary
# must carry the DDP row. Catches the script falling behind the binary's
# --list-models and metrics formats.
set -eu
python=$1 sdp_train=$2 source_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for part in equal_steps equal_flops; do
  mkdir -p "$work/$part"
  "$sdp_train" --model tiny --batch 2 --seq 16 --steps 4 --warmup 1 --eval-every 2 \
    --eval-batches 1 --progress false --metrics "$work/$part/ddp.jsonl" > /dev/null
done
BIN=$sdp_train "$python" "$source_dir/bench/plot_convergence.py" --dir "$work" \
  --strategies ddp > "$work/summary.md"
grep -q '^| DDP ' "$work/summary.md" || {
  echo "plot_convergence.py printed no DDP row:" >&2
  cat "$work/summary.md" >&2
  exit 1
}

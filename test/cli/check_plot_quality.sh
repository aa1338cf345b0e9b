#!/bin/sh
# check_plot_quality.sh PYTHON SDP_TRAIN SOURCE_DIR
# bench/plot_quality.py against the current sdp-train: two seeds of a short
# tiny LLaMA run laid out as bench/quality_study.sh lays them out,
# summarized without a plot (matplotlib is optional). The DDP row must give
# the mean of the two runs' final eval losses with their range, and a
# next-token top-1. Catches the script falling behind the metrics format.
set -eu
python=$1 sdp_train=$2 source_dir=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/llama/equal_steps"
for seed in 1 2; do
  "$sdp_train" --model tiny --batch 2 --seq 16 --steps 2 --warmup 1 --eval-every 2 \
    --eval-batches 1 --seed "$seed" --progress false \
    --metrics "$work/llama/equal_steps/ddp_c1_s$seed.jsonl" > /dev/null
done
"$python" "$source_dir/bench/plot_quality.py" --dir "$work" > "$work/summary.md"
# The expected cell, from the two summaries.
want=$("$python" - "$work/llama/equal_steps" <<'PY'
import json, sys
losses = []
for seed in (1, 2):
    with open(f"{sys.argv[1]}/ddp_c1_s{seed}.jsonl") as f:
        losses.append([json.loads(line) for line in f][-1]["final_eval_loss"])
print(f"| DDP | 1 | {sum(losses) / 2:.3f} [{min(losses):.3f}..{max(losses):.3f}] | ")
PY
)
grep -qF "$want" "$work/summary.md" || {
  echo "plot_quality.py printed no DDP row starting '$want':" >&2
  cat "$work/summary.md" >&2
  exit 1
}
grep -q '^| DDP | 1 | [^|]* | [0-9.]* \[[0-9.]*\.\.[0-9.]*\] |' "$work/summary.md" || {
  echo "plot_quality.py printed no next-token top-1 range for DDP:" >&2
  cat "$work/summary.md" >&2
  exit 1
}

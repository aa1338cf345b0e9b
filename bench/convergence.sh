#!/usr/bin/env bash
# Convergence of DDP and the SDP variants on the synthetic language (known
# entropy rate), N ranks under mpirun, the `mini` LLaMA:
#   (a) equal steps: every strategy runs STEPS steps;
#   (b) equal FLOPs: each SDP variant runs STEPS x (DDP FLOPs per step /
#       its FLOPs per step) steps, so that the job computes what DDP's STEPS
#       steps compute. FLOPs are an analytic estimate (bench/flops_estimate.py
#       says how): forward masking computes less per step, backward masking
#       skips only the weight gradients of unowned parts.
# Same per-rank batch, seed, learning-rate schedule shape (warmup, then cosine
# over the run's own steps) and evaluation batches everywhere. Then
# bench/plot_convergence.py draws the loss curves (matplotlib; installed from
# Debian when missing) and writes a Markdown summary.
#
#   bash bench/convergence.sh          # runs everything (about 15-25 min on 2 cores)
#   bash bench/convergence.sh --plot   # only re-plots the runs in OUT
#
# Environment: MODEL (mini), RANKS (4), C (0.5), STEPS (300), BATCH (8),
# SEQ (64), LR (1e-2), WARMUP (10), EVAL_EVERY (25), EVAL_BATCHES (16),
# SEED (1234), STRATEGIES ("b-sdp n-sdp bb-sdp nb-sdp"), BUILD (build),
# OUT (out/convergence), PLOT (bench/results/convergence.svg),
# REPORT (bench/results/convergence.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-mini}
RANKS=${RANKS:-4}
C=${C:-0.5}
STEPS=${STEPS:-300}
BATCH=${BATCH:-8}
SEQ=${SEQ:-64}
LR=${LR:-1e-2}
WARMUP=${WARMUP:-10}
EVAL_EVERY=${EVAL_EVERY:-25}
EVAL_BATCHES=${EVAL_BATCHES:-16}
SEED=${SEED:-1234}
STRATEGIES=${STRATEGIES:-"b-sdp n-sdp bb-sdp nb-sdp"}
BUILD=${BUILD:-build}
OUT=${OUT:-out/convergence}
PLOT=${PLOT:-bench/results/convergence.svg}
REPORT=${REPORT:-bench/results/convergence.md}
BIN=$BUILD/bin/sdp-train
export BIN
me=convergence

source bench/plotting_python.sh

plot() {
  local py
  py=$(sdp_plotting_python "$me" "bash bench/convergence.sh --plot")
  mkdir -p "$(dirname "$PLOT")" "$(dirname "$REPORT")"
  "$py" bench/plot_convergence.py --dir "$OUT" --plot "$PLOT" --report "$REPORT" \
    --strategies "ddp $STRATEGIES"
}
if [[ ${1:-} == --plot ]]; then
  plot
  exit 0
fi

source scripts/mpi_env.sh
sdp_require_sdp_train "$BIN" "$BUILD"
sdp_mpi_setup
mkdir -p "$OUT/equal_steps" "$OUT/equal_flops"

common=(--model "$MODEL" --data synthetic --batch "$BATCH" --seq "$SEQ" --lr "$LR"
        --warmup "$WARMUP" --eval-every "$EVAL_EVERY" --eval-batches "$EVAL_BATCHES"
        --seed "$SEED" --progress false)
# run DIR STRATEGY STEPS: one mpirun job, metrics in DIR/STRATEGY.jsonl, its
# wall time appended to OUT/times.tsv (for the report only). stdin is closed:
# mpirun forwards it to rank 0 and would eat the loop's input below.
run() {
  local dir=$1 s=$2 steps=$3 frac=() t0=$EPOCHREALTIME
  [[ $s == ddp ]] || frac=(--active-fraction "$C")
  echo "$me: ${dir##*/}: $s, $steps steps on $RANKS ranks" >&2
  rm -f "$dir/$s.jsonl"
  if ! "${MPIRUN[@]}" -np "$RANKS" "$BIN" "${common[@]}" --strategy "$s" "${frac[@]}" \
         --steps "$steps" --metrics "$dir/$s.jsonl" </dev/null >"$dir/$s.log" 2>&1; then
    tail -n 20 "$dir/$s.log" >&2
    echo "$me: the $s run failed; its output is $dir/$s.log" >&2
    exit 1
  fi
  awk -v d="${dir##*/}" -v s="$s" -v n="$steps" -v t0="$t0" -v t1="$EPOCHREALTIME" \
    'BEGIN { printf "%s\t%s\t%s\t%.1f\n", d, s, n, t1 - t0 }' >>"$OUT/times.tsv"
}

start=$SECONDS
{
  echo "started $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)," \
       "load $(cut -d' ' -f1-3 /proc/loadavg), $(getconf _NPROCESSORS_ONLN) cores"
} >"$OUT/run_info.txt"
: >"$OUT/times.tsv"

# (a) equal steps.
for s in ddp $STRATEGIES; do run "$OUT/equal_steps" "$s" "$STEPS"; done

# (b) equal FLOPs: DDP's run is (a)'s; the others get the steps that match
# its estimated FLOPs (the plan is read from each (a) run's summary).
rm -f "$OUT"/equal_flops/*.jsonl
cp "$OUT/equal_steps/ddp.jsonl" "$OUT/equal_flops/ddp.jsonl"
files=()
for s in $STRATEGIES; do files+=("$OUT/equal_steps/$s.jsonl"); done
while read -r s steps; do
  run "$OUT/equal_flops" "$s" "$steps"
done < <(python3 bench/flops_estimate.py --equal-flops "$STEPS" "$OUT/equal_steps/ddp.jsonl" \
           "${files[@]}")
for s in $STRATEGIES; do
  [[ -s $OUT/equal_flops/$s.jsonl ]] || { echo "$me: no equal-FLOPs run of $s" >&2; exit 1; }
done
echo "finished $(date -u '+%Y-%m-%d %H:%M UTC') after $((SECONDS - start)) s," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/run_info.txt"

plot

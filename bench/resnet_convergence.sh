#!/usr/bin/env bash
# Convergence of DDP, B-SDP and N-SDP (forward masking, C = 0.5) on the CIFAR
# ResNet `resnet-mini` trained on synthetic images, N ranks under mpirun, one
# thread per rank: same seed, per-rank batch, steps, learning-rate schedule
# and evaluation batches everywhere (equal steps; equal FLOPs is not run).
# B-SDP gives each rank half of the 8 basic blocks, N-SDP half of the inner
# channel groups of every block (--channel-groups, default 8 here); the stem,
# the projection shortcuts and the classifier are shared by all ranks. Then
# bench/plot_resnet_convergence.py draws the eval loss (and a moving average
# of the train loss) against the step and writes a Markdown summary with
# peak memory and bytes sent per rank.
#
# BatchNorm recalibration: an SDP rank updates the running statistics of the
# BatchNorm layers it holds with the activations of its own subnetwork, whose
# residual stream (B-SDP: other blocks skipped) or block sums (N-SDP: half the
# channel groups) differ from the full model's. The engine therefore
# re-estimates the assembled full model's statistics before it evaluates or
# saves it (--recalibration-images, default 1024: an exact average over
# training batches). As an independent check by another route, after each
# run its final checkpoint (the full model) is resumed in one process for RECAL more steps
# at lr 1e-12 (the weights do not move; BatchNorm in training mode pulls the
# running statistics, momentum 0.1, to the full model's own: 0.9^RECAL of
# the old ones are left) on global batches (BATCH x RANKS), then evaluated
# on the same validation images. DDP gets the same treatment.
#
#   bash bench/resnet_convergence.sh          # runs everything (about 10 min on 2 cores)
#   bash bench/resnet_convergence.sh --plot   # only re-plots the runs in OUT
#
# Environment: MODEL (resnet-mini), RANKS (4), C (0.5), STEPS (300),
# BATCH (16 per rank), SIZE (16: SIZE x SIZE images), DATA (synthetic-images
# at that size, 10 classes, default noise), LR (2e-3), WARMUP (20),
# EVAL_EVERY (50), EVAL_BATCHES (32; a multiple of RANKS), RECAL (30),
# SEED (1234),
# STRATEGIES ("b-sdp n-sdp"), BUILD (build), OUT (out/resnet_convergence),
# PLOT (bench/results/resnet_convergence.svg),
# REPORT (bench/results/resnet_convergence.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-resnet-mini}
RANKS=${RANKS:-4}
C=${C:-0.5}
STEPS=${STEPS:-500}
BATCH=${BATCH:-16}
SIZE=${SIZE:-16}
DATA=${DATA:-synthetic-images:height=$SIZE,width=$SIZE}
LR=${LR:-2e-3}
WARMUP=${WARMUP:-20}
EVAL_EVERY=${EVAL_EVERY:-50}
EVAL_BATCHES=${EVAL_BATCHES:-32}
RECAL=${RECAL:-30}
SEED=${SEED:-1234}
STRATEGIES=${STRATEGIES:-"b-sdp n-sdp"}
BUILD=${BUILD:-build}
OUT=${OUT:-out/resnet_convergence}
PLOT=${PLOT:-bench/results/resnet_convergence.svg}
REPORT=${REPORT:-bench/results/resnet_convergence.md}
BIN=$BUILD/bin/sdp-train
me=resnet_convergence

source bench/plotting_python.sh

plot() {
  local py
  py=$(sdp_plotting_python "$me" "bash bench/resnet_convergence.sh --plot")
  mkdir -p "$(dirname "$PLOT")" "$(dirname "$REPORT")"
  "$py" bench/plot_resnet_convergence.py --dir "$OUT" --plot "$PLOT" --report "$REPORT" \
    --strategies "ddp $STRATEGIES"
}
if [[ ${1:-} == --plot ]]; then
  plot
  exit 0
fi

source scripts/mpi_env.sh
sdp_require_sdp_train "$BIN" "$BUILD"
sdp_mpi_setup
mkdir -p "$OUT"
if ((EVAL_BATCHES % RANKS != 0)); then
  echo "$me: EVAL_BATCHES ($EVAL_BATCHES) must be a multiple of RANKS ($RANKS): the" \
       "recalibrated evaluation reads the same images in batches of BATCH x RANKS" >&2
  exit 2
fi

common=(--model "$MODEL" --data "$DATA" --batch "$BATCH" --lr "$LR" --warmup "$WARMUP"
        --eval-every "$EVAL_EVERY" --eval-batches "$EVAL_BATCHES" --seed "$SEED"
        --threads 1 --progress false --steps "$STEPS")
# run STRATEGY: one mpirun job, metrics in OUT/STRATEGY.jsonl, its wall time
# appended to OUT/times.tsv. stdin is closed: mpirun forwards it to rank 0.
run() {
  local s=$1 frac=() t0=$EPOCHREALTIME
  [[ $s == ddp ]] || frac=(--active-fraction "$C")
  echo "$me: $s, $STEPS steps on $RANKS ranks" >&2
  rm -rf "$OUT/$s.jsonl" "$OUT/ckpt_$s"
  if ! "${MPIRUN[@]}" -np "$RANKS" "$BIN" "${common[@]}" --strategy "$s" "${frac[@]}" \
         --save-dir "$OUT/ckpt_$s" --metrics "$OUT/$s.jsonl" </dev/null >"$OUT/$s.log" 2>&1; then
    tail -n 20 "$OUT/$s.log" >&2
    echo "$me: the $s run failed; its output is $OUT/$s.log" >&2
    exit 1
  fi
  awk -v s="$s" -v t0="$t0" -v t1="$EPOCHREALTIME" \
    'BEGIN { printf "%s\t%.1f\n", s, t1 - t0 }' >>"$OUT/times.tsv"
  # BatchNorm recalibration of the full model (see the top): one process,
  # the final checkpoint, RECAL steps that change only running statistics.
  echo "$me: $s, recalibrating BatchNorm statistics over $RECAL steps" >&2
  rm -f "$OUT/$s.recal.jsonl"
  if ! OMP_NUM_THREADS=1 "$BIN" --model "$MODEL" --data "$DATA" --batch $((BATCH * RANKS)) \
         --lr 1e-12 --min-lr 1e-12 --warmup 0 --weight-decay 0 --steps $((STEPS + RECAL)) \
         --eval-every "$RECAL" --eval-batches $((EVAL_BATCHES / RANKS)) --seed "$SEED" \
         --threads 1 --progress false --resume "$OUT/ckpt_$s" --metrics "$OUT/$s.recal.jsonl" \
         </dev/null >"$OUT/$s.recal.log" 2>&1; then
    tail -n 20 "$OUT/$s.recal.log" >&2
    echo "$me: the recalibration of $s failed; its output is $OUT/$s.recal.log" >&2
    exit 1
  fi
}

start=$SECONDS
echo "started $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD)," \
     "load $(cut -d' ' -f1-3 /proc/loadavg), $(getconf _NPROCESSORS_ONLN) cores" >"$OUT/run_info.txt"
: >"$OUT/times.tsv"
for s in ddp $STRATEGIES; do run "$s"; done
echo "finished $(date -u '+%Y-%m-%d %H:%M UTC') after $((SECONDS - start)) s," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/run_info.txt"

plot

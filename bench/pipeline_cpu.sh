#!/usr/bin/env bash
# Pipelines with two-stage backward on the CPU, measured and simulated.
#
# Measured: 2 ranks = 2 stages under mpirun, one thread each, MODEL (llama-134m)
# at micro-batch BATCH x SEQ (1 x 256), M = each of MICROBATCHES (4 8), each
# of SCHEDULES (gpipe 1f1b 1f1b-2bp zb-h1), STEPS (3) steps: per run the
# metrics JSON lines (--metrics) and the last step's timeline and measured
# action costs (--pipeline-timeline: timeline.json, costs.json).
# Simulated: sdp-pipeline --model for P = 4 and 8 stages, M = 2P and 4P, of
# SIM_LLAMAS (llama-134m llama-1b) with rates per action kind calibrated on the
# measured CALIBRATE_SCHEDULE (zb-h1: its I and W are timed apart) run at the
# largest M, and of resnet152-basic (micro-batch RESNET_BATCH 32 images of
# 32 x 32) at one rate: the measured run's forward rate (ResNet was not
# measured; the rate of its convolutions on this CPU is not known here).
# Then the 4-stage 1f1b vs 1f1b-2bp SVG of MODEL into docs/.
#
#   bash bench/pipeline_cpu.sh            # measure, simulate, print tables
#   bash bench/pipeline_cpu.sh --table    # re-print the tables of OUT
#
# Environment: MODEL, BATCH, SEQ, STEPS, MICROBATCHES, SCHEDULES as above;
# MEASURE (1; 0 keeps the measured runs already in OUT and only simulates);
# CORETYPE (OPENBLAS_CORETYPE: default SkylakeX with AVX-512, else Haswell
# with AVX2; "unset" leaves it unset), BUILD (build), OUT (out/pipeline_cpu),
# REPORT (bench/results/pipeline_cpu.md), SVG (docs/pipeline-1f1b-vs-2bp.svg).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-llama-134m}
BATCH=${BATCH:-1}
SEQ=${SEQ:-256}
STEPS=${STEPS:-3}
MEASURE=${MEASURE:-1}
MICROBATCHES=${MICROBATCHES:-"4 8"}
SCHEDULES=${SCHEDULES:-"gpipe 1f1b 1f1b-2bp zb-h1"}
SIM_LLAMAS=${SIM_LLAMAS:-"llama-134m llama-1b"}
RESNET_BATCH=${RESNET_BATCH:-32}
CALIBRATE_SCHEDULE=${CALIBRATE_SCHEDULE:-zb-h1}
BUILD=${BUILD:-build}
OUT=${OUT:-out/pipeline_cpu}
REPORT=${REPORT:-bench/results/pipeline_cpu.md}
SVG=${SVG:-docs/pipeline-1f1b-vs-2bp.svg}
BIN=$BUILD/bin/sdp-train
PIPE=$BUILD/bin/sdp-pipeline
me=pipeline_cpu
read -ra mbs <<<"$MICROBATCHES"
read -ra schedules <<<"$SCHEDULES"
read -ra llamas <<<"$SIM_LLAMAS"
last_m=${mbs[${#mbs[@]}-1]}
calib=$OUT/$CALIBRATE_SCHEDULE-m$last_m/timeline/costs.json

table() {
  python3 bench/pipeline_table.py --dir "$OUT" --model "$MODEL" --microbatches "${mbs[@]}" \
    --schedules "${schedules[@]}" --simulated "${llamas[@]}" resnet152-basic
}
if [[ ${1:-} == --table ]]; then
  table
  exit 0
fi

source scripts/mpi_env.sh
sdp_require_sdp_train "$BIN" "$BUILD"
[[ -x $PIPE ]] || { echo "$me: $PIPE is missing (build the sdp-pipeline target)" >&2; exit 1; }
sdp_mpi_setup
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
sdp_pick_openblas_core "$BIN"
mkdir -p "$OUT" "$(dirname "$REPORT")"

common=(--model "$MODEL" --batch "$BATCH" --seq "$SEQ" --seed 1234 --eval-every 0 --progress false
        --threads 1 --steps "$STEPS" --pipeline-stages 2)
if [[ $MEASURE == 1 ]]; then
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for m in "${mbs[@]}"; do
  for s in "${schedules[@]}"; do
    dir=$OUT/$s-m$m
    mkdir -p "$dir"
    echo "$me: measuring $s, M = $m: 2 ranks x $STEPS steps" >&2
    if ! "${MPIRUN[@]}" -np 2 "$BIN" "${common[@]}" --micro-batches "$m" --schedule "$s" \
           --metrics "$dir/metrics.jsonl" --pipeline-timeline "$dir/timeline" >"$dir/log" 2>&1; then
      tail -n 20 "$dir/log" >&2
      exit 1
    fi
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%s\n%s\n%s\n' "$started" "$load_before" "$load_after" >"$OUT/measured_when"
fi
{ read -r started; read -r load_before; read -r load_after; } <"$OUT/measured_when"

# The simulations: one sdp-pipeline run per model, P and M.
sim=$OUT/sim
mkdir -p "$sim"
for p in 4 8; do
  for m in $((2 * p)) $((4 * p)); do
    for model in "${llamas[@]}"; do
      "$PIPE" --model "$model" --batch "$BATCH" --seq "$SEQ" --stages "$p" --micro-batches "$m" \
        --calibrate "$calib" --calibrate-model "$MODEL" --compare 1f1b-2bp,zb-h1 --json \
        >"$sim/$model-p$p-m$m.json"
    done
  done
done
# The measured case itself, simulated at 2 stages: how close the calibrated
# model comes to the measured steps and activation peaks.
for m in "${mbs[@]}"; do
  "$PIPE" --model "$MODEL" --batch "$BATCH" --seq "$SEQ" --stages 2 --micro-batches "$m" \
    --calibrate "$calib" --compare gpipe,1f1b-2bp,zb-h1 --json >"$sim/$MODEL-p2-m$m.json"
done
# The calibrated forward rate (FLOP/s) of the measured run, for the ResNet.
forward_rate=$("$PIPE" --model "$MODEL" --batch "$BATCH" --seq "$SEQ" --stages 2 --micro-batches 1 \
                 --calibrate "$calib" --json | python3 -c "import json, sys; print('%.6g' % json.load(sys.stdin)['model']['rates']['forward'])")
for p in 4 8; do
  for m in $((2 * p)) $((4 * p)); do
    "$PIPE" --model resnet152-basic --batch "$RESNET_BATCH" --seq 32 --stages "$p" --micro-batches "$m" \
      --flops-per-second "$forward_rate" --compare 1f1b-2bp,zb-h1 --json \
      >"$sim/resnet152-basic-p$p-m$m.json"
  done
done
"$PIPE" --model "$MODEL" --batch "$BATCH" --seq "$SEQ" --stages 4 --micro-batches 8 \
  --calibrate "$calib" --compare 1f1b-2bp --svg "$SVG" >/dev/null

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- engine kernels models comm apps 2>/dev/null || commit="$commit (with local changes)"
{
  echo "Measured $started, commit \`$commit\`. CPU: $cpu_model, $(getconf _NPROCESSORS_ONLN)" \
       "logical CPUs; OpenBLAS core $core (OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset})." \
       "The 2 ranks share the machine's cores (with whatever else runs on it): load" \
       "$load_before before, $load_after after (1/5/15 min)."
  echo "Measured runs: \`${MPIRUN[*]} -np 2 $BIN ${common[*]} --micro-batches M --schedule S" \
       "--metrics ... --pipeline-timeline ...\` with OMP_NUM_THREADS=1."
  echo "Simulations: \`$PIPE --model X --batch $BATCH --seq $SEQ --stages P --micro-batches M" \
       "--calibrate $calib --calibrate-model $MODEL --compare 1f1b-2bp,zb-h1\` (LLaMA);" \
       "\`$PIPE --model resnet152-basic --batch $RESNET_BATCH --seq 32 --stages P --micro-batches M" \
       "--flops-per-second $forward_rate --compare 1f1b-2bp,zb-h1\` (ResNet)."
  echo "SVG: \`$PIPE --model $MODEL --batch $BATCH --seq $SEQ --stages 4 --micro-batches 8" \
       "--calibrate $calib --compare 1f1b-2bp --svg $SVG\`."
  echo
  table
} >"$REPORT"
cat "$REPORT"
echo "$me: written to $REPORT (raw figures in $OUT)" >&2

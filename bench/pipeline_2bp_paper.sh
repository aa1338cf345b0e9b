#!/usr/bin/env bash
# The 2BP paper's comparison on the CPU, side by side in one run: 2 stages on
# 2 ranks (mpirun, one thread each), MODEL (small: 4 blocks of width 256,
# a 256-token vocabulary, so the blocks, not the head, carry the work, as
# in the paper's 7B model; llama-134m takes minutes per step on a loaded
# 2-core machine) at micro-batch 1 x
# SEQ (256), M = P = 2 and M = 2P = 4, each of the paper's schedules without
# and with two-stage backward, the deferred weight gradients per micro-batch
# and batched (--deferred-weight-grads batched: one GEMM per weight over the
# deferred micro-batches' rows, as the paper's authors do):
#   naive   naive, naive-2bp                  (one micro-batch at a time)
#   GPipe   gpipe, gpipe-2bp
#   1F1B    1f1b, 1f1b-2bp, 1f1b-2bp-cooldown (1F1B-1 at M = P, 1F1B-2 at M = 2P)
#   ZB      zb-h1
# STEPS (4) steps each, ROUNDS (2) times over, the rounds interleaved (every
# configuration once, then again) so that a change in the machine's load
# touches all alike; the step is the median of steps 2..STEPS of every
# round. Then 4 and
# 8 stages simulated (sdp-pipeline --model SIM_MODEL --calibrate) at M = P and
# 2P: F, I and W rates calibrated on the measured per-micro-batch zb-h1 run
# at M = 4 (I and W timed apart); the batched rows scale every stage's W
# cost by the measured ratio of batched to per-micro-batch W time (1f1b-2bp,
# M = 4: all Ws of a stage in one run) and simulate from that costs file.
#
#   bash bench/pipeline_2bp_paper.sh           # measure, simulate, print the tables
#   bash bench/pipeline_2bp_paper.sh --table   # re-print them from OUT
#
# Environment: MODEL, SEQ, STEPS, ROUNDS, SIM_MODEL as above; MEASURE (1; 0
# keeps the measured runs already in OUT and only simulates); BUILD (build; its bin/ is copied
# to OUT/bin first, so a rebuild cannot replace a binary mid-run), OUT
# (out/pipeline_2bp_paper), NICE (10: runs under nice -n NICE), CORETYPE
# (OPENBLAS_CORETYPE as bench/pipeline_cpu.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-small}
SEQ=${SEQ:-256}
STEPS=${STEPS:-4}
ROUNDS=${ROUNDS:-2}
MEASURE=${MEASURE:-1}
# The simulated pipelines need a block per stage at least: MODEL's blocks
# with 16 of them, F, I and W rates from the measured MODEL.
SIM_MODEL=${SIM_MODEL:-$MODEL:layers=16}
BUILD=${BUILD:-build}
OUT=${OUT:-out/pipeline_2bp_paper}
NICE=${NICE:-10}
me=pipeline_2bp_paper
# label = schedule[:batched]
RUNS=(naive naive-2bp naive-2bp:batched gpipe gpipe-2bp gpipe-2bp:batched
      1f1b 1f1b-2bp 1f1b-2bp:batched 1f1b-2bp-cooldown 1f1b-2bp-cooldown:batched
      zb-h1 zb-h1:batched)
SIM_SCHEDULES=naive-2bp,gpipe,gpipe-2bp,1f1b,1f1b-2bp,1f1b-2bp-cooldown,zb-h1

table() {
  python3 bench/pipeline_2bp_table.py --dir "$OUT" --runs "${RUNS[@]}"
}
if [[ ${1:-} == --table ]]; then
  table
  exit 0
fi

source scripts/mpi_env.sh
sdp_require_sdp_train "$BUILD/bin/sdp-train" "$BUILD"
[[ -x $BUILD/bin/sdp-pipeline ]] || { echo "$me: $BUILD/bin/sdp-pipeline is missing" >&2; exit 1; }
mkdir -p "$OUT/bin"
cp "$BUILD/bin/sdp-train" "$BUILD/bin/sdp-pipeline" "$OUT/bin/"
BIN=$OUT/bin/sdp-train
PIPE=$OUT/bin/sdp-pipeline
sdp_mpi_setup
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
sdp_pick_openblas_core "$BIN"
echo "$me: CPU: $cpu_model, $(getconf _NPROCESSORS_ONLN) logical CPUs; OpenBLAS core $core" \
     "(OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset})" >&2

common=(--model "$MODEL" --batch 1 --seq "$SEQ" --seed 1234 --eval-every 0 --progress false
        --threads 1 --steps "$STEPS" --pipeline-stages 2)
if [[ $MEASURE == 1 ]]; then
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$ROUNDS"); do
for m in 2 4; do
  for run in "${RUNS[@]}"; do
    s=${run%%:*}
    mode=per-micro-batch
    [[ $run == *:batched ]] && mode=batched
    dir=$OUT/${s}-${mode}-m$m
    mkdir -p "$dir"
    echo "$me: round $round: measuring $s ($mode W), M = $m: 2 ranks x $STEPS steps" >&2
    if ! nice -n "$NICE" "${MPIRUN[@]}" -np 2 "$BIN" "${common[@]}" --micro-batches "$m" \
           --schedule "$s" --deferred-weight-grads "$mode" --metrics "$dir/metrics-r$round.jsonl" \
           --pipeline-timeline "$dir/timeline" >"$dir/log" 2>&1; then
      tail -n 20 "$dir/log" >&2
      exit 1
    fi
  done
done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%s\n%s\n%s\n' "$started" "$load_before" "$load_after" >"$OUT/measured_when"
fi
{ read -r started; read -r load_before; read -r load_after; } <"$OUT/measured_when"

# Simulated: 4 and 8 stages at M = P and 2P.
sim=$OUT/sim
mkdir -p "$sim"
calib=$OUT/zb-h1-per-micro-batch-m4/timeline/costs.json
w_ratio=$(python3 - "$OUT/1f1b-2bp-batched-m4/timeline/costs.json" \
                    "$OUT/1f1b-2bp-per-micro-batch-m4/timeline/costs.json" <<'EOF'
import json, sys
batched, per = (json.load(open(p))["stages"] for p in sys.argv[1:3])
print("%.6f" % (sum(s["weight_grad"] for s in batched) / sum(s["weight_grad"] for s in per)))
EOF
)
for p in 4 8; do
  for m in $p $((2 * p)); do
    "$PIPE" --model "$SIM_MODEL" --batch 1 --seq "$SEQ" --stages "$p" --micro-batches "$m" \
      --calibrate "$calib" --calibrate-model "$MODEL" --schedule naive --compare "$SIM_SCHEDULES" \
      --write-costs "$sim/costs-p$p-m$m.json" --json >"$sim/per-micro-batch-p$p-m$m.json"
    python3 - "$sim/costs-p$p-m$m.json" "$w_ratio" "$sim/costs-batched-p$p-m$m.json" <<'EOF'
import json, sys
costs = json.load(open(sys.argv[1]))
for stage in costs["stages"]:
    stage["weight_grad"] *= float(sys.argv[2])
json.dump(costs, open(sys.argv[3], "w"), indent=1)
EOF
    "$PIPE" --costs "$sim/costs-batched-p$p-m$m.json" --stages "$p" --micro-batches "$m" \
      --schedule naive --compare "$SIM_SCHEDULES" --json >"$sim/batched-p$p-m$m.json"
  done
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- engine kernels models comm apps 2>/dev/null || commit="$commit (with local changes)"
{
  echo "Measured $started, commit \`$commit\`. CPU: $cpu_model, $(getconf _NPROCESSORS_ONLN)" \
       "logical CPUs; OpenBLAS core $core (OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}); load" \
       "$load_before before, $load_after after (1/5/15 min)."
  echo "Measured runs: \`nice -n $NICE ${MPIRUN[*]} -np 2 sdp-train ${common[*]} --micro-batches M" \
       "--schedule S --deferred-weight-grads per-micro-batch|batched --metrics ... --pipeline-timeline ...\`" \
       "with OMP_NUM_THREADS=1."
  echo "Simulated: \`sdp-pipeline --model $SIM_MODEL --batch 1 --seq $SEQ --stages P --micro-batches M" \
       "--calibrate $calib --calibrate-model $MODEL --schedule naive --compare $SIM_SCHEDULES --write-costs C\`; batched:" \
       "C with every weight_grad x $w_ratio (measured batched / per-micro-batch W time of" \
       "1f1b-2bp at M = 4), \`sdp-pipeline --costs C' --stages P --micro-batches M ...\`."
  echo
  table
} | tee "$OUT/report.md"
echo "$me: written to $OUT/report.md" >&2

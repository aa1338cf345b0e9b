#!/usr/bin/env bash
# What sharding (ZeRO-1/2/3, FSDP) and activation checkpointing cost on the
# CPU: RANKS (2) ranks under mpirun, one thread each, the `small` LLaMA at
# batch 8 x seq 256 (about 0.4 s a step at one thread with AVX-512 kernels),
# f32, WARMUP steps then STEPS measured ones per configuration: DDP, ZeRO-1,
# ZeRO-2, ZeRO-3 with and without resharding after forward, each also with
# --activation-checkpointing block, and B-SDP C = 0.5 alone and with FSDP + AC.
# Per configuration: median step time, the share of it spent in collectives,
# peak memory per rank, FLOPs per step and bytes sent per rank; then the
# recomputation's FLOPs and time ratios against the expected ones.
#
#   bash bench/fsdp_overhead.sh          # prints Markdown; also writes $REPORT
#
# Environment: MODEL (small), BATCH (8), SEQ (256), WARMUP (3), STEPS (8),
# RANKS (2), CORETYPE (OPENBLAS_CORETYPE for the runs: default SkylakeX where
# the CPU has AVX-512, else Haswell where it has AVX2; "unset" leaves it
# unset), CONFIGS (labels, see config_args), BUILD (build), OUT
# (out/fsdp_overhead: metrics, CPU samples, logs), REPORT
# (bench/results/fsdp_overhead.md).
# `bash bench/fsdp_overhead.sh --table` re-prints the tables of OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-small}
BATCH=${BATCH:-8}
SEQ=${SEQ:-256}
WARMUP=${WARMUP:-3}
STEPS=${STEPS:-8}
RANKS=${RANKS:-2}
CONFIGS=${CONFIGS:-"ddp ddp-ac zero1 zero1-ac zero2 zero2-ac zero3 zero3-ac zero3-keep zero3-keep-ac bsdp bsdp-fsdp-ac"}
BUILD=${BUILD:-build}
OUT=${OUT:-out/fsdp_overhead}
REPORT=${REPORT:-bench/results/fsdp_overhead.md}
BIN=$BUILD/bin/sdp-train
me=fsdp_overhead
read -ra labels <<<"$CONFIGS"

table() {
  python3 bench/fsdp_overhead.py table --dir "$OUT" --warmup "$WARMUP" "${labels[@]}"
}
if [[ ${1:-} == --table ]]; then
  table
  exit 0
fi

config_args() {  # label -> sdp-train flags
  local base=${1%-ac} flags
  case $base in
    ddp) flags="--strategy ddp" ;;
    zero1) flags="--strategy ddp --shard optimizer" ;;
    zero2) flags="--strategy ddp --shard grad" ;;
    zero3) flags="--strategy ddp --shard full --reshard-after-forward true" ;;
    zero3-keep) flags="--strategy ddp --shard full --reshard-after-forward false" ;;
    bsdp) flags="--strategy b-sdp --active-fraction 0.5" ;;
    bsdp-fsdp) flags="--strategy b-sdp --active-fraction 0.5 --shard full" ;;
    *) echo "$me: unknown configuration '$1' (valid: ddp zero1 zero2 zero3 zero3-keep bsdp" \
            "bsdp-fsdp, each optionally with -ac)" >&2
       exit 2 ;;
  esac
  [[ $1 == *-ac ]] && flags+=" --activation-checkpointing block"
  echo "$flags"
}
for label in "${labels[@]}"; do config_args "$label" >/dev/null; done

source scripts/mpi_env.sh
sdp_require_sdp_train "$BIN" "$BUILD"
sdp_mpi_setup
export OPENBLAS_NUM_THREADS=1
sdp_pick_openblas_core "$BIN"
mkdir -p "$OUT" "$(dirname "$REPORT")"

# The same data, seed and shape for every run; no evaluation, so each step's
# figures are the training step's alone.
common=(--model "$MODEL" --batch "$BATCH" --seq "$SEQ" --seed 1234 --eval-every 0
        --progress false --threads 1 --steps $((WARMUP + STEPS)))

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
n=0
for label in "${labels[@]}"; do
  n=$((n + 1))
  read -ra flags <<<"$(config_args "$label")"
  echo "$me: [$n/${#labels[@]}] $label: $RANKS ranks x $((WARMUP + STEPS)) steps (${flags[*]})" >&2
  if ! python3 bench/fsdp_overhead.py run --ranks "$RANKS" --metrics "$OUT/$label.jsonl" \
         --cpu "$OUT/$label.cpu.json" --log "$OUT/$label.log" -- \
         "${MPIRUN[@]}" -np "$RANKS" "$BIN" "${common[@]}" "${flags[@]}" \
         --metrics "$OUT/$label.jsonl"; then
    tail -n 20 "$OUT/$label.log" >&2
    exit 1
  fi
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- engine kernels models comm apps 2>/dev/null || commit="$commit (with local changes)"
{
  echo "Measured $started, commit \`$commit\`. CPU: $cpu_model, $(getconf _NPROCESSORS_ONLN)" \
       "logical CPUs; OpenBLAS core $core (OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset})." \
       "The $RANKS ranks share the machine's cores (with whatever else runs on it): load" \
       "$load_before before, $load_after after (1/5/15 min)."
  echo "Command: \`bash bench/fsdp_overhead.sh\` (MODEL=$MODEL BATCH=$BATCH SEQ=$SEQ" \
       "WARMUP=$WARMUP STEPS=$STEPS RANKS=$RANKS): \`${MPIRUN[*]} -np $RANKS $BIN ${common[*]}" \
       "<flags> --metrics ...\` with OMP_NUM_THREADS=1."
  echo
  table
} >"$REPORT"
cat "$REPORT"
echo "$me: written to $REPORT (raw metrics in $OUT)" >&2

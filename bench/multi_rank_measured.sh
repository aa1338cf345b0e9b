#!/usr/bin/env bash
# Measured per-rank peak memory and communication volume of DDP and each SDP
# variant: real ranks under mpirun (Open MPI, host buffers), the real CPU
# allocator (64-byte alignment), a few training steps each. Then the same
# configurations as single-process rank emulations on the meta device
# (--dry-run --emulate-world N --emulate-rank r: one step, nothing allocated,
# collectives counted but not run, 512-byte blocks) to show that the dry-run
# figures match the measured ones.
#
#   bash bench/multi_rank_measured.sh    # prints Markdown; also writes $REPORT
#
# Environment: MODEL (small), BATCH (8), SEQ (256), STEPS (3), RANKS (4),
# FRACTIONS ("0.5 0.75": C of the SDP variants), STRATEGIES ("b-sdp n-sdp
# bb-sdp nb-sdp"), BUILD (build), OUT (out/multi_rank: raw metrics and logs),
# REPORT (bench/results/multi_rank_measured.md).
# `bash bench/multi_rank_measured.sh --table` re-prints the report of OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-small}
BATCH=${BATCH:-8}
SEQ=${SEQ:-256}
STEPS=${STEPS:-3}
RANKS=${RANKS:-4}
FRACTIONS=${FRACTIONS:-"0.5 0.75"}
STRATEGIES=${STRATEGIES:-"b-sdp n-sdp bb-sdp nb-sdp"}
BUILD=${BUILD:-build}
OUT=${OUT:-out/multi_rank}
REPORT=${REPORT:-bench/results/multi_rank_measured.md}
BIN=$BUILD/bin/sdp-train
me=multi_rank_measured

labels=(ddp)
for c in $FRACTIONS; do
  for s in $STRATEGIES; do labels+=("$s@$c"); done
done

table() {
  python3 bench/multi_rank_table.py --dir "$OUT" --ranks "$RANKS" "${labels[@]}"
}
if [[ ${1:-} == --table ]]; then
  table
  exit 0
fi

source scripts/mpi_env.sh
sdp_require_sdp_train "$BIN" "$BUILD"
sdp_mpi_setup
mkdir -p "$OUT" "$(dirname "$REPORT")"

# The same data, seed and shape for every run; no evaluation, so each step's
# figures are the training step's alone.
common=(--model "$MODEL" --batch "$BATCH" --seq "$SEQ" --seed 1234 --eval-every 0
        --progress false)
strategy_args() {  # label -> sdp-train flags
  local s=${1%@*} c=${1#*@}
  if [[ $s == ddp ]]; then echo "--strategy ddp"; else echo "--strategy $s --active-fraction $c"; fi
}

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for label in "${labels[@]}"; do
  read -ra flags <<<"$(strategy_args "$label")"
  file=${label//@/-C}
  echo "$me: $label: $RANKS ranks x $STEPS steps" >&2
  rm -f "$OUT/$file.mpi.jsonl"
  if ! "${MPIRUN[@]}" -np "$RANKS" "$BIN" "${common[@]}" "${flags[@]}" --steps "$STEPS" \
         --metrics "$OUT/$file.mpi.jsonl" </dev/null >"$OUT/$file.mpi.log" 2>&1; then
    tail -n 20 "$OUT/$file.mpi.log" >&2
    echo "$me: the measured $label run failed; its output is $OUT/$file.mpi.log" >&2
    exit 1
  fi
  for ((r = 0; r < RANKS; ++r)); do
    rm -f "$OUT/$file.dry$r.jsonl"
    if ! "$BIN" "${common[@]}" "${flags[@]}" --device meta --emulate-world "$RANKS" \
           --emulate-rank "$r" --dry-run --metrics "$OUT/$file.dry$r.jsonl" \
           >"$OUT/$file.dry$r.log" 2>&1; then
      tail -n 20 "$OUT/$file.dry$r.log" >&2
      echo "$me: the dry run of $label, rank $r failed; its output is $OUT/$file.dry$r.log" >&2
      exit 1
    fi
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- engine kernels models comm apps 2>/dev/null || commit="$commit (with local changes)"
{
  echo "Measured $started, commit \`$commit\`, on $(getconf _NPROCESSORS_ONLN) cores (load $load_before before," \
       "$load_after after; timing is not reported, so load does not matter)."
  echo "Command: \`bash bench/multi_rank_measured.sh\` (MODEL=$MODEL BATCH=$BATCH SEQ=$SEQ" \
       "STEPS=$STEPS RANKS=$RANKS FRACTIONS=\"$FRACTIONS\")."
  echo
  table
} >"$REPORT"
cat "$REPORT"
echo "$me: written to $REPORT (raw metrics in $OUT)" >&2

#!/usr/bin/env bash
# The main demo. Sets up and builds (scripts/build.sh), then trains the `mini`
# LLaMA on the built-in synthetic language as a 4-rank MPI job four times:
# DDP, B-SDP, N-SDP and Bb-SDP (C = 0.5), with the same steps, per-rank batch
# and seed, and prints one table comparing the loss reached (against the
# language's entropy rate), the peak memory per rank, the traffic per rank and
# the step time.
#
# With --sharding it runs DDP, FSDP with activation checkpointing (every
# block's parameters sharded over the 4 ranks and gathered per block, every
# block recomputed before its backward) and B-SDP + FSDP + AC (each storage
# group sharded over its owners) instead, side by side in the same table.
#
# With --pipeline it cuts mini into pipeline stages instead (4 ranks each):
# P = 2 stages x D = 2 replicas, the replicas of each stage running B-SDP
# (C = 0.5) among themselves by 1f1b-2bp; then P = 4 x D = 1 by 1f1b,
# 1f1b-2bp (two-stage backward: weight gradients deferred) and zb-h1. For
# each run it prints the median step time and, per rank, its stage, bubble,
# peak memory and bytes sent to its neighbours, and the measured timeline's
# SVG (out/demo/<run>/timeline.svg: simulated from the measured action costs
# above, measured below). Fewer, shorter steps than the other demos: the
# point is the schedules' time and memory, not the loss.
#
#   bash scripts/demo.sh                        # the default demo
#   bash scripts/demo.sh --sharding             # DDP, FSDP+AC, B-SDP+FSDP+AC
#   bash scripts/demo.sh --pipeline             # P=2 x D=2 B-SDP; P=4: 1f1b, 1f1b-2bp, zb-h1
#   bash scripts/demo.sh --steps 300 --lr 3e-3  # flags go to every sdp-train run
#   bash scripts/demo.sh --active-fraction 0.75 # C of the SDP runs
#
# A flag given here replaces the demo's value of the same flag (sdp-train
# refuses a flag given twice). Metrics: out/demo/<run>.jsonl, full logs:
# out/demo/<run>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

out=out/demo
ranks=4
mkdir -p "$out"

# --strategy and --metrics differ per run; letting them through would make
# every run the same or overwrite one file.
for a in "$@"; do
  case "$a" in
    --strategy | --strategy=* | --metrics | --metrics=* | --emulate-world* | --emulate-rank* | --dry-run | \
    --shard | --shard=* | --activation-checkpointing | --activation-checkpointing=* | \
    --pipeline-stages* | --schedule* | --pipeline-timeline*)
      echo "demo: ${a%%=*} is set by the demo for each run; to choose it, run sdp-train" \
           "under mpirun yourself (docs/training.md: 'Running a strategy yourself')" >&2
      exit 2 ;;
  esac
done

echo "demo: installing what is missing and building (log: $out/build.log)"
if ! ./scripts/build.sh >"$out/build.log" 2>&1; then
  tail -n 30 "$out/build.log" >&2
  echo "demo: the build failed; the whole log is $out/build.log" >&2
  exit 1
fi

# Open MPI's launcher, the root variables when root, one thread per rank.
source scripts/mpi_env.sh
sdp_mpi_setup

# Chosen so that the four runs take two to three minutes on 2 cores and DDP
# ends within ~0.02 nats/token of the entropy rate: lr 1e-2 gets there in
# half the steps of the default 3e-3 on this model, and 16 validation batches
# (8192 tokens) rather than 4 make the eval loss less noisy.
defaults=(--model mini --data synthetic --batch 8 --seq 64 --steps 150 --lr 1e-2
          --warmup 10 --eval-every 50 --eval-batches 16 --seed 1234)
# C applies to the SDP runs only (DDP is C = 1); the user's value replaces it.
fraction=(--active-fraction 0.5)
user=()
sharding=false
pipeline=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sharding) sharding=true; shift ;;
    --pipeline) pipeline=true; shift ;;
    --active-fraction) [[ $# -ge 2 ]] || { echo "demo: --active-fraction needs a value" >&2; exit 2; }
                       fraction=("$1" "$2"); shift 2 ;;
    --active-fraction=*) fraction=("$1"); shift ;;
    *) user+=("$1"); shift ;;
  esac
done
if $sharding && $pipeline; then
  echo "demo: --sharding and --pipeline are two demos; choose one" >&2
  exit 2
fi
if $pipeline; then
  # 50 steps of 4 micro-batches (the pipeline's M) of 4 sequences: the four
  # runs take well under a minute on 2 cores. There the 4 ranks share the
  # cores, so the measured bubbles include waiting for one.
  defaults=(--model mini --data synthetic --batch 4 --seq 64 --steps 50 --micro-batches 4
            --lr 1e-2 --warmup 5 --eval-every 0 --seed 1234)
fi
common=()
for ((i = 0; i < ${#defaults[@]}; i += 2)); do
  flag=${defaults[i]}
  overridden=false
  for a in "${user[@]}"; do
    [[ $a == "$flag" || $a == "$flag="* ]] && overridden=true
  done
  $overridden || common+=("$flag" "${defaults[i + 1]}")
done

# Each run: its name (the metrics and log file) and its flags besides C.
if $pipeline; then
  runs=(pp2-b-sdp-1f1b-2bp pp4-1f1b pp4-1f1b-2bp pp4-zb-h1)
elif $sharding; then
  runs=(ddp fsdp-ac b-sdp-fsdp-ac)
else
  runs=(ddp b-sdp n-sdp bb-sdp)
fi
run_flags() {
  case $1 in
    fsdp-ac) echo "--strategy fsdp --activation-checkpointing block" ;;
    b-sdp-fsdp-ac) echo "--strategy b-sdp --shard full --activation-checkpointing block" ;;
    pp2-b-sdp-1f1b-2bp) echo "--strategy b-sdp --pipeline-stages 2 --schedule 1f1b-2bp" ;;
    pp4-*) echo "--strategy ddp --pipeline-stages 4 --schedule ${1#pp4-}" ;;
    *) echo "--strategy $1" ;;
  esac
}
for s in "${runs[@]}"; do rm -f "$out/$s.jsonl"; done
start=$SECONDS
n=0
for s in "${runs[@]}"; do
  n=$((n + 1))
  read -ra flags <<<"$(run_flags "$s")"
  [[ $s == ddp || $s == fsdp-ac || $s == pp4-* ]] || flags+=("${fraction[@]}")
  $pipeline && flags+=(--pipeline-timeline "$out/$s")
  echo "demo: [$n/${#runs[@]}] $s on $ranks ranks (${MPIRUN[*]} -np $ranks, log: $out/$s.log)"
  # Only the evaluation lines are shown; the log keeps the plan, memory and
  # traffic tables sdp-train prints. (stdin closed: mpirun would forward it.)
  if ! "${MPIRUN[@]}" -np "$ranks" build/bin/sdp-train "${common[@]}" \
         "${flags[@]}" "${user[@]}" --metrics "$out/$s.jsonl" \
         --progress false </dev/null 2>&1 | tee "$out/$s.log" | awk '/^step +[0-9]+  train loss/{print "  " $0; fflush()}'; then
    tail -n 20 "$out/$s.log" >&2
    echo "demo: the $s run failed; its whole output is $out/$s.log" >&2
    exit 1
  fi
done
echo "demo: ${#runs[@]} runs in $((SECONDS - start)) s"
echo
if $pipeline; then
  # sdp-train's own per-rank table (peak memory, sent, stage, bubble, bytes
  # to the neighbours) from each log, with the median step time of rank 0.
  for s in "${runs[@]}"; do
    median=$(python3 -c 'import json, sys
t = sorted(json.loads(l)["seconds"] for l in open(sys.argv[1]) if "\"loss\"" in l)
print(f"{1e3 * t[len(t) // 2]:.1f}")' "$out/$s.jsonl")
    echo "== $s: median step $median ms; timeline $out/$s/timeline.svg"
    awk '/^rank +peak memory/{on=1} on&&/^[^0-9r]/{on=0} on{print "  " $0}' "$out/$s.log"
  done
  exit 0
fi
files=()
for s in "${runs[@]}"; do files+=("$out/$s.jsonl"); done
# The sharding demo is about what the compositions cost, so it adds the step time.
table_flags=()
$sharding && table_flags=(--step-time)
python3 scripts/demo_table.py "${table_flags[@]}" "${files[@]}"

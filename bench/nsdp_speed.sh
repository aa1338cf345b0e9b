#!/usr/bin/env bash
# N-SDP against B-SDP at equal FLOPs on CPU, one thread: one emulated rank
# (rank 0 of a 2-rank job) of each strategy at the same active fraction C,
# so both run the same counted FLOPs per step, each on its own subnetwork.
# Runs alternate (n-sdp, b-sdp, n-sdp, ...) ROUNDS times per model to spread
# load noise over both. Every figure is sdp-train's own: each run's step
# times and counted FLOPs from its metrics file (steps after the first
# WARMUP; the median step time), images/s or tokens/s = examples per step /
# that time. The table gives the median over the rounds and the ratio of
# FLOP rates (N-SDP / B-SDP, per round and its median). Builds nothing.
#
#   bash bench/nsdp_speed.sh BUILD_DIR     # prints a Markdown table
#
# Environment: ROUNDS (3), STEPS (8), WARMUP (3), C (0.5), CORETYPE (see
# scripts/mpi_env.sh: SkylakeX with AVX-512, Haswell with AVX2),
# CONFIGS ("resnet-mini:32 small:4:256": MODEL:BATCH[:SEQ]).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: bench/nsdp_speed.sh BUILD_DIR}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-8}
WARMUP=${WARMUP:-3}
C=${C:-0.5}
CONFIGS=${CONFIGS:-"resnet-mini:32 small:4:256"}
BIN=$BUILD/bin/sdp-train
source scripts/mpi_env.sh
sdp_require_sdp_train "$BIN" "$BUILD"
sdp_pick_openblas_core "$BIN"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
metrics=$(mktemp)
raw=$(mktemp)
trap 'rm -f "$metrics" "$raw"' EXIT

echo "OpenBLAS core: $core (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}), CPU: $cpu_model"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for spec in $CONFIGS; do
  IFS=: read -r model batch seq <<< "$spec"
  extra=(--data synthetic-images:augment=0)
  [[ -n $seq ]] && extra=(--seq "$seq")
  for ((r = 0; r < ROUNDS; ++r)); do
    for strategy in n-sdp b-sdp; do
      "$BIN" --model "$model" --batch "$batch" "${extra[@]}" --threads 1 \
        --steps $((WARMUP + STEPS)) --eval-every 0 --progress false \
        --strategy "$strategy" --active-fraction "$C" --emulate-world 2 --emulate-rank 0 \
        --metrics "$metrics" > /dev/null
      python3 - "$metrics" "$WARMUP" "$model" "$batch" "$strategy" "$r" >> "$raw" <<'EOF'
import json, statistics, sys
path, warmup, model, batch, strategy, rnd = sys.argv[1:]
steps = [json.loads(l) for l in open(path) if l.strip()]
steps = [s for s in steps if "step" in s and "seconds" in s][int(warmup):]
unit = "images" if "images" in steps[0] else "tokens"
sec = statistics.median(s["seconds"] for s in steps)
print(json.dumps({"model": model, "batch": int(batch), "strategy": strategy, "round": int(rnd),
                  "unit": unit, "per_s": steps[-1][unit] / sec,
                  "gflop_per_s": steps[-1]["flops"] / sec / 1e9,
                  "gflop_per_step": steps[-1]["flops"] / 1e9}))
EOF
      tail -1 "$raw" | python3 -c 'import json, sys; d = json.load(sys.stdin); print("  %s %s round %d: %.1f %s/s, %.2f GFLOP/s" % (d["model"], d["strategy"], d["round"], d["per_s"], d["unit"], d["gflop_per_s"]))' >&2
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 - "$raw" "$C" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"C = {sys.argv[2]}, rank 0 of 2 (emulated), one thread")
print()
print("| model | batch | unit | N-SDP /s | B-SDP /s | N-SDP GFLOP/step | B-SDP GFLOP/step "
      "| N-SDP GFLOP/s | B-SDP GFLOP/s | FLOP-rate ratio N/B (median; per round) |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
models = []
for r in rows:
    if (r["model"], r["batch"]) not in models:
        models.append((r["model"], r["batch"]))
for model, batch in models:
    sel = [r for r in rows if (r["model"], r["batch"]) == (model, batch)]
    n = [r for r in sel if r["strategy"] == "n-sdp"]
    b = [r for r in sel if r["strategy"] == "b-sdp"]
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    per_round = [x["gflop_per_s"] / y["gflop_per_s"] for x, y in zip(n, b)]
    print(f"| {model} | {batch} | {n[0]['unit']} | {med(n, 'per_s'):.1f} | {med(b, 'per_s'):.1f} "
          f"| {n[0]['gflop_per_step']:.3f} | {b[0]['gflop_per_step']:.3f} "
          f"| {med(n, 'gflop_per_s'):.2f} | {med(b, 'gflop_per_s'):.2f} "
          f"| {statistics.median(per_round):.2f} ({', '.join(f'{x:.2f}' for x in per_round)}) |")
EOF

#!/usr/bin/env bash
# N-SDP against B-SDP at equal FLOPs on CPU, one thread: every rank of a
# 2-rank job of each strategy at the same active fraction C, each rank
# emulated in a process of its own (--emulate-world 2 --emulate-rank R), so
# both jobs run the same counted FLOPs per step. B-SDP's two ranks differ
# (one holds the early blocks, the other the deep ones), so a job's FLOP
# rate is its counted FLOPs over both ranks divided by the sum of the ranks'
# step times. Runs alternate (each rank: n-sdp, b-sdp) ROUNDS times per
# model to spread load noise over both. Every figure is sdp-train's own:
# each run's step times and counted FLOPs from its metrics file, after
# WARMUP steps; "median" uses each run's median step time, "fastest" its
# fastest step (the least disturbed one on a shared machine). images/s or
# tokens/s: one rank's examples per step over its median step time, the
# mean of the two ranks. The ratio is N-SDP's FLOP rate over B-SDP's, per
# round and its median. Builds nothing.
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

# record MODEL BATCH STRATEGY ROUND RANK: one JSON line of the run's metrics
record() {
  python3 -c '
import json, statistics, sys
path, warmup, model, batch, strategy, rnd, rank = sys.argv[1:]
steps = [json.loads(l) for l in open(path) if l.strip()]
steps = [s for s in steps if "step" in s and "seconds" in s][int(warmup):]
unit = "images" if "images" in steps[0] else "tokens"
print(json.dumps({"model": model, "batch": int(batch), "strategy": strategy, "round": int(rnd),
                  "rank": int(rank), "unit": unit, "examples": steps[-1][unit],
                  "flops": steps[-1]["flops"],
                  "median_s": statistics.median(s["seconds"] for s in steps),
                  "fastest_s": min(s["seconds"] for s in steps)}))
' "$metrics" "$WARMUP" "$@"
}

echo "OpenBLAS core: $core (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}), CPU: $cpu_model"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for spec in $CONFIGS; do
  IFS=: read -r model batch seq <<< "$spec"
  extra=(--data synthetic-images:augment=0)
  [[ -n $seq ]] && extra=(--seq "$seq")
  for ((r = 0; r < ROUNDS; ++r)); do
    for rank in 0 1; do
      for strategy in n-sdp b-sdp; do
        "$BIN" --model "$model" --batch "$batch" "${extra[@]}" --threads 1 \
          --steps $((WARMUP + STEPS)) --eval-every 0 --progress false \
          --strategy "$strategy" --active-fraction "$C" --emulate-world 2 \
          --emulate-rank "$rank" --metrics "$metrics" > /dev/null
        record "$model" "$batch" "$strategy" "$r" "$rank" >> "$raw"
        tail -1 "$raw" | python3 -c 'import json, sys; d = json.load(sys.stdin); print("  %s %s rank %d round %d: %.2f GFLOP/s (fastest step %.2f)" % (d["model"], d["strategy"], d["rank"], d["round"], d["flops"] / d["median_s"] / 1e9, d["flops"] / d["fastest_s"] / 1e9))' >&2
      done
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
python3 - "$raw" "$C" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"C = {sys.argv[2]}, both ranks of a 2-rank job (each emulated alone), one thread")
print()
print("| model | batch | unit | N-SDP /s | B-SDP /s | GFLOP/step, both ranks (N; B) "
      "| N-SDP GFLOP/s | B-SDP GFLOP/s | ratio N/B, median steps (per round) "
      "| ratio N/B, fastest steps (per round) |")
print("|---|---:|---|---:|---:|---|---:|---:|---|---|")
keys = []
for r in rows:
    if (r["model"], r["batch"]) not in keys:
        keys.append((r["model"], r["batch"]))
S = ("n-sdp", "b-sdp")
for model, batch in keys:
    sel = [r for r in rows if (r["model"], r["batch"]) == (model, batch)]
    rounds = sorted({r["round"] for r in sel})
    runs = lambda s, k: [r for r in sel if r["strategy"] == s and r["round"] == k]
    job = lambda s, k, t: sum(r["flops"] for r in runs(s, k)) / sum(r[t] for r in runs(s, k)) / 1e9
    per_s = {s: statistics.median(statistics.mean(r["examples"] / r["median_s"] for r in runs(s, k))
                                  for k in rounds) for s in S}
    flops = {s: sum(r["flops"] for r in runs(s, rounds[0])) / 1e9 for s in S}
    rate = {(s, t): [job(s, k, t) for k in rounds] for s in S for t in ("median_s", "fastest_s")}
    ratio = {t: [n / b for n, b in zip(rate[("n-sdp", t)], rate[("b-sdp", t)])]
             for t in ("median_s", "fastest_s")}
    fmt = lambda xs: f"{statistics.median(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"
    print(f"| {model} | {batch} | {sel[0]['unit']} | {per_s['n-sdp']:.1f} | {per_s['b-sdp']:.1f} "
          f"| {flops['n-sdp']:.3f}; {flops['b-sdp']:.3f} "
          f"| {statistics.median(rate[('n-sdp', 'median_s')]):.2f} "
          f"| {statistics.median(rate[('b-sdp', 'median_s')]):.2f} "
          f"| {fmt(ratio['median_s'])} | {fmt(ratio['fastest_s'])} |")
EOF

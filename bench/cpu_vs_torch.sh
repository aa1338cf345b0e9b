#!/usr/bin/env bash
# One training step of the "small" LLaMA (dim 256, 4 layers, 8 heads, ffn 688,
# seq 256, batch 8, 1 thread, fp32, AdamW lr 1e-3 wd 0.1), sdp-engine vs the
# PyTorch reference (Debian torch, same system OpenBLAS), with
# OPENBLAS_CORETYPE unset, = Haswell (AVX2) and = SkylakeX (AVX-512). Runs are
# interleaved (ours, torch, ours, torch, ...) ROUNDS times to spread load noise
# over both; each run reports the median of its timed steps, and the table
# gives the median of those over the rounds (and the smallest single step).
#
#   bash bench/cpu_vs_torch.sh            # prints a Markdown table
#
# Environment: BUILD (default build), ROUNDS (3), STEPS (10), WARMUP (3),
# CORETYPES ("default Haswell SkylakeX"; default = the variable unset),
# V32K (1: also rows at vocab 32000, 1 round of V32K_STEPS (3) steps after 1
# warmup; 0: skip), RAW (file for the JSON lines, default a temp file).
# `bash bench/cpu_vs_torch.sh --table RAW...` re-prints the table of saved runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-3}
CORETYPES=${CORETYPES:-"default Haswell SkylakeX"}
V32K=${V32K:-1}
V32K_STEPS=${V32K_STEPS:-3}
RAW=${RAW:-$(mktemp /tmp/cpu_vs_torch.XXXXXX.jsonl)}
PY=/usr/bin/python3

# table FILES...: the Markdown table of the JSON lines in FILES
table() {
  $PY - "$@" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
keys = []
for r in rows:
    k = (r["label"], r["coretype"])
    if k not in keys:
        keys.append(k)
print("| config (dim 256, 4 layers, seq 256, batch 8, 1 thread) | OPENBLAS_CORETYPE | OpenBLAS core (ours) | runs | ours ms/step (min) | torch ms/step (min) | torch / ours | torch / ours, CPU time | ours GFLOP/s | load (1 min) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for label, ct in keys:
    ours = [r for r in rows if (r["label"], r["coretype"], r["impl_key"]) == (label, ct, "ours")]
    torch = [r for r in rows if (r["label"], r["coretype"], r["impl_key"]) == (label, ct, "torch")]
    om = statistics.median(r["ms_per_step"] for r in ours)
    tm = statistics.median(r["ms_per_step"] for r in torch)
    omin = min(r["min_ms"] for r in ours)
    tmin = min(r["min_ms"] for r in torch)
    core = ours[0].get("openblas_core", "?")
    oc = [r["cpu_ms_per_step"] for r in ours if "cpu_ms_per_step" in r]
    tc = [r["cpu_ms_per_step"] for r in torch if "cpu_ms_per_step" in r]
    cpu_ratio = f"{statistics.median(tc) / statistics.median(oc):.2f}" if oc and tc else "-"
    print(f"| {label} | {'unset' if ct == 'default' else ct} | {core} | {len(ours)} x {ours[0]['steps']} steps "
          f"| {om:.1f} ({omin:.1f}) | {tm:.1f} ({tmin:.1f}) | {tm / om:.2f} | {cpu_ratio} "
          f"| {ours[0]['gflop_per_step'] / (om / 1e3):.1f} "
          f"| {min(r['load1'] for r in ours + torch):.1f}-{max(r['load1'] for r in ours + torch):.1f} |")
EOF
}

OURS=$BUILD/bin/bench_llama_step
if [[ ${1:-} == --table ]]; then  # re-print the table of earlier runs' RAW files
  shift
  table "$@"
  exit
fi
[[ -x $OURS ]] || { echo "missing $OURS: build first (ninja -C $BUILD)" >&2; exit 2; }
: > "$RAW"

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# run_one LABEL CORETYPE IMPL ARGS...: appends {"label", "coretype", ...result} to RAW
run_one() {
  local label=$1 ct=$2 impl=$3; shift 3
  local out
  if [[ $ct == default ]]; then
    out=$(env -u OPENBLAS_CORETYPE "$@")
  else
    out=$(OPENBLAS_CORETYPE=$ct "$@")
  fi
  echo "$out" | $PY -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); d.update(label=sys.argv[1], coretype=sys.argv[2], impl_key=sys.argv[3], load1=float(open("/proc/loadavg").read().split()[0])); print(json.dumps(d))' \
    "$label" "$ct" "$impl" >> "$RAW"
  echo "  $label $ct $impl: $(tail -1 "$RAW" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["ms_per_step"], "ms/step")')" >&2
}

# config LABEL MODEL VOCAB ROUNDS STEPS WARMUP
config() {
  local label=$1 model=$2 vocab=$3 rounds=$4 steps=$5 warmup=$6
  for ct in $CORETYPES; do
    for ((r = 0; r < rounds; ++r)); do
      run_one "$label" "$ct" ours "$OURS" --model "$model" --batch 8 --seq 256 --threads 1 \
        --steps "$steps" --warmup "$warmup" --lr 1e-3 --json
      run_one "$label" "$ct" torch $PY bench/torch_ref/train_step_bench.py --dim 256 --layers 4 \
        --heads 8 --kv-heads 8 --ffn 688 --vocab "$vocab" --seq 256 --batch 8 --threads 1 \
        --steps "$steps" --warmup "$warmup" --lr 1e-3 --json
    done
  done
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
config "small (V 256)" small 256 "$ROUNDS" "$STEPS" "$WARMUP"
if [[ $V32K == 1 ]]; then
  config "small-32k (V 32000)" small-32k 32000 1 "$V32K_STEPS" 1
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average after: $LOAD_AFTER" >&2
echo "raw results: $RAW" >&2

table "$RAW"
echo
echo "load average after the runs (1, 5, 15 min): $LOAD_AFTER"

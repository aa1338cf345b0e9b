#!/usr/bin/env bash
# One training step of the CIFAR ResNets and Swin Transformers on CPU,
# sdp-engine (sdp-train) vs PyTorch: the ResNets' twin
# (bench/torch_ref/resnet_torch.py, Debian's torch 1.13 at /usr/bin/python3)
# or timm's SwinTransformer (the reference environment's python,
# BUILD/pyref, scripts/setup-python-ref.sh; drop path off on both sides),
# same model, batch and 3 x 32 x 32 images, 1 thread,
# f32, AdamW (lr 1e-3, wd 0.1 on >= 2-D parameters) and clipping to global
# norm 1.0 on both sides. Runs are interleaved (ours, torch, ours, torch, ...)
# ROUNDS times per OPENBLAS_CORETYPE setting to spread load noise over both;
# each run reports the median of its timed steps (after WARMUP untimed ones),
# and the table gives the median of those over the rounds (and the fastest
# single step).
#
#   bash bench/resnet_cpu_vs_torch.sh          # prints a Markdown table
#
# Ours: `sdp-train --model M --data synthetic-images:augment=0 --batch B
# --threads 1 --steps WARMUP+STEPS --eval-every 0 --metrics ...`: step times
# and counted FLOPs from the metrics; the step includes drawing the batch
# (synthetic images, generated per step: ~0.1 % of a resnet18 step). Process
# CPU time per step is sampled from /proc as each metrics line appears.
# Torch: `bench/torch_ref/resnet_step_bench.py` (one fixed random batch).
#
# Environment: BUILD (build), PYREF (BUILD/pyref/bin/python, for timm),
# ROUNDS (3), STEPS (4), WARMUP (2),
# CORETYPES ("default Haswell SkylakeX"; default = the variable unset),
# CONFIGS ("resnet18:32 resnet18:128:1:3 wrn18:32:1:3": MODEL:BATCH[:ROUNDS[:STEPS]]),
# RAW (file for the JSON lines, default a temp file).
# `bash bench/resnet_cpu_vs_torch.sh --table RAW...` re-prints the table of saved runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-4}
WARMUP=${WARMUP:-2}
CORETYPES=${CORETYPES:-"default Haswell SkylakeX"}
CONFIGS=${CONFIGS:-"resnet18:32 resnet18:128:1:3 wrn18:32:1:3"}
RAW=${RAW:-$(mktemp /tmp/resnet_cpu_vs_torch.XXXXXX.jsonl)}
PY=/usr/bin/python3
PYREF=${PYREF:-$BUILD/pyref/bin/python}
OURS=$BUILD/bin/sdp-train

# table FILES...: the Markdown table of the JSON lines in FILES
table() {
  $PY - "$@" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
keys = []
for r in rows:
    k = (r["model"], r["batch"], r["coretype"])
    if k not in keys:
        keys.append(k)
print("| model | batch | OPENBLAS_CORETYPE | OpenBLAS core | runs | ours ms/step (min) | torch ms/step (min) "
      "| ours images/s | torch images/s | torch / ours | torch / ours, CPU time | ours GFLOP/s (CPU time) | load (1 min) |")
print("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
for model, batch, ct in keys:
    sel = [r for r in rows if (r["model"], r["batch"], r["coretype"]) == (model, batch, ct)]
    ours = [r for r in sel if r["impl_key"] == "ours"]
    torch = [r for r in sel if r["impl_key"] == "torch"]
    if not ours or not torch:
        continue
    om = statistics.median(r["ms_per_step"] for r in ours)
    tm = statistics.median(r["ms_per_step"] for r in torch)
    oc = statistics.median(r["cpu_ms_per_step"] for r in ours)
    tc = statistics.median(r["cpu_ms_per_step"] for r in torch)
    omin = min(r["min_ms"] for r in ours)
    tmin = min(r["min_ms"] for r in torch)
    gflop = ours[0]["gflop_per_step"]
    loads = [r["load1"] for r in sel]
    print(f"| {model} | {batch} | {'unset' if ct == 'default' else ct} | {ours[0].get('openblas_core', '?')} "
          f"| {len(ours)} x {ours[0]['steps']} steps | {om:.0f} ({omin:.0f}) | {tm:.0f} ({tmin:.0f}) "
          f"| {batch / (om / 1e3):.1f} | {batch / (tm / 1e3):.1f} | {tm / om:.2f} | {tc / oc:.2f} "
          f"| {gflop / (om / 1e3):.1f} ({gflop / (oc / 1e3):.1f}) | {min(loads):.1f}-{max(loads):.1f} |")
EOF
}

if [[ ${1:-} == --table ]]; then  # re-print the table of earlier runs' RAW files
  shift
  table "$@"
  exit
fi
[[ -x $OURS ]] || { echo "missing $OURS: build first (ninja -C $BUILD sdp-train)" >&2; exit 2; }
: > "$RAW"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# ours_run WARMUP METRICS CMD...: runs CMD (sdp-train writing METRICS), samples
# the process's CPU time whenever a new metrics line appears, and prints one
# JSON line: median wall and CPU ms of the steps after WARMUP, counted FLOPs.
ours_run() {
  $PY - "$@" <<'EOF'
import json, os, statistics, subprocess, sys, time
warmup, metrics, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
if os.path.exists(metrics):
    os.remove(metrics)
tick = os.sysconf("SC_CLK_TCK")
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
cpu_at_line, seen = [], 0
def cpu_s():
    fields = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick  # utime + stime
while proc.poll() is None:
    try:
        n = sum(1 for _ in open(metrics))
        if n > seen:
            c = cpu_s()
            cpu_at_line += [c] * (n - seen)
            seen = n
    except (FileNotFoundError, ProcessLookupError):
        pass
    time.sleep(0.02)
if proc.returncode != 0:
    sys.exit(f"sdp-train failed ({proc.returncode}): {' '.join(cmd)}")
steps = [json.loads(l) for l in open(metrics) if '"step"' in l]
steps = [s for s in steps if "step" in s]
timed = steps[warmup:]
cpu = [(cpu_at_line[i] - cpu_at_line[i - 1]) * 1e3 for i in range(max(warmup, 1), len(steps))
       if i < len(cpu_at_line)]
ms = statistics.median(s["seconds"] * 1e3 for s in timed)
print(json.dumps({"impl": "sdp-engine", "ms_per_step": round(ms, 1),
                  "min_ms": round(min(s["seconds"] * 1e3 for s in timed), 1),
                  "cpu_ms_per_step": round(statistics.median(cpu), 1) if cpu else ms,
                  "gflop_per_step": timed[-1]["flops"] / 1e9, "steps": len(timed),
                  "images_per_s": round(timed[-1]["images"] / (ms / 1e3), 2),
                  "last_loss": timed[-1]["loss"]}))
EOF
}

# openblas_core CORETYPE: the kernel set OpenBLAS (the engine's OpenMP build) picks.
openblas_core() {
  local ct=$1 lib
  lib=$(ldd "$OURS" | awk '/libopenblas/ {print $3; exit}')
  local code="import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())"
  if [[ $ct == default ]]; then env -u OPENBLAS_CORETYPE $PY -c "$code" "$lib"
  else OPENBLAS_CORETYPE=$ct $PY -c "$code" "$lib"; fi
}

# run_one MODEL BATCH CORETYPE IMPL CORE CMD...: appends {...result, model, batch, coretype} to RAW
run_one() {
  local model=$1 batch=$2 ct=$3 impl=$4 core=$5; shift 5
  local out
  out=$(if [[ $ct == default ]]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE=$ct; fi
        "$@")
  echo "$out" | $PY -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); d.update(model=sys.argv[1], batch=int(sys.argv[2]), coretype=sys.argv[3], impl_key=sys.argv[4], openblas_core=sys.argv[5], load1=float(open("/proc/loadavg").read().split()[0])); print(json.dumps(d))' \
    "$model" "$batch" "$ct" "$impl" "$core" >> "$RAW"
  echo "  $model b$batch $ct $impl: $(tail -1 "$RAW" | $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["ms_per_step"], "ms/step,", d["cpu_ms_per_step"], "ms CPU")')" >&2
}

metrics=$(mktemp /tmp/resnet_cpu_vs_torch_metrics.XXXXXX.jsonl)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for spec in $CONFIGS; do
  IFS=: read -r model batch rounds steps <<< "$spec"
  rounds=${rounds:-$ROUNDS}
  steps=${steps:-$STEPS}
  for ct in $CORETYPES; do
    core=$(openblas_core "$ct")
    # Swin: timm's python, and no stochastic depth on either side.
    torch_py=$PY ours_extra=()
    if [[ $model == swin* ]]; then
      torch_py=$PYREF ours_extra=(--drop-path 0)
      [[ -x $torch_py ]] || { echo "missing $torch_py: run scripts/setup-python-ref.sh $BUILD" >&2; exit 2; }
    fi
    for ((r = 0; r < rounds; ++r)); do
      run_one "$model" "$batch" "$ct" ours "$core" ours_run "$WARMUP" "$metrics" "$OURS" \
        --model "$model" --data synthetic-images:augment=0 --batch "$batch" --threads 1 \
        --steps $((WARMUP + steps)) --lr 1e-3 --warmup 0 --weight-decay 0.1 --grad-clip 1 \
        --eval-every 0 --progress false "${ours_extra[@]}" \
        --metrics "$metrics"
      run_one "$model" "$batch" "$ct" torch "$core" "$torch_py" bench/torch_ref/resnet_step_bench.py \
        --model "$model" --batch "$batch" --threads 1 --steps "$steps" --warmup "$WARMUP" \
        --lr 1e-3 --json
    done
  done
done
rm -f "$metrics"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average after: $LOAD_AFTER" >&2
echo "raw results: $RAW" >&2

table "$RAW"
echo
echo "load average after the runs (1, 5, 15 min): $LOAD_AFTER"

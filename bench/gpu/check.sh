#!/usr/bin/env bash
# The GPU machine's one script: builds the engine on the bare machine, runs
# the CUDA tests (their semantics are proven in CI on the emulated CUDA
# device; here they meet the real GPU, cuBLASLt, cuDNN and NCCL), then times training steps of ours
# against PyTorch eager and torch.compile on the same model, batch and
# sequence, and prints a short Markdown table LAST (README.md beside this).
#
#   bash bench/gpu/check.sh          # on the GPU machine, from anywhere; $OUT set
#   bash bench/gpu/check.sh --dry    # here: same build, CPU stand-ins, GPU stages skipped
#
# Each stage runs under `timeout`, gets what is left of the budget (at most
# its own cap) and is skipped when too little is left; a failed stage is
# recorded and the script goes on. Everything lands in a work folder; after
# every stage $OUT gets summary.md, results.json, failures.txt and
# logs.tar.gz (the device call brings back at most 8 files).
#
# Knobs (environment): SDP_CHECK_BUDGET_S (530: whole run, seconds),
# SDP_CHECK_MODELS ("llama-134m llama-500m llama-1b": the first gets every
# benchmark, the others ours and eager, then compile, as time allows),
# SDP_CHECK_BATCH (16), SDP_CHECK_SEQ (1024), SDP_CHECK_STEPS (20),
# SDP_CHECK_JOBS (all cores), SDP_CHECK_BUILD (build-gpu),
# SDP_CHECK_TARGETS (empty: all), SDP_CHECK_WORK (/tmp/sdp-gpu-check),
# SDP_CHECK_CPU_TESTS (a ctest -R regex of CPU tests to run too; unset: none,
# CI runs them all on every change; --dry: ^comm),
# SDP_CHECK_PYTHON (the python with torch), SDP_CHECK_CMAKE_ARGS (extra),
# SDP_CHECK_RESNET ("on": the CIFAR ResNet stage after the first model's
# benchmarks; "only": build, then that stage alone, e.g. for a second call on
# the warm machine; "off"), SDP_CHECK_RESNET_MODEL (resnet18),
# SDP_CHECK_RESNET_BATCH (128), SDP_CHECK_RESNET_STEPS (20),
# SDP_CHECK_SHARDING ("on": the sharding and recomputation stage right after
# ours on the first model; "only": build, then that stage alone; "off"),
# SDP_CHECK_SHARDING_STEPS (4),
# SDP_CHECK_PIPELINE ("on": the pipeline stage after the sharding one;
# "only": build, then that stage alone; "off"), SDP_CHECK_PIPELINE_STEPS (4),
# SDP_CHECK_PIPELINE_BATCH (8: sequences per micro-batch; 4 micro-batches).
set -uo pipefail

START=$(date +%s)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO" || exit 1

DRY=0
DRY_REASON=""
for arg in "$@"; do
  case $arg in
    --dry) DRY=1; DRY_REASON="--dry given" ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "check.sh: unknown argument '$arg' (valid: --dry, --help)" >&2; exit 2 ;;
  esac
done

BUDGET_S=${SDP_CHECK_BUDGET_S:-530}
DEADLINE=$((START + BUDGET_S))
RESERVE_S=8  # the final summary and packing
OUT=${OUT:-$REPO/out/gpu-check}
WORK=${SDP_CHECK_WORK:-/tmp/sdp-gpu-check}
LOGS=$WORK/logs
RES=$WORK/results
PREFIX=$WORK/prefix
BUILD=${SDP_CHECK_BUILD:-$REPO/build-gpu}
JOBS=${SDP_CHECK_JOBS:-$(nproc)}
TARGETS=${SDP_CHECK_TARGETS:-}
read -ra MODELS <<< "${SDP_CHECK_MODELS:-llama-134m llama-500m llama-1b}"
BATCH=${SDP_CHECK_BATCH:-16}
SEQ=${SDP_CHECK_SEQ:-1024}
STEPS=${SDP_CHECK_STEPS:-20}
CPU_TESTS=${SDP_CHECK_CPU_TESTS-}
RESNET=${SDP_CHECK_RESNET:-on}
RESNET_MODEL=${SDP_CHECK_RESNET_MODEL:-resnet18}
RESNET_BATCH=${SDP_CHECK_RESNET_BATCH:-128}
RESNET_STEPS=${SDP_CHECK_RESNET_STEPS:-20}
SHARDING=${SDP_CHECK_SHARDING:-on}
SHARDING_STEPS=${SDP_CHECK_SHARDING_STEPS:-4}
PIPELINE=${SDP_CHECK_PIPELINE:-on}
PIPELINE_STEPS=${SDP_CHECK_PIPELINE_STEPS:-4}
PIPELINE_BATCH=${SDP_CHECK_PIPELINE_BATCH:-8}
PIPELINE_MICRO=4
case $RESNET in
  on|only|off) ;;
  *) echo "check.sh: SDP_CHECK_RESNET='$RESNET' (valid: on, only, off)" >&2; exit 2 ;;
esac
case $SHARDING in
  on|only|off) ;;
  *) echo "check.sh: SDP_CHECK_SHARDING='$SHARDING' (valid: on, only, off)" >&2; exit 2 ;;
esac
case $PIPELINE in
  on|only|off) ;;
  *) echo "check.sh: SDP_CHECK_PIPELINE='$PIPELINE' (valid: on, only, off)" >&2; exit 2 ;;
esac
only=()
[[ $RESNET == only ]] && only+=(SDP_CHECK_RESNET)
[[ $SHARDING == only ]] && only+=(SDP_CHECK_SHARDING)
[[ $PIPELINE == only ]] && only+=(SDP_CHECK_PIPELINE)
if ((${#only[@]} > 1)); then
  echo "check.sh: ${only[*]} are each =only and exclude each other (one stage alone per run)" >&2
  exit 2
fi
ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
OPENBLAS_DIR=$PREFIX/usr/lib/x86_64-linux-gnu/openblas-openmp
SDP_TRAIN=$BUILD/bin/sdp-train
SDP_PLAN=$BUILD/bin/sdp-plan

mkdir -p "$OUT" "$WORK"
rm -rf "$LOGS" "$RES" "$WORK/stages.tsv"
mkdir -p "$LOGS" "$RES"
: > "$WORK/stages.tsv"

say() { printf '[check %4ds] %s\n' "$(($(date +%s) - START))" "$*"; }

# ---- which python has torch, and is there a GPU ---------------------------
PY_TORCH=""
for candidate in ${SDP_CHECK_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch' >/dev/null 2>&1; then
    PY_TORCH=$(command -v "$candidate")
    break
  fi
done
PY=$(command -v python3 || echo /usr/bin/python3)  # any python 3: the summary uses the stdlib only

if ((DRY == 0)); then
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    DRY=1
    DRY_REASON="no GPU visible (nvidia-smi -L)"
  fi
fi
if ((DRY)); then
  # Stand-ins that exercise every parser on this machine's CPU in seconds.
  MODELS=(tiny)
  BATCH=2 SEQ=64 STEPS=6
  RESNET_MODEL=resnet-tiny RESNET_BATCH=8 RESNET_STEPS=6
  SHARDING_STEPS=2
  PIPELINE_STEPS=2 PIPELINE_BATCH=2
  RUN_DEVICE=cpu RUN_DTYPE=f32
  CPU_TESTS=${SDP_CHECK_CPU_TESTS-^comm}
else
  RUN_DEVICE=cuda RUN_DTYPE=bf16
fi
{
  echo "dry=$DRY"
  echo "dry_reason=$DRY_REASON"
  echo "budget_s=$BUDGET_S"
  echo "batch=$BATCH"
  echo "seq=$SEQ"
  echo "steps=$STEPS"
  echo "device=$RUN_DEVICE"
  echo "dtype=$RUN_DTYPE"
  echo "models=${MODELS[*]}"
  echo "python_torch=$PY_TORCH"
  echo "start=$START"
  echo "resnet=$RESNET"
  echo "resnet_model=$RESNET_MODEL"
  echo "resnet_batch=$RESNET_BATCH"
  echo "resnet_steps=$RESNET_STEPS"
  echo "sharding=$SHARDING"
  echo "sharding_steps=$SHARDING_STEPS"
  echo "pipeline=$PIPELINE"
  echo "pipeline_steps=$PIPELINE_STEPS"
  echo "pipeline_batch=$PIPELINE_BATCH"
  echo "pipeline_micro_batches=$PIPELINE_MICRO"
} > "$RES/config.txt"

export REPO HERE WORK LOGS RES PREFIX BUILD JOBS TARGETS BATCH SEQ STEPS CPU_TESTS DRY
export PY_TORCH PY OPENBLAS_DIR SDP_TRAIN RUN_DEVICE RUN_DTYPE ORIG_LD_LIBRARY_PATH
export RESNET_MODEL RESNET_BATCH RESNET_STEPS SHARDING_STEPS PIPELINE_STEPS PIPELINE_BATCH PIPELINE_MICRO

# ---- stage bookkeeping ----------------------------------------------------
record() {  # NAME STATUS SECONDS LIMIT NOTE
  local note=${5//$'\t'/ }
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${note:0:200}" >> "$WORK/stages.tsv"
  say "$1: $2 (${3}s)${5:+ - ${5:0:160}}"
}

refresh_out() {
  "$PY" "$HERE/summarize.py" --work "$WORK" --markdown "$OUT/summary.md" \
    --json "$OUT/results.json" --failures "$OUT/failures.txt" >/dev/null 2>>"$LOGS/summarize.log"
  tar -czf "$OUT/logs.tar.gz.part" -C "$WORK" logs results stages.tsv 2>/dev/null &&
    mv -f "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz"
}

# stage NAME CAP MIN FUNCTION [ARGS]: FUNCTION (exported) runs in a child
# bash under timeout, for at most CAP seconds and what the budget has left;
# skipped when less than MIN is left. Output goes to $LOGS/NAME.log.
stage() {
  local name=$1 cap=$2 min=$3
  shift 3
  local left=$((DEADLINE - $(date +%s) - RESERVE_S))
  if ((left < min)); then
    record "$name" skipped 0 "$cap" "not enough time left (${left} s < ${min} s)"
    refresh_out
    return 0
  fi
  local limit=$((cap < left ? cap : left))
  local t0
  t0=$(date +%s)
  timeout -k 10 "$limit" bash -c '"$@"' _ "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  local dt=$(($(date +%s) - t0))
  local status note=""
  case $rc in
    0) status=ok ;;
    124|137) status=timeout; note="stopped after ${limit} s" ;;
    *) status=failed; note="exit $rc: $(grep -v '^[[:space:]]*$' "$LOGS/$name.log" | tail -n 1)" ;;
  esac
  record "$name" "$status" "$dt" "$limit" "$note"
  refresh_out
  return 0
}

skip() {  # NAME REASON
  record "$1" skipped 0 0 "$2"
}

# ---- stages (each runs in its own bash) -----------------------------------
st_env() {
  echo "== date"; date -u
  echo "== host"; uname -a; nproc; free -g 2>/dev/null | head -2; df -h "$REPO" /tmp 2>/dev/null
  echo "== nvidia-smi"; nvidia-smi 2>&1 | head -20
  echo "== nvcc"; command -v nvcc; nvcc --version 2>&1 | tail -2
  ls -d /usr/local/cuda* 2>/dev/null
  echo "== cmake / ninja / gcc"; cmake --version | head -1; ninja --version; gcc --version | head -1
  echo "== dpkg / ar"; command -v dpkg dpkg-deb ar
  echo "== python"; echo "torch python: $PY_TORCH"
  if [[ -n $PY_TORCH ]]; then
    "$PY_TORCH" - <<'EOF'
import os, sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, "sm", f"{p.major}.{p.minor}", "multiprocessors", p.multi_processor_count,
          "memory GiB", round(p.total_memory / 2**30, 1))
try:
    import nvidia
    root = list(nvidia.__path__)[0]
    print("nvidia wheels:", root)
    for sub in sorted(os.listdir(root)):
        lib = os.path.join(root, sub, "lib")
        inc = os.path.join(root, sub, "include")
        libs = sorted(os.listdir(lib))[:6] if os.path.isdir(lib) else []
        print(f"  {sub}: include={os.path.isdir(inc)} lib={libs}")
except Exception as e:  # the summary only needs to know it failed
    print("no nvidia wheels:", e)
EOF
  fi
  echo "== system libraries"
  (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) |
    grep -E 'libgfortran|libquadmath|libgomp|libopenblas|libcudnn.so|libnccl.so|libcublas.so' | head -20
  {
    echo "gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
    echo "driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
    echo "nvcc=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)"
    echo "cmake=$(cmake --version 2>/dev/null | head -1)"
    echo "gcc=$(gcc --version 2>/dev/null | head -1)"
    [[ -n $PY_TORCH ]] && echo "torch=$("$PY_TORCH" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  } > "$RES/env.txt"
  return 0
}

# Runs a command with the LD_LIBRARY_PATH this script started with (torch
# brings its own CUDA libraries and must not see the engine's).
with_original_library_path() {
  if [[ -n $ORIG_LD_LIBRARY_PATH ]]; then
    env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" "$@"
  else
    env -u LD_LIBRARY_PATH "$@"
  fi
}

st_gemm() {
  local device=cuda
  ((DRY)) && device=cpu
  [[ -n $PY_TORCH ]] || { echo "no python with torch"; return 1; }
  with_original_library_path "$PY_TORCH" "$HERE/gemm_peak.py" --device "$device" \
    --json "$RES/gemm.json"
}

# Unpacks bench/gpu/debs/*.deb into $PREFIX: dpkg-deb, else ar + tar, else Python.
st_deps() {
  shopt -s nullglob
  local debs=("$HERE"/debs/*.deb)
  if ((${#debs[@]} == 0)); then
    echo "no .deb in bench/gpu/debs: run bench/gpu/prepare.sh on the development machine and"
    echo "name bench/gpu/debs in the device call's carry"
    return 1
  fi
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  local deb tmp
  for deb in "${debs[@]}"; do
    echo "unpacking $(basename "$deb")"
    if command -v dpkg-deb >/dev/null && dpkg-deb -x "$deb" "$PREFIX"; then continue; fi
    tmp=$(mktemp -d)
    if command -v ar >/dev/null && (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$PREFIX"); then
      rm -rf "$tmp"
      continue
    fi
    rm -rf "$tmp"
    "$PY" "$HERE/deb_extract.py" "$deb" "$PREFIX" || return 1
  done
  local missing=0 f
  for f in "$OPENBLAS_DIR/libopenblas.so" \
           "$PREFIX/usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h" \
           "$PREFIX/usr/lib/cmake/Catch2/Catch2Config.cmake" \
           "$PREFIX/usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake" \
           "$PREFIX/usr/share/cmake/CLI11/CLI11Config.cmake" \
           "$PREFIX/usr/lib/x86_64-linux-gnu/libgfortran.so.5"; do
    if [[ -e $f ]]; then echo "ok: $f"; else echo "MISSING: $f"; missing=1; fi
  done
  return $missing
}

st_configure() {
  local args=(-S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSDP_CUDA_ARCHITECTURES=90
              -DCMAKE_PREFIX_PATH="$PREFIX/usr"
              -DSDP_BLAS_LIBRARY="$OPENBLAS_DIR/libopenblas.so"
              -DSDP_CBLAS_INCLUDE="$PREFIX/usr/include/x86_64-linux-gnu/openblas-openmp"
              -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DBUILD_TESTING=ON
              -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    if command -v ninja >/dev/null; then args+=(-G Ninja); else args+=(-G "Unix Makefiles"); fi
  fi
  if ! command -v nvcc >/dev/null; then
    local c
    for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc; do
      if [[ -x $c ]]; then args+=(-DCMAKE_CUDA_COMPILER="$c"); break; fi
    done
  fi
  # shellcheck disable=SC2206
  args+=(${SDP_CHECK_CMAKE_ARGS:-})
  echo "cmake ${args[*]}"
  cmake "${args[@]}" || return 1
  grep -q 'CUDA toolkit found' "$LOGS/configure.log" ||
    { ((DRY)) || { echo "configured WITHOUT CUDA: the GPU stages cannot run"; return 1; }; }
}

st_build() {
  local keep_going=(-k 0)
  grep -q 'CMAKE_MAKE_PROGRAM.*ninja' "$BUILD/CMakeCache.txt" || keep_going=(-k)
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j "$JOBS" ${TARGETS:+--target $TARGETS} -- "${keep_going[@]}"
}

st_predict() {  # MODEL: the meta device's prediction of the step's peak memory
  "$SDP_TRAIN" --dry-run --model "$1" --batch "$BATCH" --seq "$SEQ" --dtype "$RUN_DTYPE" \
    --metrics "$RES/predict_$1.jsonl"
}

st_cuda_tests() {
  ctest --test-dir "$BUILD" -L cuda --output-on-failure --timeout 120 -j 4 \
    --output-junit "$RES/ctest_cuda.xml"
}

st_cuda_tests_list() {  # without a GPU: how many there are, run none
  ctest --test-dir "$BUILD" -L cuda -N | tee "$RES/ctest_cuda_listed.txt"
}

# The Swin Transformer's ops on CUDA against the CPU (tag [swin]: LayerNorm,
# GELU, the per-sample scale, the index maps, window attention at N = 16
# and 49, shifted and not). They are part of cuda_tests' [ops] too; run
# first and alone they get a log of their own, every comparison's measured
# error in it, and a kernel fault of theirs cannot hide behind the other
# ops. Without a GPU (--dry) the binary lists them instead.
st_cuda_swin_ops() {
  local bin
  bin=$(find "$BUILD" -name sdp_cuda_tests -type f -perm -u+x 2>/dev/null | head -n 1)
  [[ -n $bin ]] || { echo "no sdp_cuda_tests in $BUILD (built without CUDA?)"; return 1; }
  if ((DRY)); then
    "$bin" "[swin]" --list-tests
  else
    OMP_NUM_THREADS=4 "$bin" "[swin]" --durations yes
  fi
}

# make_world("nccl") without MPI (nccl_smoke.cpp), compiled with the flags
# CMake used for comm/make_world.cpp and linked to the build's libraries.
# Without a GPU it must fail saying so (exit 3): that passes in --dry.
st_nccl_smoke() {
  local cache=$BUILD/CMakeCache.txt
  grep -q 'NCCL communicator is built' "$LOGS/configure.log" ||
    { echo "this build has no NCCL communicator (see the configure log)"; return 1; }
  local flags=()
  mapfile -t flags < <("$PY" "$HERE/compile_flags.py" "$BUILD/compile_commands.json" \
                         comm/make_world.cpp)
  ((${#flags[@]})) || { echo "no compile flags for comm/make_world.cpp"; return 1; }
  local cxx nvcc nccl cudart="" dir
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$cache")
  nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$cache")
  nccl=$(sed -n 's/^SDP_NCCL_LIBRARY:FILEPATH=//p' "$cache")
  for dir in "$(dirname "$(dirname "$nvcc")")"/{lib64,targets/x86_64-linux/lib,lib}; do
    if [[ -e $dir/libcudart.so ]]; then cudart=$dir/libcudart.so; break; fi
  done
  [[ -n $cudart ]] || { echo "no libcudart.so next to $nvcc"; return 1; }
  echo "compiling with ${cxx:-c++} ${flags[*]}"
  "${cxx:-c++}" "${flags[@]}" -O1 "$HERE/nccl_smoke.cpp" -o "$WORK/nccl_smoke" \
    "$BUILD/libsdp_comm.a" "$BUILD/libsdp_core.a" "$nccl" "$cudart" -pthread \
    -Wl,-rpath,"$(dirname "$cudart")" || return 1
  NCCL_DEBUG=${NCCL_DEBUG:-WARN} "$WORK/nccl_smoke"
  local rc=$?
  if ((DRY && rc == 3)); then
    echo "no GPU here: the one-rank world refused with its message, as it must"
    return 0
  fi
  return $rc
}

st_cpu_tests() {
  ctest --test-dir "$BUILD" -LE 'cuda|mpi' ${CPU_TESTS:+-R "$CPU_TESTS"} -j "$JOBS" \
    --timeout 150 --output-on-failure --output-junit "$RES/ctest_cpu.xml"
}

# Samples the GPU's used memory (MiB) every 200 ms into FILE while the
# command after it runs; the sampler ends with it, or with the stage.
# (On a stage's timeout, `timeout` signals the stage's whole process group,
# the sampler included; its own 600 s limit is the last guard.)
with_smi() {  # FILE COMMAND...
  local file=$1
  shift
  SMI_PID=""
  if ((DRY == 0)) && command -v nvidia-smi >/dev/null; then
    timeout 600 nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
      > "$file" 2>/dev/null &
    SMI_PID=$!
    trap 'if [[ -n $SMI_PID ]]; then kill "$SMI_PID" 2>/dev/null; fi' EXIT
  fi
  "$@"
  local rc=$?
  if [[ -n $SMI_PID ]]; then kill "$SMI_PID" 2>/dev/null; fi
  return $rc
}

st_ours() {  # MODEL STEPS
  # NCCL (a one-rank world, if the trainer makes one) logs only its warnings.
  with_smi "$RES/smi_ours_$1.txt" env NCCL_DEBUG="${NCCL_DEBUG:-WARN}" \
    "$SDP_TRAIN" --device "$RUN_DEVICE" --dtype "$RUN_DTYPE" --model "$1" --batch "$BATCH" \
    --seq "$SEQ" --steps "$2" --eval-every 0 --progress false --metrics "$RES/ours_$1.jsonl"
}

# One rank of an 8-rank SDP job (C = 0.5), run on this GPU as that rank:
# its subnetwork, memory and counted traffic are real; the other ranks'
# collectives are emulated (counted, not run). Its peak beside DDP's (the
# plain run above) is the SDP saving on this device.
st_ours_sdp() {  # MODEL STRATEGY STEPS
  "$SDP_TRAIN" --device "$RUN_DEVICE" --dtype "$RUN_DTYPE" --model "$1" --batch "$BATCH" \
    --seq "$SEQ" --steps "$3" --eval-every 0 --progress false --strategy "$2" \
    --active-fraction 0.5 --emulate-world 8 --emulate-rank 0 \
    --metrics "$RES/ours_${2}_$1.jsonl"
}

# The planner's step-time model calibrated on the GPU: the plain run's
# metrics (ours_MODEL.jsonl) set the FLOP rate (one rank: no link to fit),
# and the model's DDP step beside the measured median step, then the
# model's estimate for 8 such GPUs on one node, DDP against B-SDP + FSDP +
# AC at C = 0.5 (plan_calibration_MODEL.json).
st_plan_calibration() {  # MODEL
  local metrics=$RES/ours_$1.jsonl out=$RES/plan_calibration_$1.json
  [[ -s $metrics ]] || { echo "no $metrics (the ours_$1 stage did not run)"; return 1; }
  [[ -x $SDP_PLAN ]] || { echo "sdp-plan was not built"; return 1; }
  local dtype_flag=(--dtype "$RUN_DTYPE")
  "$SDP_PLAN" --model "$1" --world 1 --batch "$BATCH" --seq "$SEQ" "${dtype_flag[@]}" \
    --calibrate "$metrics" --strategies ddp --format json > "$RES/plan_calibration_$1_w1.json" || return 1
  "$SDP_PLAN" --model "$1" --world 8 --batch "$BATCH" --seq "$SEQ" "${dtype_flag[@]}" \
    --calibrate "$metrics" --overlap on --strategies ddp,b-sdp:0.5+fsdp+ac \
    --format json > "$RES/plan_calibration_$1_w8.json" || return 1
  "$PY" - "$metrics" "$RES/plan_calibration_$1_w1.json" "$RES/plan_calibration_$1_w8.json" "$out" <<'PYEOF'
import json, statistics, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
seconds = [s["seconds"] for s in steps if "step" in s and "seconds" in s][1:]
one, eight = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
predicted = one["strategies"][0]["step_time"]["seconds"]
measured = statistics.median(seconds)
by = {s["label"]: s["step_time"]["seconds"] for s in eight["strategies"]}
result = {"measured_seconds": measured, "predicted_seconds": predicted,
          "ratio": predicted / measured, "model": one["step_time_model"], "eight_ranks": by}
json.dump(result, open(sys.argv[4], "w"), indent=2)
print(json.dumps(result, indent=2))
PYEOF
}

st_torch() {  # MODE MODEL STEPS
  [[ -n $PY_TORCH ]] || { echo "no python with torch"; return 1; }
  local extra=()
  ((DRY)) && extra=(--device cpu --precision autocast --threads "$JOBS")
  with_smi "$RES/smi_torch_$1_$2.txt" with_original_library_path PYTHONUNBUFFERED=1 \
    "$PY_TORCH" "$HERE/torch_llama_step.py" --mode "$1" --model "$2" --batch "$BATCH" \
    --seq "$SEQ" --steps "$3" --warmup "$( ((DRY)) && echo 1 || echo 5)" "${extra[@]}" \
    --json "$RES/torch_$1_$2.json"
}

# The CIFAR ResNet: ours in bf16, then f32, then PyTorch eager
# with bf16 autocast, then f32, each on the same model, batch and 32 x 32
# synthetic images; nvidia-smi sampled during each. Ours draws each batch on
# the host (the synthetic image set, no prefetch) inside its timed step;
# torch reuses one batch on the device. So ours' resnet-tiny at the same
# batch runs last: its step is the data, copy and launch floor under ours'.
# A failed run does not stop the rest.
st_resnet() {
  local model=$RESNET_MODEL rc=0 dtype precision dtypes=(bf16 f32) extra=() ours_extra=()
  if ((DRY)); then
    dtypes=(f32)  # the CPU engine has no bf16
    extra=(--device cpu --threads "$JOBS")
    ours_extra=(--threads "$JOBS")
  fi
  if [[ -x $SDP_TRAIN ]]; then
    for dtype in "${dtypes[@]}"; do
      echo "== ours $dtype"
      # NCCL (the one-rank world of a cuda run) logs only its warnings.
      with_smi "$RES/smi_resnet_ours_${dtype}_$model.txt" env NCCL_DEBUG="${NCCL_DEBUG:-WARN}" \
        "$SDP_TRAIN" --device "$RUN_DEVICE" \
        --dtype "$dtype" --model "$model" --data synthetic-images --batch "$RESNET_BATCH" \
        --steps "$RESNET_STEPS" --eval-every 0 --progress false "${ours_extra[@]}" \
        --metrics "$RES/resnet_ours_${dtype}_$model.jsonl" || rc=1
    done
  else
    echo "no $SDP_TRAIN: ours skipped"
    rc=1
  fi
  [[ -n $PY_TORCH ]] || { echo "no python with torch"; return 1; }
  for precision in autocast f32; do
    echo "== torch eager $precision"
    with_smi "$RES/smi_resnet_torch_${precision}_$model.txt" with_original_library_path \
      PYTHONUNBUFFERED=1 "$PY_TORCH" "$HERE/torch_resnet_step.py" --model "$model" \
      --batch "$RESNET_BATCH" --steps "$RESNET_STEPS" --warmup "$( ((DRY)) && echo 1 || echo 5)" \
      --precision "$precision" "${extra[@]}" --json "$RES/resnet_torch_${precision}_$model.json" ||
      rc=1
  done
  if [[ -x $SDP_TRAIN ]]; then
    echo "== ours floor: resnet-tiny ${dtypes[0]}"
    env NCCL_DEBUG="${NCCL_DEBUG:-WARN}" "$SDP_TRAIN" --device "$RUN_DEVICE" \
      --dtype "${dtypes[0]}" --model resnet-tiny \
      --data synthetic-images --batch "$RESNET_BATCH" --steps "$RESNET_STEPS" --eval-every 0 \
      --progress false "${ours_extra[@]}" --metrics "$RES/resnet_ours_floor_$model.jsonl" || rc=1
  fi
  return $rc
}

# Sharding and recomputation: what the meta device predicts against what
# the device holds, per memory category, for DDP, FSDP, FSDP+AC and
# B-SDP+FSDP+AC (C = 0.5) on MODEL in bf16 and f32 (--dry: f32), batch and
# sequence as above. Two kinds of rank:
#   r0/8  rank 0 of an 8-rank job, run alone on this GPU (--emulate-world 8
#         --emulate-rank 0): its shards, gathers and recomputation are real,
#         the other ranks' collectives emulated (counted, their data this
#         rank's own: the gathered parameters are defined and finite)
#   w1    the real one-rank job: NCCL world of one (nothing to shard there:
#         FSDP+AC is DDP with recomputation, through the NCCL communicator)
# Each run's first step is compared with a --dry-run (one step on the meta
# device, which mirrors the CUDA allocator's 512-byte blocks) byte for byte:
# the peak per category, the bytes held at the peak and the total. The
# manifest sharding.tsv lists the pairs; summarize.py makes the table. The
# CUDA-against-CPU numbers of a sharded step (an emulated ZeRO-1/2, FSDP+AC
# and B-SDP+FSDP+AC rank of the tiny model) are the cuda tests' [shard] cases.
sharding_flags() {  # COMPOSITION: sdp-train's flags for it
  case $1 in
    ddp) echo "--strategy ddp" ;;
    fsdp) echo "--strategy fsdp" ;;
    fsdp_ac) echo "--strategy fsdp --activation-checkpointing block" ;;
    bsdp_fsdp_ac) echo "--strategy b-sdp --active-fraction 0.5 --shard full --activation-checkpointing block" ;;
    *) echo "sharding_flags: unknown composition '$1'" >&2; return 1 ;;
  esac
}

sharding_run() {  # MODEL COMPOSITION DTYPE RANKS(r0/8|w1)
  local model=$1 comp=$2 dtype=$3 ranks=$4 flags emulate=() tag rc_run rc_meta t0
  flags=$(sharding_flags "$comp") || return 1
  [[ $ranks == r0/8 ]] && emulate=(--emulate-world 8 --emulate-rank 0)
  tag="${comp}_${dtype}_${ranks/\//of}"
  local run_file=$RES/sharding_${tag}_run.jsonl meta_file=$RES/sharding_${tag}_meta.jsonl
  rm -f "$run_file" "$meta_file"
  local common=(--model "$model" --batch "$BATCH" --seq "$SEQ" --dtype "$dtype" --eval-every 0
                --progress false "${emulate[@]}")
  echo "== $tag: $SDP_TRAIN ${common[*]} $flags"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  env NCCL_DEBUG="${NCCL_DEBUG:-WARN}" "$SDP_TRAIN" --device "$RUN_DEVICE" "${common[@]}" $flags \
    --steps "$SHARDING_STEPS" --metrics "$run_file"
  rc_run=$?
  # shellcheck disable=SC2086
  "$SDP_TRAIN" --dry-run "${common[@]}" $flags --metrics "$meta_file" > /dev/null
  rc_meta=$?
  echo "== $tag: run exit $rc_run, meta exit $rc_meta, $(($(date +%s) - t0)) s"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tag" "$comp" "$dtype" "$ranks" \
    "$(basename "$run_file")" "$(basename "$meta_file")" "$rc_run" "$rc_meta" >> "$RES/sharding.tsv"
  ((rc_run == 0 && rc_meta == 0))
}

st_sharding() {  # MODEL
  local model=$1 dtype comp rc=0 dtypes=(bf16 f32)
  ((DRY)) && dtypes=(f32)  # the CPU engine has no bf16
  : > "$RES/sharding.tsv"
  # bf16 (the GPU's dtype) first, so that a stage cut short by its cap
  # still has every composition of it.
  for dtype in "${dtypes[@]}"; do
    for comp in ddp fsdp fsdp_ac bsdp_fsdp_ac; do
      sharding_run "$model" "$comp" "$dtype" r0/8 || rc=1
    done
    for comp in ddp fsdp_ac; do
      sharding_run "$model" "$comp" "$dtype" w1 || rc=1
    done
  done
  # The stage fails when a run failed or meta and the device disagree.
  "$PY" "$HERE/summarize.py" --work "$WORK" --sharding-check || rc=1
  return $rc
}

# Pipelines: each rank of a 2-stage pipeline (P = 2, D = 1, M = 4) of MODEL
# runs alone on this GPU as an emulated rank (--emulate-world 2
# --emulate-rank 0, then 1): its stage's forwards, input and weight
# gradients are real, its sends and receives to the other stage counted and
# not run, so the times are the stage's compute without its waits. For 1f1b
# and 1f1b-2bp (two-stage backward: W deferred), each rank writes with
# --pipeline-timeline its stage's measured actions of the last step
# (pipeline_<schedule>_r<rank>/stage<k>_actions.json: the per-action costs
# that a costs file for sdp-pipeline is made of) and its metrics, and a meta
# --dry-run of the same rank gives the predicted peak. The manifest
# pipeline.tsv lists the runs; summarize.py makes the table (per-kind mean
# action ms, peak and activation peak on the device and on meta). An
# emulated receive moves nothing (the executor fills it with zeros), so the
# losses are not a job's; --skip-nonfinite keeps going should one still
# overflow (no update is applied; the times and bytes are what this check
# is for).
pipeline_run() {  # MODEL SCHEDULE RANK
  local model=$1 sched=$2 rank=$3 rc_run rc_meta t0
  local tag="${sched}_r${rank}"
  local dir=$RES/pipeline_$tag run_file=$RES/pipeline_${tag}_run.jsonl
  local meta_file=$RES/pipeline_${tag}_meta.jsonl
  rm -rf "$dir" "$run_file" "$meta_file"
  local common=(--model "$model" --batch "$PIPELINE_BATCH" --seq "$SEQ" --dtype "$RUN_DTYPE"
                --eval-every 0 --progress false --emulate-world 2 --emulate-rank "$rank"
                --pipeline-stages 2 --micro-batches "$PIPELINE_MICRO" --schedule "$sched"
                --skip-nonfinite "$PIPELINE_STEPS")
  echo "== $tag: $SDP_TRAIN --device $RUN_DEVICE ${common[*]}"
  t0=$(date +%s)
  "$SDP_TRAIN" --device "$RUN_DEVICE" "${common[@]}" --steps "$PIPELINE_STEPS" \
    --pipeline-timeline "$dir" --metrics "$run_file"
  rc_run=$?
  "$SDP_TRAIN" --dry-run "${common[@]}" --metrics "$meta_file" > /dev/null
  rc_meta=$?
  echo "== $tag: run exit $rc_run, meta exit $rc_meta, $(($(date +%s) - t0)) s"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$tag" "$sched" "$rank" "$(basename "$dir")" \
    "$(basename "$run_file")" "$(basename "$meta_file")" "$rc_run" "$rc_meta" >> "$RES/pipeline.tsv"
  ((rc_run == 0 && rc_meta == 0))
}

st_pipeline() {  # MODEL
  local model=$1 sched rank rc=0
  : > "$RES/pipeline.tsv"
  for sched in 1f1b 1f1b-2bp; do
    for rank in 0 1; do
      pipeline_run "$model" "$sched" "$rank" || rc=1
    done
  done
  # The stage fails when a run failed or left no measured actions.
  "$PY" "$HERE/summarize.py" --work "$WORK" --pipeline-check || rc=1
  return $rc
}

export -f with_original_library_path st_env st_gemm st_deps st_configure st_build st_predict st_cuda_tests \
  st_cuda_tests_list st_cuda_swin_ops st_nccl_smoke st_cpu_tests with_smi st_ours st_ours_sdp st_torch st_resnet \
  sharding_flags sharding_run st_sharding pipeline_run st_pipeline

# ---- the run --------------------------------------------------------------
say "repo $REPO, work $WORK, out $OUT, budget ${BUDGET_S} s$( ((DRY)) && echo ", DRY: $DRY_REASON")"
stage env 40 5 st_env
stage gemm_peak 60 20 st_gemm
stage deps 60 10 st_deps

# The engine's programs find OpenBLAS through their rpath; its Fortran
# runtime, and cuDNN / NCCL from Python wheels, through LD_LIBRARY_PATH. The
# unpacked Fortran runtime only where the system has none (torch's processes
# keep the original path).
prepend_library_path() {  # DIR: first on LD_LIBRARY_PATH (never an empty entry)
  LD_LIBRARY_PATH=$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
}
system_libs=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | awk '{print $1}')
for lib in libgfortran.so.5 libquadmath.so.0; do
  if ! grep -qx "$lib" <<< "$system_libs"; then
    prepend_library_path "$PREFIX/usr/lib/x86_64-linux-gnu"
    break
  fi
done

stage configure 120 20 st_configure
for var in SDP_CUDNN_LIBRARY SDP_NCCL_LIBRARY; do
  lib=$(sed -n "s/^$var:FILEPATH=//p" "$BUILD/CMakeCache.txt" 2>/dev/null)
  # cuDNN loads its engine libraries by name from its own folder: that folder
  # must be on the path wherever it is.
  if [[ -n $lib && -e $lib ]]; then prepend_library_path "$(dirname "$lib")"; fi
done
echo "engine_ld_library_path=${LD_LIBRARY_PATH:-}" >> "$RES/config.txt"
grep -h '^-- sdp:' "$LOGS/configure.log" 2>/dev/null | sed 's/^-- //' > "$RES/configure_summary.txt"

stage build 330 60 st_build
if [[ ! -x $SDP_TRAIN ]]; then
  say "no $SDP_TRAIN: the engine's benchmarks are skipped"
fi

if [[ $RESNET == only ]]; then
  stage "resnet_$RESNET_MODEL" 300 40 st_resnet
  refresh_out
  say "done in $(($(date +%s) - START)) s (SDP_CHECK_RESNET=only); in $OUT: summary.md results.json failures.txt logs.tar.gz"
  echo
  cat "$OUT/summary.md" 2>/dev/null || tail -n 20 "$LOGS/summarize.log" 2>/dev/null
  exit 0
fi

first=${MODELS[0]}
if [[ $PIPELINE == only ]]; then
  stage "pipeline_$first" 300 40 st_pipeline "$first"
  refresh_out
  say "done in $(($(date +%s) - START)) s (SDP_CHECK_PIPELINE=only); in $OUT: summary.md results.json failures.txt logs.tar.gz"
  echo
  cat "$OUT/summary.md" 2>/dev/null || tail -n 20 "$LOGS/summarize.log" 2>/dev/null
  exit 0
fi
if [[ $SHARDING == only ]]; then
  stage "sharding_$first" 300 40 st_sharding "$first"
  refresh_out
  say "done in $(($(date +%s) - START)) s (SDP_CHECK_SHARDING=only); in $OUT: summary.md results.json failures.txt logs.tar.gz"
  echo
  cat "$OUT/summary.md" 2>/dev/null || tail -n 20 "$LOGS/summarize.log" 2>/dev/null
  exit 0
fi
[[ -x $SDP_TRAIN ]] && stage "predict_$first" 60 10 st_predict "$first"
stage cuda_swin_ops 60 15 st_cuda_swin_ops
if ((DRY)); then
  stage cuda_tests_listed 60 10 st_cuda_tests_list
else
  stage cuda_tests 150 40 st_cuda_tests
fi
stage nccl_smoke 60 15 st_nccl_smoke
if [[ -x $SDP_TRAIN ]]; then
  stage "ours_$first" 150 40 st_ours "$first" "$STEPS"
  stage "plan_calibration_$first" 30 5 st_plan_calibration "$first"
  [[ $SHARDING == on ]] && stage "sharding_$first" 120 40 st_sharding "$first"
  [[ $PIPELINE == on ]] && stage "pipeline_$first" 90 30 st_pipeline "$first"
else
  skip "ours_$first" "sdp-train was not built"
fi
stage "torch_eager_$first" 120 40 st_torch eager "$first" "$STEPS"
if ((DRY)); then
  stage "torch_compile_$first" 60 5 st_torch compile "$first" "$STEPS"
else
  stage "torch_compile_$first" 200 100 st_torch compile "$first" "$STEPS"
fi
if [[ -x $SDP_TRAIN ]]; then
  for strategy in b-sdp n-sdp; do
    stage "ours_${strategy}_$first" 90 30 st_ours_sdp "$first" "$strategy" 10
  done
fi
[[ $RESNET == on ]] && stage "resnet_$RESNET_MODEL" 120 45 st_resnet
if [[ -n ${CPU_TESTS} ]]; then
  stage cpu_tests 150 40 st_cpu_tests
else
  skip cpu_tests "CI runs the CPU suite on every change (SDP_CHECK_CPU_TESTS selects some here)"
fi

# Larger models, as far as the budget goes: ours and eager first, then compile.
big_steps=$((STEPS / 2 > 5 ? STEPS / 2 : 5))
for model in "${MODELS[@]:1}"; do
  [[ -x $SDP_TRAIN ]] && stage "predict_$model" 30 10 st_predict "$model"
  [[ -x $SDP_TRAIN ]] && stage "ours_$model" 150 70 st_ours "$model" "$big_steps"
  stage "torch_eager_$model" 120 60 st_torch eager "$model" "$big_steps"
done
for model in "${MODELS[@]:1}"; do
  stage "torch_compile_$model" 200 150 st_torch compile "$model" "$big_steps"
done

refresh_out
say "done in $(($(date +%s) - START)) s; in $OUT: summary.md results.json failures.txt logs.tar.gz"
echo
if [[ -s $OUT/summary.md ]]; then
  cat "$OUT/summary.md"
else
  echo "no summary: see $LOGS/summarize.log"
  tail -n 20 "$LOGS/summarize.log" 2>/dev/null
fi

# Sourced (not run) by the scripts that launch multi-rank sdp-train jobs on
# this machine: scripts/demo.sh, bench/multi_rank_measured.sh,
# bench/convergence.sh. After `sdp_mpi_setup`, "${MPIRUN[@]}" -np N CMD runs
# N ranks, or the script has stopped saying how to install Open MPI.

# Stops with what to build when the sdp-train binary $1 is missing ($2: the
# build directory it belongs to).
sdp_require_sdp_train() {
  if [[ ! -x $1 ]]; then
    echo "${0##*/}: $1 is missing: build it first (bash scripts/build.sh, or" \
         "cmake --build $2 --target sdp-train)" >&2
    exit 1
  fi
}

sdp_mpi_setup() {
  local me=${0##*/} m found=""
  # The engine links Debian's Open MPI, so its launcher must be Open MPI's too
  # (another MPI's mpirun would start N unconnected world-of-1 processes, and
  # --oversubscribe is Open MPI's flag). Debian also names it mpirun.openmpi,
  # which calls itself OpenRTE in --version.
  for m in mpirun mpirun.openmpi; do
    if command -v "$m" >/dev/null && "$m" --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
      found=$m
      break
    fi
  done
  if [[ -z $found ]]; then
    if command -v mpirun >/dev/null; then
      echo "$me: the mpirun on PATH ($(command -v mpirun)) is not Open MPI's, which sdp-train" \
           "is built against." >&2
    else
      echo "$me: mpirun was not found." >&2
    fi
    echo "$me: install Open MPI with: sudo apt-get install openmpi-bin libopenmpi-dev" \
         "(Debian/Ubuntu; scripts/install-deps.sh does this), then run again." >&2
    exit 1
  fi
  # More ranks than cores is the point here (4 ranks on a 2-core machine).
  MPIRUN=("$found" --oversubscribe)
  # Open MPI refuses to run as root unless both variables say so (containers, CI).
  if [[ $(id -u) -eq 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  # One thread per rank: the ranks already share the cores, and more OpenMP
  # threads each would only contend. sdp-train's own default (its share of
  # the cores, printed as "threads: ...") gives the same where the ranks
  # outnumber the cores; fixed here so that the demo's and the benchmarks'
  # figures are at one thread per rank on any machine.
  export OMP_NUM_THREADS=1
}

# Benchmarks at one thread: exports OPENBLAS_CORETYPE from $CORETYPE (default
# SkylakeX where the CPU has AVX-512, Haswell with AVX2; "unset" leaves
# OpenBLAS to choose, which on a CPU newer than Debian's OpenBLAS may be a
# slow generic kernel), and sets `core` (the kernel set OpenBLAS then picks
# in the library binary $1 links) and `cpu_model` for the report.
sdp_pick_openblas_core() {
  local BIN=$1 lib
  if [[ -z ${CORETYPE:-} ]]; then
    if grep -qw avx512f /proc/cpuinfo; then CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo; then CORETYPE=Haswell
    else CORETYPE=unset; fi
  fi
  if [[ $CORETYPE == unset ]]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE=$CORETYPE; fi
  # The kernel set OpenBLAS (the library sdp-train links) picks under this setting.
  lib=$(ldd "$BIN" | awk '/libopenblas/ {print $3; exit}')
  core=$(python3 -c "import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())" "$lib" 2>/dev/null || echo "?")
  cpu_model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
}

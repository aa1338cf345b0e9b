#!/usr/bin/env bash
# Builds the whole suite with AddressSanitizer and UndefinedBehaviorSanitizer
# (the debug-sanitize preset: gcc, Debug, -Werror, the CUDA backend built for
# the emulated CUDA device) into ./build-sanitize and runs every test but the
# fuzz targets (they carry their own sanitizers, and run in scripts/test.sh)
# and the bench scripts' cases (label bench: Python over the same binaries):
# the CPU suite, and the CUDA tests, the emulator's own tests and the 4-rank
# emulated CUDA jobs. Any sanitizer report fails the test that made it.
# Slower than scripts/test.sh: a Debug build, and instrumented code runs
# several times slower. The Hugging Face tests use ./build/pyref when
# scripts/test.sh has made it (they skip, saying so, otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pyref=()
[[ -x build/pyref/bin/python ]] && pyref=(-DSDP_PYREF_DIR="$PWD/build/pyref")
cmake --preset debug-sanitize "${pyref[@]}" ${SDP_CMAKE_ARGS:-}
cmake --build --preset debug-sanitize --parallel "$(nproc)"
# Instrumented MPI jobs are slow: a longer per-test limit than the release run.
ctest --preset debug-sanitize --parallel "$(nproc)" --timeout 1500 -LE "fuzz|bench" "$@"

#!/usr/bin/env bash
# Builds the whole suite with AddressSanitizer and UndefinedBehaviorSanitizer
# (the debug-sanitize preset: gcc, Debug, -Werror, CPU only) into
# ./build-sanitize and runs every test but the fuzz targets (they carry their
# own sanitizers, and run in scripts/test.sh). Any sanitizer report fails the
# test that made it. Slower than scripts/test.sh: a Debug build, and
# instrumented code runs several times slower.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake --preset debug-sanitize ${SDP_CMAKE_ARGS:-}
cmake --build --preset debug-sanitize --parallel "$(nproc)"
# Instrumented MPI jobs are slow: a longer per-test limit than the release run.
ctest --preset debug-sanitize --parallel "$(nproc)" --timeout 1500 -LE fuzz "$@"

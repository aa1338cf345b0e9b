#!/bin/sh
# Configures and builds the fuzz targets (test/fuzz/CMakeLists.txt) with
# clang into BUILD_DIR. Where clang or libFuzzer's runtime is missing it
# says so, leaves BUILD_DIR/UNAVAILABLE for the fuzz runs, and exits 77
# (ctest: Skipped).
#   build_fuzzers.sh SOURCE_DIR BUILD_DIR [COMPILER_LAUNCHER]
set -eu
src=$1
build=$2
launcher=${3:-}
cxx=${SDP_FUZZ_CXX:-clang++}
mkdir -p "$build"
rm -f "$build/UNAVAILABLE"

unavailable() {
  echo "fuzz targets not built: $1" | tee "$build/UNAVAILABLE"
  exit 77
}

command -v "$cxx" >/dev/null 2>&1 ||
  unavailable "no $cxx (install clang and libclang-rt-dev: scripts/install-deps.sh)"
probe=$build/probe_libfuzzer.cpp
printf '%s\n' 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe"
"$cxx" -fsanitize=fuzzer,address,undefined "$probe" -o "$build/probe_libfuzzer" >/dev/null 2>&1 ||
  unavailable "$cxx cannot link -fsanitize=fuzzer,address,undefined (install libclang-rt-dev)"

generator=
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"
# shellcheck disable=SC2086  # $generator is one or two words by design
cmake -S "$src/test/fuzz" -B "$build" $generator \
  -DCMAKE_CXX_COMPILER="$cxx" ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} >/dev/null
cmake --build "$build" --parallel "${SDP_FUZZ_JOBS:-2}"

#!/usr/bin/env bash
# Installs missing Debian packages and builds sdp-engine into ./build (Release).
# CUDA sources compile whenever nvcc is found (on PATH or in /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${SDP_CMAKE_ARGS:-}
cmake --build build --parallel "$(nproc)"

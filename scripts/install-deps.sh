#!/usr/bin/env bash
# Installs from Debian what a fresh machine lacks to build and test sdp-engine.
# Idempotent: when every package is present it installs nothing and exits 0.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libopenblas-openmp-dev            # BLAS for the CPU backend (OpenMP build)
  libopenmpi-dev openmpi-bin        # MPI communicator and multi-rank tests
  catch2 libcli11-dev nlohmann-json3-dev
  clang libclang-rt-dev             # the fuzz targets (test/fuzz): clang and libFuzzer's runtime
)
# The PyTorch reference of the CPU benchmark and of the logits cross-check;
# torchvision for timm (the Swin reference); python3-venv for the reference
# checks' environment (setup-python-ref.sh).
if [[ "${SDP_WITH_TORCH:-1}" == 1 ]]; then
  packages+=(python3-torch python3-torchvision python3-numpy python3-venv)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"

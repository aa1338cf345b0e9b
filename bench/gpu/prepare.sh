#!/usr/bin/env bash
# Run HERE (Debian, with apt), before a GPU-machine run: downloads into
# bench/gpu/debs/ (git-ignored; the device call carries it) the Debian
# packages the engine needs to build on the bare GPU machine, which has CUDA,
# CMake, ninja and PyTorch but none of our host dependencies and no package
# registry. check.sh unpacks them into a private prefix there.
#
#   bash bench/gpu/prepare.sh        # then: run(command=..., carry=["bench/gpu/debs"])
#
# Only what the build needs: three header-only libraries (nlohmann-json,
# CLI11, Catch2 v2) and OpenBLAS's OpenMP build with its Fortran runtime,
# which the GPU machine may lack. libgomp comes from the machine's own gcc.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dest=$here/debs

# libopenblas-dev and libopenblas0 are only alternatives wrappers (docs, no
# files we use): the -openmp packages hold the library, cblas.h and the
# unversioned libopenblas.so the linker wants.
packages=(
  nlohmann-json3-dev
  libcli11-dev
  catch2
  libopenblas0-openmp
  libopenblas-openmp-dev
  libgfortran5
  libquadmath0
)

arch=$(dpkg --print-architecture)
if [[ $arch != amd64 ]]; then
  echo "prepare.sh: this machine is $arch; the GPU machine is x86-64 (amd64)." >&2
  echo "  Fetch amd64 packages with apt's -oAPT::Architecture=amd64 lists" >&2
  echo "  (dpkg --add-architecture amd64, apt-get update, apt-get download) or run this on an amd64 host." >&2
  exit 1
fi

mkdir -p "$dest"
rm -f "$dest"/*.deb
for p in "${packages[@]}"; do
  if ! apt-cache show "$p" >/dev/null 2>&1; then
    echo "prepare.sh: apt knows no package '$p' (run apt-get update?)" >&2
    exit 1
  fi
done
# As root, apt's download sandbox user cannot write here: download as root.
sandbox=()
if [[ $(id -u) == 0 ]]; then sandbox=(-o APT::Sandbox::User=root); fi
(cd "$dest" && apt-get download -q "${sandbox[@]}" "${packages[@]}")

echo "fetched into $dest:"
total=0
for f in "$dest"/*.deb; do
  size=$(stat -c %s "$f")
  total=$((total + size))
  printf '  %-60s %8.2f MiB\n' "$(basename "$f")" "$(echo "$size / 1048576" | bc -l)"
done
printf '  %-60s %8.2f MiB (the device call carries at most 64 MiB in all)\n' "total" \
  "$(echo "$total / 1048576" | bc -l)"

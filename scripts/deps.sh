#!/usr/bin/env bash
# Installs, with apt-get, only the Debian packages aether needs that are missing.
# Safe to run twice: a second run finds nothing to do.
set -euo pipefail

packages=(cmake ninja-build pkg-config g++ librapidcheck-dev libgtest-dev libbenchmark-dev
          libboost-dev libgmp-dev lcov clang libclang-rt-14-dev clang-format python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "deps: CUDA found at /usr/local/cuda ($(/usr/local/cuda/bin/nvcc --version | tail -1))"
else
  echo "deps: no nvcc at /usr/local/cuda: the CPU backend alone will be built"
fi

#!/usr/bin/env bash
# The test command (README): install what is missing, build the default preset
# (CUDA too when nvcc is present), run unit tests, every property suite and the
# fuzz corpus replays. CUDA cases skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
preset=default
[ -x /usr/local/cuda/bin/nvcc ] || preset=cpu
cmake --preset "$preset"
cmake --build --preset "$preset" --parallel "$(nproc)"
ctest --preset "$preset" --parallel "$(nproc)" -L 'unit|props|fuzz'

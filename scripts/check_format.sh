#!/usr/bin/env bash
# ctest `format`: every tracked C++ and CUDA file follows .clang-format. Lists the
# files that do not; `clang-format -i FILE` fixes one.
set -uo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh')
[ ${#files[@]} -gt 0 ] || { echo "format: no tracked sources (not a git checkout?)"; exit 1; }
if ! clang-format --dry-run --Werror "${files[@]}" >/dev/null 2>&1; then
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "format: not formatted: $f"
  done
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"

#!/usr/bin/env bash
# Gathers what scripts/gpu.sh runs on the GPU machine (which has no compiler and
# takes at most 64 MiB of carried files) from a build made here: the CUDA test,
# property and benchmark binaries, stripped, in the build folder's layout, and
# any staged mutants (compressed). Usage: scripts/gpu_bundle.sh [BUILD] [BUNDLE]
# (default build/default -> build/gpu); then run `scripts/gpu.sh BUNDLE` there.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
bundle=${2:-build/gpu}
rm -rf "$bundle" && mkdir -p "$bundle/tests" "$bundle/props" "$bundle/bench"
for c in witness indexer paging compress dosa; do
  strip -o "$bundle/tests/${c}_test" "$build/tests/${c}_test"
  strip -o "$bundle/props/${c}_props" "$build/props/${c}_props"
done
strip -o "$bundle/props/dosa_cuda_props" "$build/props/dosa_cuda_props"
strip -o "$bundle/tests/dosa_cuda_test" "$build/tests/dosa_cuda_test"
strip -o "$bundle/props/formats_props" "$build/props/formats_props"
strip -o "$bundle/tests/formats_cuda_test" "$build/tests/formats_cuda_test"
for b in "$build"/bench/*_cuda; do strip -o "$bundle/bench/$(basename "$b")" "$b"; done
# Mutants' suites stripped and xz-compressed (two suites each, thirteen mutants
# would pass the carry limit as they are); gpu.sh unpacks them.
for m in "$build"/mutants/*/; do
  [ -d "$m" ] || continue
  mkdir -p "$bundle/mutants/$(basename "$m")"
  for f in "$m"*; do
    strip -o "$bundle/mutants/$(basename "$m")/$(basename "$f")" "$f"
    xz -T2 -6 "$bundle/mutants/$(basename "$m")/$(basename "$f")"
  done
done
du -sh "$bundle"

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
# AETHER_BUNDLE_ONLY=STEM keeps one component's suites and benchmark (a smaller carry)
only=${AETHER_BUNDLE_ONLY:-}
keep() { [[ -z $only || $(basename "$1") == "$only"* ]]; }
for f in "$build"/tests/{witness,witness_shapes,indexer,indexer_scores,paging,compress,compress_refusal,compress_cuda,dosa,dosa_cuda,dosa_decode_cuda,formats_cuda}_test \
         "$build"/props/{witness,indexer,indexer_scores,paging,compress,compress_refusal,dosa,dosa_cuda,formats}_props \
         "$build"/bench/*_cuda; do
  keep "$f" || continue
  strip -o "$bundle/${f#"$build"/}" "$f"
done
# Mutants' suites stripped and xz-compressed (a component's suites each, a dozen
# mutants would pass the carry limit as they are); gpu.sh unpacks them.
for m in "$build"/mutants/*/; do
  [ -d "$m" ] || continue
  mkdir -p "$bundle/mutants/$(basename "$m")"
  for f in "$m"*; do
    strip -o "$bundle/mutants/$(basename "$m")/$(basename "$f")" "$f"
    xz -T2 -6 "$bundle/mutants/$(basename "$m")/$(basename "$f")"
  done
done
du -sh "$bundle"

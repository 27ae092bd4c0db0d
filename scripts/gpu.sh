#!/usr/bin/env bash
# One GPU run (H200): every CUDA test and property suite, every CUDA suite under
# compute-sanitizer's memcheck, initcheck, racecheck and synccheck, then the GPU
# benchmarks. Uses an existing build (default: build/default, built on the CPU
# machine with nvcc, sm_90 + PTX, static cudart). Logs go to $OUT when set. Exits
# non-zero on any failure.
# AETHER_GPU_STEPS picks among "suites sanitize bench mutants" (default: all four),
# so that a run fits one command's time on the GPU machine; AETHER_SANITIZE_ONLY
# ("STEM ...") keeps the sanitizer runs to some components' suites, and
# AETHER_SANITIZE_TOOLS to some of the four tools.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
out=${OUT:-build/gpu-logs}
mkdir -p "$out"
status=0
# Every step has a time limit: a wrong kernel can make a property's shrinking run
# for as long as it is let.
limit=${AETHER_STEP_LIMIT:-240}
step() {  # step NAME COMMAND...: run, log, remember failure; returns the exit code
  local name=$1; shift
  for a in "$@"; do  # a partial bundle (gpu_bundle.sh's AETHER_BUNDLE_ONLY) lacks the rest
    if [[ $a == "$build"/* && ! -e $a ]]; then echo "== $name: not in $build, skipped"; return 0; fi
  done
  echo "== $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 4 "$out/$name.log"
  [ $rc -eq 124 ] && echo "== $name: timed out after $limit s"
  echo "== $name: rc=$rc in $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || status=1
  return $rc
}
# A component's properties and sanitizer runs go only after its tests pass: on a
# broken build they would fail too, only slower.
failed_tests=" "
checked() {  # [VAR=value] checked COMPONENT FUNCTION ARGS...
  local component=$1; shift
  if [[ $failed_tests == *" $component "* ]]; then echo "== skipped ($component tests failed): $*"; return; fi
  "$@"
}
sanitize() {  # sanitize TOOL NAME BINARY ARGS...
  local tool=$1 name=$2; shift 2
  step "$name" compute-sanitizer --tool "$tool" --error-exitcode 1 "$@"
}

steps=" ${AETHER_GPU_STEPS:-suites sanitize bench mutants} "
want() { [[ $steps == *" $1 "* ]]; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$out/device.txt"
if want suites; then
for c in witness witness_shapes indexer indexer_scores paging compress compress_refusal compress_cuda dosa dosa_cuda dosa_decode_cuda formats_cuda; do
  step ${c}_test "$build/tests/${c}_test" || failed_tests+="${c%%_*} "  # the component
done
checked witness step witness_props "$build/props/witness_props"
checked indexer step indexer_props "$build/props/indexer_props" --gtest_filter='IndexerCuda.*'
checked indexer step indexer_scores_props "$build/props/indexer_scores_props" --gtest_filter='IndexerCuda.*'
checked paging step paging_props "$build/props/paging_props" --gtest_filter='PagingCuda.*'
checked dosa step dosa_cuda_props "$build/props/dosa_cuda_props"
step formats_props "$build/props/formats_props" --gtest_filter='FormatsCuda.*' || failed_tests+="formats "
checked compress step compress_props "$build/props/compress_props" --gtest_filter='CompressCuda.*'
checked compress step compress_refusal_props "$build/props/compress_refusal_props" --gtest_filter='CompressCuda.*'
fi
# Every CUDA suite under each compute-sanitizer tool: the tests whole, the
# properties on fewer cases (300 under memcheck and initcheck, 40 under the slower
# racecheck and synccheck).
audit() {  # audit COMPONENT SUITE BINARY FILTER, under $tool with $cases cases
  [[ -z ${AETHER_SANITIZE_ONLY:-} || " $AETHER_SANITIZE_ONLY " == *" $1 "* ]] || return 0
  RC_PARAMS=max_success=$cases checked "$1" sanitize $tool "${tool}_$2" "$3" --gtest_filter="$4"
}
if want sanitize; then
for tool in ${AETHER_SANITIZE_TOOLS:-memcheck initcheck racecheck synccheck}; do
  cases=300; [[ $tool == racecheck || $tool == synccheck ]] && cases=40
  audit witness witness_test "$build/tests/witness_test" '*/cuda'
  audit witness witness_shapes_test "$build/tests/witness_shapes_test" '*/cuda'
  audit witness witness_props "$build/props/witness_props" 'WitnessCuda.*'
  audit indexer indexer_test "$build/tests/indexer_test" 'IndexerCuda.*'
  audit indexer indexer_props "$build/props/indexer_props" 'IndexerCuda.*'
  audit indexer indexer_scores_test "$build/tests/indexer_scores_test" 'IndexerCuda.*'
  audit indexer indexer_scores_props "$build/props/indexer_scores_props" 'IndexerCuda.*'
  audit paging paging_test "$build/tests/paging_test" '*/cuda*'
  audit paging paging_props "$build/props/paging_props" 'PagingCuda.*'
  audit compress compress_test "$build/tests/compress_test" '*/cuda*'
  audit compress compress_refusal_test "$build/tests/compress_refusal_test" '*/cuda*'
  # (the serving-size prefills take half a minute a launch mode under racecheck)
  audit compress compress_cuda_test "$build/tests/compress_cuda_test" \
    "$([[ $tool == racecheck ]] && echo '-*large_prefills*' || echo '*')"
  audit compress compress_props "$build/props/compress_props" 'CompressCuda.*'
  audit compress compress_refusal_props "$build/props/compress_refusal_props" 'CompressCuda.*'
  audit dosa dosa_cuda_test "$build/tests/dosa_cuda_test" '*'
  audit dosa dosa_decode_cuda_test "$build/tests/dosa_decode_cuda_test" '*'
  audit dosa dosa_cuda_props "$build/props/dosa_cuda_props" '*'
  # (under initcheck a store queued behind a held stream returns only once the stream
  # is let go, on the H200: the held-stream test runs under the other three tools)
  audit formats formats_cuda_test "$build/tests/formats_cuda_test" \
    "$([[ $tool == initcheck ]] && echo '-*stores_return_while_their_stream_is_held*' || echo '*')"
  audit formats formats_props "$build/props/formats_props" 'FormatsCuda.*'
done
fi
if want bench; then
step witness_bench_cuda "$build/bench/witness_bench_cuda"
cat "$out/witness_bench_cuda.log"
mkdir -p /tmp/aether_topk
AETHER_TOPK_DUMP=/tmp/aether_topk step indexer_bench_cuda "$build/bench/indexer_bench_cuda"
cat "$out/indexer_bench_cuda.log"
AETHER_TOPK_DUMP=/tmp/aether_topk step indexer_topk_distributions "$build/bench/indexer_bench_cuda" distributions
cat "$out/indexer_topk_distributions.log"
step indexer_topk_torch python3 bench/indexer_topk_torch.py /tmp/aether_topk
cat "$out/indexer_topk_torch.log"
step indexer_scores_bench_cuda "$build/bench/indexer_scores_bench_cuda"
cat "$out/indexer_scores_bench_cuda.log"
step indexer_scores_torch python3 bench/indexer_scores_torch.py
cat "$out/indexer_scores_torch.log"
step formats_bench_cuda "$build/bench/formats_bench_cuda"
cat "$out/formats_bench_cuda.log"
step dosa_bench_cuda "$build/bench/dosa_bench_cuda"
cat "$out/dosa_bench_cuda.log"
step dosa_bench_cuda_breakeven "$build/bench/dosa_bench_cuda" breakeven
cat "$out/dosa_bench_cuda_breakeven.log"
step paging_bench_cuda "$build/bench/paging_bench_cuda"
cat "$out/paging_bench_cuda.log"
step compress_bench_cuda "$build/bench/compress_bench_cuda"
cat "$out/compress_bench_cuda.log"
fi
# Mutants staged by `AETHER_MUTANT_STAGE=BUILD/mutants scripts/mutants.sh`: each must
# fail its CUDA tests or properties (few cases, a time limit: a wrong kernel can make
# shrinking slow). A crash (a kernel reading far out of bounds) kills it too.
for m in "$build"/mutants/*/; do
  [ -d "$m" ] && want mutants || continue
  name=$(basename "$m")
  suites=/tmp/aether_mutants/$name  # unpacked from gpu_bundle.sh's .xz files
  mkdir -p "$suites"
  for f in "$m"*; do
    if [[ $f == *.xz ]]; then xz -dc "$f" >"$suites/$(basename "${f%.xz}")"; else cp "$f" "$suites/"; fi
  done
  chmod +x "$suites"/*
  : >"$out/mutant-$name.log"
  codes=""
  for suite in "$suites"/*_props "$suites"/*_test; do
    RC_PARAMS=max_success=300 timeout 60 "$suite" --gtest_brief=1 \
      --gtest_filter='*Cuda*.*:*/cuda*' >>"$out/mutant-$name.log" 2>&1
    codes+=" $?"
  done
  failed=$(grep -c '^\[  FAILED  \] [A-Z].*(' "$out/mutant-$name.log")
  if [ "$failed" -gt 0 ] || [[ $codes == *[1-9]* ]]; then
    echo "== mutant $name: killed ($failed failing tests; exit codes$codes)"
  else echo "== mutant $name: SURVIVED"; status=1; fi
done
echo "gpu.sh: $([ $status -eq 0 ] && echo all passed || echo FAILURES, see logs in $out)"
exit $status

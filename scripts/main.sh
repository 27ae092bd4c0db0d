#!/usr/bin/env bash
# The main job (README): install what is missing, build, run every test and
# property suite on every backend present (CUDA cases run when a GPU is visible),
# replay the fuzz corpora, fuzz each target for a bounded time with libFuzzer
# (AETHER_FUZZ_SECONDS, default 30), write build/report.md, print a per-component
# summary, exit non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${AETHER_FUZZ_SECONDS:-30}
components=(witness attention indexer paging compress)
fuzz_targets=(witness indexer paging compress)
report=build/report.md
mkdir -p build
failures=0

scripts/deps.sh || exit 1
preset=default
[ -x /usr/local/cuda/bin/nvcc ] || preset=cpu
cmake --preset "$preset" >/dev/null && cmake --build --preset "$preset" --parallel "$(nproc)" || exit 1
gpu="no GPU visible: CUDA cases skipped"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && gpu="GPU: $(nvidia-smi -L | head -1)"

{
  echo "# aether verification report"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- preset: $preset; $gpu"
  echo
  echo "| component | unit | props | fuzz replay | fuzz run |"
  echo "| --- | --- | --- | --- | --- |"
} >"$report"

run_ctest() {  # run_ctest REGEX -> what its cases did, or FAILED (runs in a subshell)
  local log total failed passed skipped inputs
  log=$(ctest --test-dir "build/$preset" -R "$1" -V 2>&1)
  total=$(grep -oP 'out of \K[0-9]+' <<<"$log" | tail -1)
  [ -n "$total" ] || { echo "-"; return; }
  failed=$(grep -oP '[0-9]+(?= tests failed)' <<<"$log" | tail -1)
  if [ "${failed:-0}" -ne 0 ]; then
    echo "$log" | grep -E 'FAILED|Failure|replay:' | head -40 >&2
    echo "FAILED"
    return
  fi
  passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' <<<"$log" | awk '{s += $1} END {print s + 0}')
  skipped=$(grep -oP '\[  SKIPPED \] \K[0-9]+(?= test)' <<<"$log" | awk '{s += $1} END {print s + 0}')
  inputs=$(grep -oP 'replay: \K[0-9]+(?= inputs)' <<<"$log" | awk '{s += $1} END {print s + 0}')
  if [ "$inputs" != 0 ]; then echo "$inputs inputs agree"
  else echo "${passed:-0} passed, ${skipped:-0} skipped"; fi
}

# libFuzzer pass: clang build with ASan + UBSan, each target's bounded ctest run.
declare -A fuzz_run
if cmake --preset fuzz -DAETHER_FUZZ_SECONDS="$fuzz_seconds" >/dev/null 2>&1 &&
   cmake --build --preset fuzz >/dev/null 2>&1; then
  for t in "${fuzz_targets[@]}"; do
    log=$(ctest --test-dir build/fuzz -R "^${t}_fuzz_run\$" -V 2>&1)
    execs=$(grep -oP 'average_exec_per_sec:\s*\K[0-9]+' <<<"$log")
    if grep -q '100% tests passed' <<<"$log"; then
      fuzz_run[$t]="ok, ${execs:-?} exec/s for ${fuzz_seconds} s"
    else
      fuzz_run[$t]="FAILED"; failures=$((failures + 1)); echo "$log" | tail -40 >&2
    fi
  done
else
  for t in "${fuzz_targets[@]}"; do fuzz_run[$t]="FAILED to build"; done
  failures=$((failures + 1))
fi

for c in "${components[@]}"; do
  unit=$(run_ctest "^${c}_test\$")
  props=$(run_ctest "^${c}_props\$")
  replay=$(run_ctest "^${c}_fuzz_replay\$")
  for r in "$unit" "$props" "$replay"; do [ "$r" != FAILED ] || failures=$((failures + 1)); done
  echo "| $c | $unit | $props | $replay | ${fuzz_run[$c]:--} |" >>"$report"
done
{
  echo
  echo "Agreement levels per component: docs/<component>.md. Benchmarks: docs/performance.md."
  echo
  echo "Result: $([ $failures -eq 0 ] && echo PASS || echo "FAIL ($failures failing steps)")"
} >>"$report"

echo
cat "$report"
exit $((failures > 0))

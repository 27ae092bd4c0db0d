#!/usr/bin/env bash
# The main job (README): install what is missing, build, run every unit and
# property suite on every backend present (CUDA cases run when a GPU is visible),
# replay the fuzz corpora, fuzz each target for a bounded time with libFuzzer,
# write build/report/report.md (per property: level, cases, time, result; per
# fuzz target: executions, exec/s, corpus, new inputs; every failure with its
# counterexample and replay line) and JUnit XML beside it (build/report/junit),
# print a per-component summary, exit non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/main.sh [--cases N] [--fuzz-seconds S] [--seed N] [--components LIST]
  --cases N          property cases per property (default 10000)
  --fuzz-seconds S   seconds of libFuzzer per target (default 30; 0 skips the runs)
  --seed N           RapidCheck and libFuzzer seed (default: a fresh one, printed)
  --components LIST  comma-separated subset of: witness,attention,indexer,paging,compress,dosa,sharing,formats
EOF
}
cases=10000 fuzz_seconds=${AETHER_FUZZ_SECONDS:-30} seed="" list="witness,attention,indexer,paging,compress,dosa,sharing,formats"
while [ $# -gt 0 ]; do
  case $1 in
    --cases) cases=$2; shift 2 ;;
    --fuzz-seconds) fuzz_seconds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --components) list=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "main: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
for n in "$cases" "$fuzz_seconds" ${seed:+"$seed"}; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "main: not a non-negative integer: $n" >&2; exit 2; }
done
IFS=, read -r -a components <<<"$list"
for c in "${components[@]}"; do
  [[ " witness attention indexer paging compress dosa sharing formats " == *" $c "* ]] ||
    { echo "main: unknown component $c" >&2; exit 2; }
done
# A seed is always chosen, so that a failing run can be repeated exactly.
[ -n "$seed" ] || seed=$(( (RANDOM << 15 | RANDOM) + 1 ))

out=build/report
rm -rf "$out" && mkdir -p "$out/junit" "$out/logs" "$out/fuzz"
start=$SECONDS
failures=0
progress() { printf '[%3d:%02d] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }
step() {  # step NAME LOG COMMAND...: runs it, logs it, prints one progress line
  local name=$1 log=$2 t0=$SECONDS
  shift 2
  progress "$name ..."
  if "$@" >"$log" 2>&1; then progress "$name: ok ($((SECONDS - t0)) s)"; return 0; fi
  progress "$name: FAILED ($((SECONDS - t0)) s, log $log)"
  failures=$((failures + 1))
  return 1
}

step "dependencies" "$out/logs/deps.log" scripts/deps.sh || { cat "$out/logs/deps.log"; exit 1; }
preset=default
[ -x /usr/local/cuda/bin/nvcc ] || preset=cpu
step "build ($preset preset)" "$out/logs/build.log" \
  bash -c "cmake --preset $preset && cmake --build --preset $preset --parallel $(nproc)" ||
  { tail -40 "$out/logs/build.log"; exit 1; }
gpu="no GPU visible: CUDA cases skipped"
nvidia-smi -L >/dev/null 2>&1 && gpu="GPU: $(nvidia-smi -L | head -1)"
bin=build/$preset
export RC_PARAMS="max_success=$cases seed=$seed"

for c in "${components[@]}"; do
  # every suite of the component: STEM_test and STEM_props, then the ones of its own
  # parts (STEM_cuda_test, STEM_math_test, STEM_refusal_props, ...)
  for suite in "$bin/tests/${c}_test" "$bin/tests/${c}"_*_test; do
    [ -x "$suite" ] || continue
    name=$(basename "$suite")
    step "$c: unit tests ($name)" "$out/logs/$name.log" "$suite" --gtest_output="xml:$out/junit/$name.xml"
  done
  for suite in "$bin/props/${c}_props" "$bin/props/${c}"_*_props; do
    [ -x "$suite" ] || continue
    name=$(basename "$suite")
    step "$c: properties ($name, $cases cases each)" "$out/logs/$name.log" \
      "$suite" --gtest_output="xml:$out/junit/$name.xml"
  done
  [ -d "fuzz/corpus/${c}_fuzz" ] || continue
  step "$c: fuzz corpus replay" "$out/fuzz/${c}_replay.log" \
    ctest --test-dir "$bin" -R "^${c}_fuzz_replay\$" -V --output-junit "$PWD/$out/junit/${c}_fuzz_replay.xml"
done

fuzzed=()
for c in "${components[@]}"; do [ -d "fuzz/corpus/${c}_fuzz" ] && fuzzed+=("$c"); done
if [ "$fuzz_seconds" -gt 0 ] && [ ${#fuzzed[@]} -gt 0 ]; then
  if step "fuzz build (clang, libFuzzer, ASan + UBSan)" "$out/logs/fuzz_build.log" bash -c \
    "cmake --preset fuzz -DAETHER_FUZZ_SECONDS=$fuzz_seconds -DAETHER_FUZZ_SEED=$seed && cmake --build --preset fuzz"; then
    for c in "${fuzzed[@]}"; do
      scratch=build/fuzz/fuzz/${c}_new_inputs
      rm -rf "$scratch" && mkdir -p "$scratch"
      step "$c: libFuzzer for $fuzz_seconds s" "$out/fuzz/${c}_run.log" \
        ctest --test-dir build/fuzz -R "^${c}_fuzz_run\$" -V --output-junit "$PWD/$out/junit/${c}_fuzz_run.xml"
      echo "aether: new_inputs: $(find "$scratch" -type f | wc -l)" >>"$out/fuzz/${c}_run.log"
    done
  fi
fi

{
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- preset: $preset; $gpu"
  echo "- $cases cases per property; seed $seed; libFuzzer $fuzz_seconds s per target"
  echo "- repeat: \`scripts/main.sh --cases $cases --seed $seed --fuzz-seconds $fuzz_seconds --components $list\`"
  echo "- JUnit XML: \`$out/junit/\`; logs: \`$out/logs/\`, \`$out/fuzz/\`"
} >"$out/settings.txt"
progress "report"
python3 scripts/report.py "$out" "${components[@]}" || failures=$((failures + 1))
progress "done: $([ $failures -eq 0 ] && echo PASS || echo "FAIL ($failures failing steps)")"
exit $((failures > 0))

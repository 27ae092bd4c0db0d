#!/usr/bin/env bash
# Deliberately broken variants (issue 2): each must make a property or test fail.
# Breaks one line, rebuilds the witness suites, runs them, restores the file.
# Exits non-zero if a mutant survives. Usage: scripts/mutants.sh [build-dir]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
survivors=0

mutant() {  # mutant NAME FILE SED-EXPRESSION
  local name=$1 file=$2 expr=$3 backup
  backup=$(mktemp)
  cp "$file" "$backup"
  sed -i "$expr" "$file"
  if cmp -s "$file" "$backup"; then
    echo "mutant $name: the expression no longer applies to $file"; survivors=$((survivors + 1))
  elif ! cmake --build "$build" --target witness_props witness_test >/dev/null 2>&1; then
    echo "mutant $name: does not build"; survivors=$((survivors + 1))
  else
    local failed
    failed=$( { RC_PARAMS=max_success=10000 "$build/props/witness_props" --gtest_filter='Witness*' --gtest_brief=1
                "$build/tests/witness_test" --gtest_brief=1; } 2>&1 | grep -c '^\[  FAILED  \] [A-Z].*(')
    if [ "$failed" -gt 0 ]; then echo "mutant $name: killed by $failed failing tests"
    else echo "mutant $name: SURVIVED"; survivors=$((survivors + 1)); fi
  fi
  cp "$backup" "$file"
  rm -f "$backup"
}

mutant cpu-edge-floor impl/cpu/witness.cpp \
  's|return std::int32_t((s \* len + s_eff - 1) / s_eff);|return std::int32_t((s * len) / s_eff);|'
mutant model-edge-floor model/witness.cpp \
  's|return static_cast<std::size_t>((n + d - 1) / d);|return static_cast<std::size_t>(n / d);|'
mutant cpu-keep-off-by-one impl/cpu/witness.cpp \
  's|dst\[learned_keep + j\] = segment_edge|dst[learned_keep + 1 + j] = segment_edge|'
mutant model-keep-off-by-one model/witness.cpp \
  's|out\[r \* topk + learned_keep + j++\] = w;|out[r * topk + learned_keep - (learned_keep > 0) + j++] = w;|'
mutant cpu-padding-marks-segment-0 impl/cpu/witness.cpp 's|  if (x < 0) return 0;|  if (x < 0) return 1;|'
mutant model-padding-marks-segment-0 model/witness.cpp 's|    if (x >= 0)$|    if (x >= -1)|'
mutant cpu-budget-ignored impl/cpu/witness.cpp \
  's|const std::size_t budget = std::min(max_replacements, topk - learned_keep);|const std::size_t budget = topk - learned_keep;|'
mutant model-budget-ignored model/witness.cpp \
  's|const std::size_t budget = std::min(max_replacements, topk - learned_keep);|const std::size_t budget = topk - learned_keep;|'
mutant cpu-refusal-writes impl/cpu/witness.cpp \
  's|  if (auto e = impl::merge_refusal(|  std::fill(out.begin(), out.end(), 0);\n  if (auto e = impl::merge_refusal(|'
mutant impl-keep-equal-refused impl/witness_refusals.hpp \
  's|if (learned_keep > topk) return|if (learned_keep >= topk) return|'

cmake --build "$build" --target witness_props witness_test >/dev/null 2>&1
echo "mutants: $survivors survived"
exit $((survivors > 0))

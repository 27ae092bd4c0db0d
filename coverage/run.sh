#!/usr/bin/env bash
# Line + branch coverage of model/ and impl/ host code (tests, props and support
# excluded) from the unit, property and fuzz-replay runs of the coverage preset
# (gcc --coverage -Og, CPU backend). HTML in build/coverage/html, titled with the
# commit and the thresholds; the summary is printed and checked against them (exit
# 1 when under). Branches are the source's: the compiler's exception edges (taken
# only when an allocation throws) are not counted (drop_exception_edges.py); the
# count with them is printed beside.
set -euo pipefail
cd "$(dirname "$0")/.."
min_lines=${AETHER_MIN_LINES:-95}
min_branches=${AETHER_MIN_BRANCHES:-85}
build=build/coverage

scripts/deps.sh
cmake --preset coverage >/dev/null
cmake --build --preset coverage --parallel "$(nproc)"
lcov --quiet --zerocounters --directory "$build"
# Fewer cases than the default run (coverage saturates long before 10,000), and a
# fixed seed, so that the report of a commit is the same on every run.
# The installed-package test links uninstrumented code against these objects: skipped here.
RC_PARAMS=${RC_PARAMS:-"max_success=1000 seed=20261201"} ctest --test-dir "$build" -L 'unit|props|fuzz' -E consumer_install --output-on-failure
lcov --quiet --capture --directory "$build" --output-file "$build/all.info" \
     --rc lcov_branch_coverage=1
lcov --quiet --extract "$build/all.info" "$PWD/model/*" "$PWD/impl/*" \
     --output-file "$build/with_exception_edges.info" --rc lcov_branch_coverage=1
python3 coverage/drop_exception_edges.py "$build" "$build/with_exception_edges.info" "$build/aether.info"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
genhtml --quiet --branch-coverage --legend --rc lcov_branch_coverage=1 \
        --title "aether model/ and impl/ at $commit (thresholds: lines ${min_lines}%, branches ${min_branches}%)" \
        --output-directory "$build/html" "$build/aether.info"
summary=$(lcov --summary "$build/aether.info" --rc lcov_branch_coverage=1 2>&1 | grep -v redefined)
raw=$(lcov --summary "$build/with_exception_edges.info" --rc lcov_branch_coverage=1 2>&1 |
      grep -oP 'branches\.*: \K.*')
{ echo "commit $commit"; echo "$summary"; echo "  branches with exception edges: $raw"; } |
  tee "$build/summary.txt"
lines=$(grep -oP 'lines\.*: \K[0-9.]+' <<<"$summary")
branches=$(grep -oP 'branches\.*: \K[0-9.]+' <<<"$summary")
echo "coverage: lines ${lines}% (min ${min_lines}), branches ${branches}% (min ${min_branches}); HTML: $build/html/index.html"
awk -v l="$lines" -v b="$branches" -v ml="$min_lines" -v mb="$min_branches" \
    'BEGIN { exit !(l >= ml && b >= mb) }' || { echo "coverage: under threshold"; exit 1; }

#!/usr/bin/env bash
# Line + branch coverage of model/ and impl/ host code (tests, props and support
# excluded) from the unit, property and fuzz-replay runs of the coverage preset
# (gcc --coverage -Og, CPU backend). HTML in build/coverage/html; the summary is
# printed and checked against the thresholds below (exit 1 when under).
set -euo pipefail
cd "$(dirname "$0")/.."
min_lines=${AETHER_MIN_LINES:-90}
min_branches=${AETHER_MIN_BRANCHES:-60}
build=build/coverage

scripts/deps.sh
cmake --preset coverage >/dev/null
cmake --build --preset coverage --parallel "$(nproc)"
lcov --quiet --zerocounters --directory "$build"
# Fewer cases than the default run: coverage saturates long before 10,000.
# The installed-package test links uninstrumented code against these objects: skipped here.
RC_PARAMS=${RC_PARAMS:-max_success=1000} ctest --test-dir "$build" -L 'unit|props|fuzz' -E consumer_install --output-on-failure
lcov --quiet --capture --directory "$build" --output-file "$build/all.info" \
     --rc lcov_branch_coverage=1
lcov --quiet --extract "$build/all.info" "$PWD/model/*" "$PWD/impl/*" \
     --output-file "$build/aether.info" --rc lcov_branch_coverage=1
genhtml --quiet --branch-coverage --legend --title "aether: model/ and impl/" \
        --output-directory "$build/html" "$build/aether.info"
summary=$(lcov --summary "$build/aether.info" --rc lcov_branch_coverage=1 2>&1 | grep -v redefined)
echo "$summary" | tee "$build/summary.txt"
lines=$(grep -oP 'lines\.*: \K[0-9.]+' <<<"$summary")
branches=$(grep -oP 'branches\.*: \K[0-9.]+' <<<"$summary")
echo "coverage: lines ${lines}% (min ${min_lines}), branches ${branches}% (min ${min_branches}); HTML: $build/html/index.html"
awk -v l="$lines" -v b="$branches" -v ml="$min_lines" -v mb="$min_branches" \
    'BEGIN { exit !(l >= ml && b >= mb) }' || { echo "coverage: under threshold"; exit 1; }

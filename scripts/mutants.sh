#!/usr/bin/env bash
# Deliberately broken variants: each must make a property or test of its
# component fail. Breaks one line, rebuilds that component's suites, runs them,
# restores the file. Exits non-zero if a mutant survives.
# Usage: scripts/mutants.sh [build-dir] [component ...]   (default: every component)
#
# CUDA mutants need a GPU: with AETHER_MUTANT_STAGE=DIR set, only they are built,
# each suite copied to DIR/NAME/ (the GPU host has no compiler), and
# scripts/gpu.sh BUILD runs every BUILD/mutants/NAME there, expecting failures.
# With AETHER_MUTANT_CHECK=1 nothing is built: each expression is only checked to
# still change its line (run it after reformatting a file). AETHER_MUTANT_NAMES=REGEX
# keeps only the mutants whose names match.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
shift || true
only=" ${*:-witness indexer paging compress dosa sharing formats parallel} "
stage=${AETHER_MUTANT_STAGE:-}
check_only=${AETHER_MUTANT_CHECK:-}
names=${AETHER_MUTANT_NAMES:-.}
survivors=0

# A component's suites: its props and test binaries, the CUDA ones and the
# contract's included (STEM_props, STEM_cuda_test, STEM_refusal_props, ...).
suites_of() {
  ls "$build"/props/"$1"_props "$build"/props/"$1"_*_props "$build"/tests/"$1"_test \
    "$build"/tests/"$1"_*_test 2>/dev/null
}

backup=""
# Breaks FILE with the sed EXPR and rebuilds COMPONENT's suites; non-zero (and
# counted) when the expression no longer applies or the result does not build.
# restore FILE afterwards either way.
break_and_build() {  # break_and_build COMPONENT NAME FILE EXPR
  local component=$1 name=$2 file=$3 expr=$4
  backup=""
  [[ $name =~ $names ]] || return 1
  if [ -n "$check_only" ]; then  # the file itself untouched: the check may run beside other tests
    if sed "$expr" "$file" | cmp -s - "$file"; then
      echo "mutant $name: the expression no longer applies to $file"
      survivors=$((survivors + 1))
    else
      echo "mutant $name: applies"
    fi
    return 1
  fi
  backup=$(mktemp)
  cp "$file" "$backup"
  sed -i "$expr" "$file"
  if cmp -s "$file" "$backup"; then
    echo "mutant $name: the expression no longer applies to $file"
  elif ! cmake --build "$build" --target $(suites_of "$component" | xargs -n1 basename) \
      >/dev/null 2>&1; then
    echo "mutant $name: does not build"
  else
    return 0
  fi
  survivors=$((survivors + 1))
  return 1
}
restore() { [ -z "$backup" ] || { cp "$backup" "$1"; rm -f "$backup"; }; }

cuda_mutant() {  # cuda_mutant COMPONENT NAME FILE SED-EXPRESSION: built only when staging
  local component=$1 name=$2 file=$3
  [[ ( -n $stage || -n $check_only ) && $only == *" $component "* ]] || return 0
  if break_and_build "$@"; then
    mkdir -p "$stage/$name"
    cp $(suites_of "$component") "$stage/$name/"
    echo "mutant $name: staged in $stage/$name"
  fi
  restore "$file"
}

mutant() {  # mutant COMPONENT NAME FILE SED-EXPRESSION
  local component=$1 name=$2 file=$3 failed
  [[ -z $stage && $only == *" $component "* ]] || return 0
  if break_and_build "$@"; then
    failed=$(for suite in $(suites_of "$component"); do
               RC_PARAMS=max_success=10000 "$suite" --gtest_brief=1
             done 2>&1 | grep -c '^\[  FAILED  \] [A-Z].*(')
    if [ "$failed" -gt 0 ]; then echo "mutant $name: killed by $failed failing tests"
    else echo "mutant $name: SURVIVED"; survivors=$((survivors + 1)); fi
  fi
  restore "$file"
}

# The mutants themselves, a file a component.
for c in $only; do
  [ -f "scripts/mutants/$c.sh" ] && . "scripts/mutants/$c.sh"
done

if [ -n "$check_only" ]; then
  echo "mutants: $survivors expressions no longer apply"
  exit $((survivors > 0))
fi
# every suite rebuilt from the restored sources (the CUDA ones too: staging leaves
# the last mutant built)
for c in $only; do
  targets=$(suites_of "$c" | xargs -r -n1 basename)
  [ -z "$targets" ] || cmake --build "$build" --target $targets >/dev/null 2>&1
done
[ -n "$stage" ] && { echo "mutants: staged in $stage ($survivors failed to stage)"; exit $((survivors > 0)); }
echo "mutants: $survivors survived"
exit $((survivors > 0))

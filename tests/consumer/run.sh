#!/usr/bin/env bash
# ctest `consumer_install`: aether as a user gets it.
#  1. Install this build into a scratch prefix; build tests/consumer against it with
#     find_package(aether) and public includes only; run the hand example, then
#     the properties on external kernels: the right ones must pass, the two
#     deliberately wrong ones must fail with a counterexample and a replay line.
#  2. A library-only build (AETHER_BUILD_TESTING=OFF, GoogleTest, RapidCheck and
#     Benchmark hidden from CMake) installs and serves the same consumer, through
#     find_package and through a plain compiler line.
# The log of a failing step is printed.
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
step() {
  if ! "$@" >"$work/log" 2>&1; then
    echo "consumer: failed: $*"
    cat "$work/log"
    exit 1
  fi
}
consumer_build() {  # consumer_build PREFIX DIR
  step cmake -S "$source/tests/consumer" -B "$2" -G Ninja -DCMAKE_PREFIX_PATH="$1" \
       -DCMAKE_BUILD_TYPE=Release
  step cmake --build "$2"
}

step cmake --install "$build" --prefix "$work/prefix"
consumer_build "$work/prefix" "$work/build"
"$work/build/consumer"
set +e
RC_PARAMS="max_success=2000" "$work/build/consumer_props" >"$work/props.log" 2>&1
rc=$?
set -e
verdict() { grep -c "^\[ *$1 *\] $2\( \|$\)" "$work/props.log" || true; }
agrees() { verdict "$1" "$2.agrees_with_the_model"; }
if [ $rc -eq 0 ] || [ "$(agrees OK TheirMerge)" != 1 ] || [ "$(agrees OK TheirTopk)" != 1 ] ||
   [ "$(agrees OK TheirFp4Quantizer)" != 1 ] || [ "$(agrees OK TheirPrunedTopk)" != 1 ] ||
   [ "$(verdict OK TheirTowardZeroFp4Quantizer.follows_ties_toward_zero)" != 1 ] ||
   [ "$(agrees FAILED TheirFloorEdgeMerge)" != 2 ] ||
   [ "$(agrees FAILED TheirHigherIndexTieTopk)" != 2 ] ||
   [ "$(agrees FAILED TheirTowardZeroFp4Quantizer)" != 2 ] ||
   [ "$(agrees FAILED TheirTauDroppingPrunedTopk)" != 2 ] ||
   [ "$(grep -c '^replay: ' "$work/props.log")" != 4 ]; then
  echo "consumer: the external kernels were not judged as expected (exit $rc)"
  cat "$work/props.log"
  exit 1
fi
echo "consumer: right external kernels pass; the four wrong ones caught:"
awk '/^\[ RUN .*Their(FloorEdgeMerge|HigherIndexTieTopk|TowardZeroFp4Quantizer|TauDroppingPrunedTopk)\.agrees/ {on = 1; next}
     on {print} /^\[ *FAILED *\]/ {on = 0}' "$work/props.log"

step cmake -S "$source" -B "$work/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DAETHER_BUILD_TESTING=OFF -DAETHER_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON \
     -DCMAKE_DISABLE_FIND_PACKAGE_rapidcheck=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
step cmake --build "$work/lib"
step cmake --install "$work/lib" --prefix "$work/libprefix"
consumer_build "$work/libprefix" "$work/libbuild"
[ ! -e "$work/libbuild/consumer_props" ] || { echo "consumer: props built without RapidCheck"; exit 1; }
"$work/libbuild/consumer"
p=$work/libprefix
step g++ -std=c++20 -O2 -I"$p/include" -I"$p/include/aether" "$source/tests/consumer/consumer.cpp" \
     -o "$work/plain" -L"$p/lib" -laether_cpu -laether_model -lgmp -pthread
"$work/plain"
echo "consumer: library-only build installed and linked (find_package and plain g++)"

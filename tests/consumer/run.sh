#!/usr/bin/env bash
# ctest `consumer_install`: install the build into a scratch prefix, build
# tests/consumer against it with find_package(aether), run it. The log of a
# failing step is printed.
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
step cmake --install "$build" --prefix "$work/prefix"
step cmake -S "$source/tests/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
     -DCMAKE_BUILD_TYPE=Release
step cmake --build "$work/build"
"$work/build/consumer"

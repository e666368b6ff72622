#!/usr/bin/env bash
# Configures (once) and builds tessel into ${BUILD_DIR:-build}. CUDA and MPI parts are
# built when their toolchains are found (TESSEL_CUDA / TESSEL_MPI = AUTO by default).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# A configure that failed (say, before install-deps.sh ran) leaves a cache but no build
# files: drop that cache (it may name another generator) and configure afresh.
if [ -f "$build/CMakeCache.txt" ] && [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} ${CMAKE_ARGS:-}
fi
cmake --build "$build" --parallel "$(nproc)"

#!/usr/bin/env bash
# README command (2): install what is missing, build, and run the whole test suite
# (GoogleTest suites, CLI checks against numpy, the bad-input suite, the module-layering check).
#
# SANITIZE='address;undefined' (or 'thread') builds with those sanitizers into
# ${BUILD_DIR:-build-<first sanitizer>} (asserts kept, -O1) and runs the suite under them,
# every sanitizer report fatal; tests labelled `timing` (they measure this machine's speed,
# which a sanitizer changes several-fold) are left out there.
# The CUDA and MPI backends are left out of sanitizer builds (as the fuzz build does). MPI:
# not yet tried under the sanitizers (OpenMPI's memory at exit would need LeakSanitizer
# suppressions); the plain build tests it. CUDA: its driver stub
# (libcuda) becomes a load-time dependency there, and no GPU code runs here anyway; the
# plain build compiles and tests it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
ctest_args=()
if [ -n "${SANITIZE:-}" ]; then
  export BUILD_DIR=${BUILD_DIR:-build-$(echo "${SANITIZE%%;*}" | cut -c1-4)san}
  export BUILD_TYPE=RelWithDebInfo
  export CMAKE_ARGS="${CMAKE_ARGS:-} -DTESSEL_SANITIZE=${SANITIZE} -DTESSEL_CUDA=OFF -DTESSEL_MPI=OFF -DTESSEL_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS=-g1 -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1}
  ctest_args=(-LE timing)
fi
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --parallel "$(nproc)" "${ctest_args[@]}" ${CTEST_ARGS:-}

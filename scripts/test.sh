#!/usr/bin/env bash
# README command (2): install what is missing, build, and run the whole test suite
# (GoogleTest suites, CLI checks against numpy, the module-layering check).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --parallel "$(nproc)" ${CTEST_ARGS:-}

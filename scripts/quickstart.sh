#!/usr/bin/env bash
# README command (1): install what is missing, build, and run the main job on the
# built-in default (the matrix chain X·Y·Z lowered for 4 devices, executed block by
# block and checked against the reference evaluator).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo
echo "== tessel run (built-in default) =="
"${BUILD_DIR:-build}/bin/tessel" run

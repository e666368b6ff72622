#!/usr/bin/env bash
# README command (1): install what is missing, build, and run the main job on the
# built-in default: `tessel compare` on the matrix chain X·Y·Z over every core, async
# against bsp — calibrate the CPU backend, simulate, run for real, print the table —
# and draw the measured and simulated timelines to out/compare-timelines.png.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
out=${OUT_DIR:-out}
rm -rf "$out/compare"
mkdir -p "$out"
echo
echo "== tessel compare (built-in default) =="
"${BUILD_DIR:-build}/bin/tessel" compare --trace-dir "$out/compare"
plots/python.sh plots/compare_timelines.py "$out/compare" "$out/compare-timelines.png" \
  --title "X·Y·Z chain: measured above simulated"

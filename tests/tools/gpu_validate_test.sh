#!/usr/bin/env bash
# scripts/gpu-validate.sh's own machinery, on any machine with the CUDA build (label cuda):
# with no time budget every step of the check stage must be recorded as skipped (none
# started), the exit non-zero, and the output folder must hold only the six files a
# device lease brings back (it returns at most 8), the work folder in the tarball. (A
# budget that lets some steps run would make the test depend on this machine's speed.)
# Usage: gpu_validate_test.sh BUILD_DIR
set -uo pipefail
build=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

BUILD_DIR=$build GPU_BUNDLE="$tmp/no-bundle" GPU_VALIDATE_WORK="$tmp/work" STAGES=check BUDGET_S=0 \
  "$repo/scripts/gpu-validate.sh" "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
[ $rc -ne 0 ] || fail "exit 0 although steps were skipped"
files=$(cd "$tmp/out" && ls | tr '\n' ' ')
[ "$files" = "env.txt failed.txt gpu-validate.tar.gz steps.txt summary.json summary.txt " ] ||
  fail "output folder holds: $files"
ran=$(grep -vc ' skipped 0$' "$tmp/out/steps.txt")
skipped=$(grep -c ' skipped 0$' "$tmp/out/steps.txt")
[ "$ran" -eq 0 ] || fail "$ran steps ran without a budget"
# The check stage's defaults: 9 workloads x 3 device counts x 2 policies, 3 x 2 unmarked
# runs, 2 x 2 stream-launch runs, 2 x 3 x 2 capped runs.
[ "$skipped" -eq 76 ] || fail "$skipped steps recorded as skipped, expected the check stage's 76"
python3 - "$tmp/out/summary.json" "$skipped" <<'PY' || fail "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert len(s["skipped_steps"]) == int(sys.argv[2]), s["skipped_steps"]
assert all(st["skipped"] or isinstance(st["exit_code"], int) for st in s["steps"])
assert s["runs"] == [] and s["failed_steps"] == [], (s["runs"], s["failed_steps"])
PY
tar -tzf "$tmp/out/gpu-validate.tar.gz" >"$tmp/listing" || fail "tarball unreadable"
grep -qx './steps.txt' "$tmp/listing" || fail "tarball lacks steps.txt"
grep -q "skipped (time budget spent" "$tmp/stdout" || fail "the printed summary does not name the skipped steps"
# Stages run in the order STAGES names them (a short lease puts first what it is for),
# and a stage name it does not know is a failure, not a silent no-op.
BUILD_DIR=$build GPU_BUNDLE="$tmp/no-bundle" GPU_VALIDATE_WORK="$tmp/work2" STAGES="calibrate bench nosuch" BUDGET_S=0 \
  "$repo/scripts/gpu-validate.sh" "$tmp/out2" >"$tmp/stdout2" 2>"$tmp/stderr2"
[ $? -ne 0 ] || fail "exit 0 with an unknown stage"
order=$(awk '{print $1}' "$tmp/out2/steps.txt" | uniq | tr '\n' ' ')
[ "$order" = "calibrate plot overlap bench " ] || fail "steps in the order: $order (want calibrate's, then bench)"
grep -q "unknown stage 'nosuch'" "$tmp/stderr2" || fail "an unknown stage is not named"
echo "ok: $skipped steps skipped, 6 files out; stages in the order named"

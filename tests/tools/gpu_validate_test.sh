#!/usr/bin/env bash
# scripts/gpu-validate.sh's own machinery, on any machine with the CUDA build (label cuda):
# a budget far too small for the check stage must end with the steps past it recorded as
# skipped, a non-zero exit, and the output folder holding only the six files a device
# lease brings back (it returns at most 8), the work folder in the tarball.
# Usage: gpu_validate_test.sh BUILD_DIR
set -uo pipefail
build=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

BUILD_DIR=$build GPU_BUNDLE="$tmp/no-bundle" GPU_VALIDATE_WORK="$tmp/work" STAGES=check BUDGET_S=45 \
  "$repo/scripts/gpu-validate.sh" "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
[ $rc -ne 0 ] || fail "exit 0 although steps were skipped"
files=$(cd "$tmp/out" && ls | tr '\n' ' ')
[ "$files" = "env.txt failed.txt gpu-validate.tar.gz steps.txt summary.json summary.txt " ] ||
  fail "output folder holds: $files"
ran=$(grep -vc ' skipped 0$' "$tmp/out/steps.txt")
skipped=$(grep -c ' skipped 0$' "$tmp/out/steps.txt")
[ "$ran" -ge 1 ] || fail "no step ran within the budget"
[ "$skipped" -ge 1 ] || fail "no step recorded as skipped"
python3 - "$tmp/out/summary.json" "$skipped" <<'PY' || fail "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert len(s["skipped_steps"]) == int(sys.argv[2]), s["skipped_steps"]
assert all(st["skipped"] or isinstance(st["exit_code"], int) for st in s["steps"])
assert len(s["runs"]) >= 1
PY
tar -tzf "$tmp/out/gpu-validate.tar.gz" >"$tmp/listing" || fail "tarball unreadable"
grep -qx './runs/chain-d1-async.log' "$tmp/listing" || fail "tarball lacks runs/chain-d1-async.log"
grep -q "skipped (time budget spent" "$tmp/stdout" || fail "the printed summary does not name the skipped steps"
echo "ok: $ran steps ran, $skipped skipped, 6 files out"

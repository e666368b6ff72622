#!/usr/bin/env bash
# scripts/hierarchical-scaling.sh: its CSV (rows, series, the planner's and the forced
# rail window), its picture, and bad NODES refused with nothing written. Skips (77) without
# a Python that has matplotlib. usage: hierarchical_scaling_test.sh TESSEL_BINARY
set -u
tessel=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
have=""
for py in /usr/bin/python3 python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "import numpy, matplotlib" >/dev/null 2>&1; then have=$py; break; fi
done
[ -n "$have" ] || { echo "no Python with matplotlib; skipping" >&2; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "hierarchical_scaling_test: $*" >&2; exit 1; }

TESSEL=$tessel "$root/scripts/hierarchical-scaling.sh" "$dir/out" --bytes 64MiB 2 4 2>"$dir/err" || fail "the script failed: $(cat "$dir/err")"
csv=$dir/out/hierarchical-scaling.csv
[ -s "$dir/out/hierarchical-scaling.png" ] || fail "no picture"
[ "$(head -1 "$csv")" = "nodes,ranks,series,makespan_s,pieces_in_flight,slices" ] || fail "header: $(head -1 "$csv")"
[ "$(wc -l <"$csv")" -eq 7 ] || fail "expected 6 rows: $(cat "$csv")"
grep -q '^4,32,simulated: planner rail window,[0-9.e-]*,8,[0-9]*$' "$csv" || fail "no planner row for 4 nodes: $(cat "$csv")"
grep -q '^2,16,simulated: rail window 8,[0-9.e-]*,8,[0-9]*$' "$csv" || fail "no window-8 row for 2 nodes"
grep -q '^2,16,tuner estimate,[0-9.e-]*,,$' "$csv" || fail "no tuner estimate for 2 nodes"
ls "$dir/out" | grep -q tmp-tessel && fail "a temporary file was left"

"$root/scripts/hierarchical-scaling.sh" "$dir/bad" 1 2>"$dir/err"
[ $? -eq 2 ] || fail "NODES 1: expected exit 2"
grep -q "NODES must be whole numbers >= 2, got '1'" "$dir/err" || fail "NODES 1: message $(cat "$dir/err")"
[ ! -e "$dir/bad" ] || fail "NODES 1 left $dir/bad"
echo "hierarchical_scaling_test: ok"

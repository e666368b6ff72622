#!/usr/bin/env bash
# The hierarchical all-reduce by node count: simulated with the planner's rail window, with
# NCCL's 8 pieces in flight per rail (--pieces-in-flight 8), and the tuner's estimate (latency +
# bytes / bandwidth), as a CSV and a picture.
#
# usage: scripts/hierarchical-scaling.sh OUT_DIR [--bytes SIZE] [--preset NODE_PRESET] [NODES ...]
#   OUT_DIR/hierarchical-scaling.csv  nodes, ranks, series, makespan_s, pieces_in_flight, slices
#   OUT_DIR/hierarchical-scaling.png  time by node count, one line per series (plots/lines.py)
# Defaults: 1GiB, h100-sxm-8 nodes (cluster:Nxh100-sxm-8), 2 4 8 16 32 64 128 nodes (about
# a minute on two cores; 128 nodes alone take 15 s per run). TESSEL: the binary (default
# build/bin/tessel, built if missing).
set -euo pipefail
here=$(pwd)
cd "$(dirname "$0")/.."
usage() { sed -n 2,11p "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
case "$1" in /*) out=$1 ;; *) out=$here/$1 ;; esac; shift
bytes=1GiB preset=h100-sxm-8 nodes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bytes) [ $# -ge 2 ] || usage; bytes=$2; shift 2 ;;
    --preset) [ $# -ge 2 ] || usage; preset=$2; shift 2 ;;
    -h|--help) usage ;;
    *) [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 2 ] || { echo "hierarchical-scaling: NODES must be whole numbers >= 2, got '$1'" >&2; exit 2; }
       nodes+=("$1"); shift ;;
  esac
done
[ ${#nodes[@]} -gt 0 ] || nodes=(2 4 8 16 32 64 128)
tessel=${TESSEL:-build/bin/tessel}
case "$tessel" in /* | build/bin/tessel) ;; *) tessel=$here/$tessel ;; esac
if [ -z "${TESSEL:-}" ] && [ ! -x "$tessel" ]; then scripts/build.sh >&2; fi
mkdir -p "$out"
# The devices of one node: the preset's device count.
per_node=$("$tessel" simulate --collective allreduce --bytes 1MiB -d 1 -m "$preset" --write-machine - |
           plots/python.sh -c 'import json,sys; print(len(json.load(sys.stdin)["devices"]))')
csv="$out/hierarchical-scaling.csv"
tmp="$csv.tmp-tessel"
trap 'rm -f "$tmp"' EXIT
echo "nodes,ranks,series,makespan_s,pieces_in_flight,slices" >"$tmp"
for n in "${nodes[@]}"; do
  ranks=$((n * per_node))
  for window in planner 8; do
    extra=(); [ "$window" = planner ] || extra=(--pieces-in-flight "$window")
    echo "hierarchical-scaling: $n nodes ($ranks ranks), rail window $window" >&2
    "$tessel" simulate --collective allreduce --bytes "$bytes" -d "$ranks" -m "cluster:${n}x$preset" \
      --algorithm hierarchical "${extra[@]}" --json |
      plots/python.sh -c '
import json, sys
n, ranks, window = sys.argv[1], sys.argv[2], sys.argv[3]
j = json.load(sys.stdin)
series = "simulated: planner rail window" if window == "planner" else "simulated: rail window " + window
print(",".join([n, ranks, series, repr(j["makespan_s"]), str(j["pieces_in_flight"]), str(j["slices"])]))
if window == "planner":
    est = [e for e in j["tuner_estimates"] if e["algorithm"] == "hierarchical"][0]
    print(",".join([n, ranks, "tuner estimate", repr(est["time_s"]), "", ""]))
' "$n" "$ranks" "$window" >>"$tmp"
  done
done
mv "$tmp" "$csv"
plots/python.sh plots/lines.py "$csv" "$out/hierarchical-scaling.png" --x nodes --y makespan_s --scale-y 1000 \
  --group series --log-x --xlabel "nodes (cluster:Nx$preset)" --ylabel "all-reduce of $bytes (ms)" \
  --title "hierarchical all-reduce by node count"
echo "hierarchical-scaling: wrote $csv and $out/hierarchical-scaling.png" >&2

#!/usr/bin/env bash
# Simulated against measured over the built-in workload suite: every workload x four
# strategies x both policies on D devices (default 2), median of 5 runs, each right
# after one untimed run of the same row. Each compare calibrates the machine itself (no -m), one calibration
# round before each timed round, because a shared VM's speed drifts by 15% and more
# within minutes: a calibration taken once, earlier, measures a different machine than
# the runs meet. Prints each workload's MAPE and the suite's; JSON per workload (with
# the calibration it used) in ${OUT_DIR:-out}/suite/. Each compare also times every
# compute task of each timed run again right after it, in place on the run's buffers, and
# reports both simulations: with those profiled times and with the analytic roofline
# alone; each row's error is the median of its rounds' paired errors.
set -euo pipefail
cd "$(dirname "$0")/.."
tessel=${BUILD_DIR:-build}/bin/tessel
devices=${1:-2}
out=${OUT_DIR:-out}/suite
mkdir -p "$out"
workloads=(chain:size=512 chain-sum:size=400 chain-sum:size=400,skewed=1 ffn llama-block:model=tiny,seq=64)
for w in "${workloads[@]}"; do
  "$tessel" compare -w "$w" -d "$devices" -s eindecomp,data-parallel,megatron,sqrt-split \
    --repeat 5 --warmup 1 ${COMPARE_ARGS:-} --json > "$out/$(echo "$w" | tr ':,=' '___').json"
done
plots/python.sh - "$out" <<'PY'
import glob, json, os, sys
rows, lines = [], []
apart = agree = 0
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    j = json.load(open(f))
    rows += j["rows"]
    rk = j["ranking"]
    apart += rk["measured_apart"]
    agree += rk["measured_apart_agree"]
    cold = f"cold {j['mape_cold_pct']:5.1f}%, " if isinstance(j.get("mape_cold_pct"), (int, float)) else ""
    lines.append(f"  {j['graph']:<32} MAPE {j['mape_pct']:5.1f}% ({cold}hot {j.get('mape_hot_pct', j['mape_pct']):5.1f}%,"
                 f" analytic {j['mape_analytic_pct']:5.1f}%)"
                 f"   Kendall tau {j['kendall_tau']:+.2f}   ordered alike {rk['measured_apart_agree']}/"
                 f"{rk['measured_apart']} of {rk['pairs']} pairs   correct {j['correct']}")
    for p in rk["by_pair"]:
        if p["measured_apart"] and not p["agrees"]:
            lines.append(f"      {p['a']} vs {p['b']} ({p['policy']}): measured {p['measured_diff_pct']:+.1f}%,"
                         f" simulated {p['simulated_diff_pct']:+.1f}%")
print("\n".join(lines))
mape = sum(abs(r["error_pct"]) for r in rows) / len(rows)
analytic = sum(abs(r.get("error_analytic_pct", r["error_pct"])) for r in rows) / len(rows)
hot = sum(abs(r.get("error_hot_pct", r["error_pct"])) for r in rows) / len(rows)
cold = ""
if all("error_cold_pct" in r for r in rows):
    cold = f"{sum(abs(r['error_cold_pct']) for r in rows) / len(rows):.1f}% with their cold times only, "
print(f"  suite: {len(rows)} rows, MAPE {mape:.1f}% with profiled kernels, {cold}{hot:.1f}% with their hot times only, "
      f"{analytic:.1f}% analytic, "
      f"all correct: {all(r['correct'] for r in rows)}")
print(f"  ranking: {agree} of {apart} strategy pairs measured apart in every round are simulated in the same order")
# The same check on the simulation with hot kernel times only (rows carry simulated_hot_s
# when compare ran its cache model), recomputed from the rows' per-round measurements.
hot_apart = hot_agree = 0
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    rs = json.load(open(f))["rows"]
    for i, a in enumerate(rs):
        for b in rs[i + 1:]:
            if a["policy"] != b["policy"] or "simulated_hot_s" not in a:
                continue
            pairs = list(zip(a["round_measured_s"], b["round_measured_s"]))
            faster = all(x < y for x, y in pairs)
            slower = all(x > y for x, y in pairs)
            if len(pairs) < 3 or not (faster or slower):
                continue
            hot_apart += 1
            hot_agree += (a["simulated_hot_s"] < b["simulated_hot_s"]) == faster
if hot_apart:
    print(f"  ranking with hot kernel times only: {hot_agree} of {hot_apart}")
PY

#!/usr/bin/env python3
"""Summarises a scripts/gpu-validate.sh output folder: writes summary.json (every figure)
and prints a short table (device, driver, date, every figure). Standard library only."""
import glob
import json
import os
import sys
import xml.etree.ElementTree as ET


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def test_counts(folder):
    """Counts over the GoogleTest XML reports (--gtest_output=xml) in `folder`, or None where there is none."""
    cases = []
    for path in sorted(glob.glob(os.path.join(folder, "*.xml"))):
        try:
            cases += list(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError):
            continue
    if not cases:
        return None
    failing = [f"{c.get('classname')}.{c.get('name')}" for c in cases if c.find("failure") is not None]
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    return {"tests": len(cases), "failures": len(failing), "skipped": skipped, "failing": failing}


def main(out):
    env = {}
    gpus = []
    missing = []  # ldd lines of libraries the binaries need that the loader did not find
    for line in open(os.path.join(out, "env.txt")):
        key, _, value = line.partition(": ")
        if key.startswith("ldd_") and "not found" in value:
            missing.append(line.strip())
        if key == "gpu":
            gpus.append(value.strip())
        else:
            env[key] = value.strip()
    steps = []
    for line in open(os.path.join(out, "steps.txt")):
        parts = line.rsplit(" ", 2)
        if len(parts) == 3:  # "NAME EXIT SECONDS", or "NAME skipped 0" when the time budget ran out
            skipped = not parts[1].isdigit()
            steps.append({"step": parts[0], "exit_code": None if skipped else int(parts[1]), "skipped": skipped,
                          "seconds": int(parts[2])})
    summary = {"date_utc": env.get("date_utc"), "git_commit": env.get("git_commit"), "host": env.get("host"),
               "gpus": gpus, "nvcc": env.get("nvcc"), "binaries": env.get("binaries"),
               "bundle_commit": env.get("bundle_commit"), "missing_libraries": missing, "steps": steps,
               "failed_steps": [s["step"] for s in steps if not s["skipped"] and s["exit_code"] != 0],
               "skipped_steps": [s["step"] for s in steps if s["skipped"]]}

    summary["tests"] = {t: test_counts(os.path.join(out, t)) for t in ("test-cuda", "test-gpu")}

    runs = []
    for f in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
        j = load(f)
        name = os.path.basename(f)[:-5]
        if not j:
            runs.append({"run": name, "correct": False, "error": "no JSON (see the .log)"})
            continue
        runs.append({"run": name, "graph": j.get("graph"), "correct": j.get("correct"), "graph_s": j.get("graph_s"),
                     "graph_unmarked_s": j.get("graph_unmarked_s"),
                     "measured_s": j.get("measured_s"), "graph_flops_per_s": j.get("graph_flops_per_s"),
                     "worst_normwise_error": max((c["normwise_rel_error"] for c in j.get("check", [])), default=None)})
    summary["runs"] = runs

    calibrations = {}
    for f in sorted(glob.glob(os.path.join(out, "calibration-*.json"))):
        j = load(f)
        if j:
            calibrations[os.path.basename(f)[len("calibration-"):-5]] = j
    summary["calibration"] = calibrations

    bench = load(os.path.join(out, "bench.json"))
    summary["bench"] = [{k: b.get(k) for k in ("name", "real_time", "time_unit", "flop_rate", "us_per_task",
                                                "tasks", "devices", "error_message")}
                        for b in (bench or {}).get("benchmarks", [])]
    # BM_CudaDecomposedGemm/N/DEVICES/VARIANT/...: variant 0 split_largest, 1 a 2 x 2 grid.
    rates = {tuple(b["name"].split("/")[2:4]): b.get("flop_rate") for b in summary["bench"]
             if b["name"].startswith("BM_CudaDecomposedGemm") and b.get("flop_rate")}
    one = rates.get(("1", "0"))
    if one:
        for variant, key in (("0", "decomposed_gemm_vs_one_gemm"), ("1", "decomposed_gemm_grid_vs_one_gemm")):
            if ("4", variant) in rates:
                summary[key] = rates[("4", variant)] / one

    compares = []
    for f in sorted(glob.glob(os.path.join(out, "compare", "*.json"))):
        j = load(f)
        if not j:
            compares.append({"graph": os.path.basename(f)[:-5], "error": "no JSON (see the .log)"})
            continue
        rk = j.get("ranking", {})
        compares.append({"graph": j.get("graph"), "mape_pct": j.get("mape_pct"),
                         "mape_analytic_pct": j.get("mape_analytic_pct"), "kendall_tau": j.get("kendall_tau"),
                         "ranking_measured_apart": rk.get("measured_apart"),
                         "ranking_agree": rk.get("measured_apart_agree"), "ranking_preserved": rk.get("preserved"),
                         "correct": j.get("correct"),
                         "rows": [{k: r.get(k) for k in ("strategy", "policy", "simulated_s", "measured_s",
                                                         "measured_unmarked_s", "error_pct", "error_analytic_pct")}
                                  for r in j.get("rows", [])]})
    summary["compare"] = compares

    # Issue 19: the overlap benchmark's configurations, and the overlap rows compared with
    # the measured interference rows and with the published defaults.
    ov = (calibrations.get("overlap") or {}).get("overlap")
    summary["overlap_points"] = (ov or {}).get("points", [])
    overlap_rows = []
    for f in sorted(glob.glob(os.path.join(out, "overlap-*-compare*.json"))):
        j = load(f)
        if not j:
            continue
        overlap_rows.append({"graph": j.get("graph"), "interference": "published" if f.endswith("-published.json") else "measured",
                             "mape_pct": j.get("mape_pct"), "mape_analytic_pct": j.get("mape_analytic_pct"),
                             "rows": [{k: r.get(k) for k in ("strategy", "policy", "simulated_s", "measured_s", "error_pct")}
                                      for r in j.get("rows", [])]})
        # Since 2026-12-07 one compare gives both: --interference-beside published simulates
        # the same measured rounds with the published rows in place of the measured ones.
        if j.get("mape_interference_beside_pct") is not None:
            overlap_rows.append({"graph": j.get("graph"), "interference": j.get("interference_beside"),
                                 "mape_pct": j.get("mape_interference_beside_pct"),
                                 "mape_analytic_pct": None,
                                 "rows": [{"strategy": r.get("strategy"), "policy": r.get("policy"),
                                           "simulated_s": r.get("simulated_interference_beside_s"),
                                           "measured_s": r.get("measured_s"),
                                           "error_pct": r.get("error_interference_beside_pct")}
                                          for r in j.get("rows", [])]})
    summary["overlap_rows"] = overlap_rows
    rows = [r for c in compares for r in c.get("rows", [])]
    if rows:
        summary["compare_suite_mape_pct"] = sum(abs(r["error_pct"]) for r in rows) / len(rows)
        summary["compare_suite_ranking"] = [sum(c.get("ranking_agree") or 0 for c in compares),
                                            sum(c.get("ranking_measured_apart") or 0 for c in compares)]

    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    p = print
    p(f"tessel CUDA validation  {summary['date_utc']}  commit {summary['git_commit']}  host {summary['host']}")
    for g in gpus:
        p(f"  GPU  {g}")
    p(f"  nvcc {summary['nvcc']}")
    p(f"  binaries {summary['binaries']}" + (f" (bundle of commit {summary['bundle_commit']})"
                                             if summary["bundle_commit"] else ""))
    for m in missing:
        p(f"  MISSING LIBRARY: {m}")
    p(f"  steps: {len(steps)}, failed: {', '.join(summary['failed_steps']) or 'none'}")
    if summary["skipped_steps"]:
        p(f"  skipped (time budget spent; run them in another call, STAGES=...): {', '.join(summary['skipped_steps'])}")
    for t in ("test-cuda", "test-gpu"):
        suite = summary["tests"][t]
        if suite:
            p(f"  {t}: {suite['tests']} tests, {suite['failures']} failed, {suite['skipped']} skipped"
              + (f"; failing: {', '.join(suite['failing'])}" if suite["failing"] else ""))
    if runs:
        ok = sum(1 for r in runs if r.get("correct"))
        p(f"\ncorrectness (tessel run --backend cuda, virtual devices of GPU 0): {ok} of {len(runs)} pass")
        for r in runs:
            err = r.get("worst_normwise_error")
            plain = r.get("graph_unmarked_s")
            p(f"  {r['run']:<48} {'PASS' if r.get('correct') else 'FAIL'}  error {err if err is not None else '-':<10.3}"
              f"  graph {1e3 * (r.get('graph_s') or 0):9.3f} ms"
              + (f"  unmarked {1e3 * plain:9.3f} ms" if plain is not None else ""))
    for i, (d, c) in enumerate(calibrations.items()):
        p(f"\ncalibration, {d} device(s) on {c.get('gpus')} GPU(s): {c.get('device_name')} (sm {c.get('compute_capability')},"
          f" driver {c.get('driver_version')}, runtime {c.get('runtime_version')})")
        for k in ("peak_bf16_flops_per_s", "peak_f16_flops_per_s", "peak_tf32_flops_per_s", "peak_f32_flops_per_s",
                  "peak_f64_flops_per_s"):
            p(f"  {k:<28} {c.get(k, 0) / 1e12:8.1f} TFLOP/s")
        for k in ("memory_bytes_per_s", "same_gpu_copy_bytes_per_s", "peer_copy_bytes_per_s"):
            p(f"  {k:<28} {c.get(k, 0) / 1e9:8.1f} GB/s")
        p(f"  launch_latency_s             {c.get('launch_latency_s', 0) * 1e6:8.2f} us")
        p(f"  task_overhead_s              {c.get('task_overhead_s', 0) * 1e6:8.2f} us (graph launch)")
        p(f"  task_overhead_stream_s       {c.get('task_overhead_stream_s', 0) * 1e6:8.2f} us (tasks issued to streams)")
        if "dispatch_interval_s" in c:
            p(f"  dispatch_interval_s          {c.get('dispatch_interval_s', 0) * 1e6:8.2f} us (task starts on one GPU, graph launch)")
            p(f"  dispatch_interval_stream_s   {c.get('dispatch_interval_stream_s', 0) * 1e6:8.2f} us (tasks issued to streams)")
            p(f"  dispatch_interval_unmarked_s {c.get('dispatch_interval_unmarked_s', 0) * 1e6:8.2f} us (unmarked graph, span per task)")
            p(f"  barrier_latency_s            {c.get('barrier_latency_s', 0) * 1e6:8.2f} us (bsp: phase end to next start)")
        for g in c.get("gemm", []) if i == 0 else []:  # the GEMM table once (every file has it)
            p(f"  gemm {g['dtype']:<5} {g['m']:>6} x {g['n']:>6} x {g['k']:>6}  {g['flops_per_s'] / 1e12:8.1f} TFLOP/s")
    if summary["bench"]:
        p("\nbenchmarks")
        for b in summary["bench"]:
            extra = b.get("error_message") or (f"flop_rate {b['flop_rate'] / 1e12:.1f} TFLOP/s" if b.get("flop_rate")
                                               else f"{b.get('us_per_task', 0):.2f} us per task")
            p(f"  {b['name']:<58} {b.get('real_time', 0):10.3f} {b.get('time_unit', '')}  {extra}")
        for key, how in (("decomposed_gemm_vs_one_gemm", "split_largest"), ("decomposed_gemm_grid_vs_one_gemm", "2 x 2 grid")):
            if key in summary:
                p(f"  decomposed 8192^3 bf16 GEMM on 4 virtual devices ({how}) / one GEMM: "
                  f"{100 * summary[key]:.1f}% (goal >= 85%)")
    if summary["overlap_points"]:
        p("\noverlap (GEMM stream + communication stream on one GPU): slowdowns while both run, total vs serial / perfect")
        for q in summary["overlap_points"]:
            p(f"  {q.get('comm_mechanism', q.get('mechanism')):<12} {q['comm_priority']:<6} sms {q['comm_sms']:>3}  compute x{q['compute_slowdown']:.3f}"
              f"  comm x{q['comm_slowdown']:.3f}  total {1e3 * q['total_s']:8.2f} ms  serial {1e3 * q['serial_s']:8.2f}"
              f"  perfect {1e3 * q['perfect_overlap_s']:8.2f}  captured {100 * q['overlap_captured']:5.1f}%")
    for r in summary["overlap_rows"]:
        p(f"  overlap row {r['graph']:<34} {r['interference']:<9} MAPE {r['mape_pct']:6.1f}%  "
          + "  ".join(f"{x['strategy']} sim {1e3 * x['simulated_s']:.3f} / meas {1e3 * x['measured_s']:.3f} ms" for x in r["rows"]))
    if compares:
        p("\ncompare --backend cuda (4 virtual devices of GPU 0)")
        for c in compares:
            if "error" in c:
                p(f"  {c['graph']:<44} {c['error']}")
                continue
            p(f"  {c['graph']:<44} MAPE {c['mape_pct']:6.1f}% (analytic {c['mape_analytic_pct']:6.1f}%)  ranking "
              f"{c['ranking_agree']}/{c['ranking_measured_apart']}  correct {c['correct']}")
            for r in c["rows"]:
                plain = r.get("measured_unmarked_s")
                p(f"      {r['strategy']:<14} {r['policy']:<6} simulated {1e3 * r['simulated_s']:8.3f} ms  measured "
                  f"{1e3 * r['measured_s']:8.3f} ms  ({r['error_pct']:+6.1f}%)"
                  + (f"  unmarked {1e3 * plain:8.3f} ms" if plain is not None else ""))
        if "compare_suite_mape_pct" in summary:
            a, b = summary["compare_suite_ranking"]
            p(f"  suite MAPE {summary['compare_suite_mape_pct']:.1f}%, ranking {a} of {b} pairs measured apart "
              f"simulated in the same order")


if __name__ == "__main__":
    main(sys.argv[1])

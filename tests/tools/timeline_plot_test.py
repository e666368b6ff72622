"""plots/timeline.py against independent truths: the fast reader of tessel's traces
matches json.load, busy fractions per bucket match a brute-force sum, and both drawing
modes write a PNG. Skips (77) without matplotlib.

usage: timeline_plot_test.py TESSEL_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("no matplotlib; skipping", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plots"))
import timeline  # noqa: E402


def check_reader(path):
    fast = timeline._load_fast(open(path, "rb").read())
    assert fast is not None, "tessel's trace should take the fast path"
    doc = json.load(open(path))
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(fast) == len(xs) > 0
    for field, arr in (("ts", fast.ts), ("dur", fast.dur), ("pid", fast.pid), ("tid", fast.tid)):
        assert np.array_equal(arr, [e[field] for e in xs]), field
    kind_idx, kinds = fast.kind
    assert [kinds[k] for k in kind_idx] == [e["name"].split(" ")[0] for e in xs]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert fast.thread_names == names


def check_buckets():
    rng = np.random.default_rng(7)
    starts = rng.uniform(0, 100, 500)
    ends = starts + rng.exponential(2.0, 500)
    edges = np.linspace(0, 110, 57)
    got = timeline.busy_in_buckets(starts, ends, edges)
    # Brute force: the union's coverage on a fine grid.
    grid = np.linspace(0, 110, 110001)
    mid = (grid[1:] + grid[:-1]) / 2
    covered = np.zeros(len(mid), bool)
    for s, e in zip(starts, ends):
        covered |= (mid >= s) & (mid < e)
    step = grid[1] - grid[0]
    want = np.array([covered[(mid >= a) & (mid < b)].sum() * step for a, b in zip(edges[:-1], edges[1:])])
    assert np.allclose(got, want, atol=2 * step), (got - want).max()


def main():
    tessel = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.json")
        subprocess.run([tessel, "simulate", "-w", "llama-block", "-d", "8", "-s", "eindecomp", "-m", "h100-sxm-8",
                        "--comm-channels", "4", "--trace", trace], check=True, stdout=subprocess.DEVNULL)
        check_reader(trace)
        check_buckets()
        loaded = timeline.load(trace)[0]
        for mode in ("per-span", "aggregate"):
            out = os.path.join(d, mode + ".png")
            timeline.draw([("sim", loaded), ("again", loaded)], out, mode=mode)
            assert os.path.getsize(out) > 10000
    print("timeline.py: reader, buckets and both drawing modes ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

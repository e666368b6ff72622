"""Slowdown by configuration from `tessel calibrate --backend cuda --overlap --json`
(its "overlap" object): per configuration (mechanism, stream priority, SMs reserved)
the compute and communication slowdowns while both run, and the share of the ideal
overlap captured.

usage: overlap_slowdown.py CALIBRATION.json OUT.png [--title T]
"""
import argparse
import json
import sys

import tessel_plot_common as common
from tessel_plot_common import plt


def rows(doc):
    """The configurations of a calibration JSON (the whole --json output, or its
    "overlap" object)."""
    o = doc.get("overlap", doc)
    if "points" not in o:
        sys.exit("overlap_slowdown.py: no \"overlap\" points in the file (run tessel calibrate --backend cuda --overlap --json)")
    return o, o["points"]


def label(p):
    # comm_mechanism since 2026-12-07; "mechanism" in files written before (2026-11-28's lease)
    mech = "copy engine" if p.get("comm_mechanism", p.get("mechanism")) == "copy_engine" else "SM kernels"
    sms = f", {p['comm_sms']} SMs" if p["comm_sms"] else ""
    return f"{mech}\n{p['comm_priority']}{sms}"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("png")
    ap.add_argument("--title", default=None)
    a = ap.parse_args(argv)
    with open(a.json) as f:
        o, points = rows(json.load(f))
    xs = range(len(points))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(max(7, 1.6 * len(points) + 4), 3.8))
    w = 0.38
    ax.bar([x - w / 2 for x in xs], [p["compute_slowdown"] for p in points], w, label="compute",
           color=common.PALETTE[0])
    ax.bar([x + w / 2 for x in xs], [p["comm_slowdown"] for p in points], w, label="communication",
           color=common.PALETTE[1])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label(p) for p in points], fontsize=7)
    ax.set_ylabel("slowdown while both run (x)")
    ax.legend(fontsize=8)
    ax2.bar(list(xs), [100 * p["overlap_captured"] for p in points], 0.6, color=common.PALETTE[2])
    ax2.set_xticks(list(xs))
    ax2.set_xticklabels([label(p) for p in points], fontsize=7)
    ax2.set_ylabel("ideal overlap captured (%)")
    ax2.set_ylim(0, 100)
    fig.suptitle(a.title or f"compute/communication overlap on {o.get('device_name', o.get('device', 'the GPU'))}")
    fig.tight_layout()
    common.save(fig, a.png)


if __name__ == "__main__":
    main(sys.argv[1:])

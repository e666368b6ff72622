"""Draws Chrome-trace timelines written by tessel (pid = device, tid = lane) as a Gantt
chart: one row per device and lane, one bar per task, coloured by task kind. Given
several traces (for example measured and simulated), stacks them with a shared time
axis so that the same task can be found in each.

usage: timeline.py OUT.png TRACE.json[:LABEL] [TRACE.json[:LABEL] ...] [--title T]
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

KIND_COLOURS = {
    "compute": "#4C72B0",
    "input": "#8C8C8C",
    "output": "#8C8C8C",
    "move": "#DD8452",
    "touch": "#55A868",
}
LANES = {0: "compute", 1: "comm", 2: "copy"}


def load(path):
    with open(path) as f:
        doc = json.load(f)
    events = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
    return events, doc.get("otherData", {}).get("source", "")


def kind_of(event):
    return event.get("name", "").split(" ")[0]


def draw(panels, out, title=""):
    """panels: [(label, events)]; writes a PNG to `out` (atomically)."""
    end_us = max((e["ts"] + e["dur"] for _, ev in panels for e in ev), default=1.0)
    rows_per_panel = [sorted({(e["pid"], e["tid"]) for e in events}) for _, events in panels]
    heights = [max(1, len(r)) for r in rows_per_panel]
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False,
                             figsize=(11, 1.2 + 0.32 * sum(heights) + 0.4 * len(panels)),
                             gridspec_kw={"height_ratios": heights})
    for ax, (label, events), rows in zip(axes[:, 0], panels, rows_per_panel):
        index = {r: i for i, r in enumerate(rows)}
        for e in events:
            y = index[(e["pid"], e["tid"])]
            ax.barh(y, max(e["dur"], end_us * 1e-4) / 1e3, left=e["ts"] / 1e3, height=0.8,
                    color=KIND_COLOURS.get(kind_of(e), "#C44E52"), linewidth=0)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"dev {p} {LANES.get(t, t)}" for p, t in rows], fontsize=7)
        ax.invert_yaxis()
        span = max((e["ts"] + e["dur"] for e in events), default=0) / 1e3
        ax.set_title(f"{label}: {span:.3f} ms", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("time (ms)")
    axes[-1, 0].set_xlim(0, end_us / 1e3 * 1.02)
    fig.legend(handles=[Patch(color=c, label=k) for k, c in KIND_COLOURS.items() if k != "output"],
               loc="upper right", ncol=4, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    tmp = out + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, out)  # no partial picture on failure
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    panels = []
    for spec in args.traces:
        path, _, label = spec.partition(":")
        events, source = load(path)
        panels.append((label or source or os.path.basename(path), events))
    draw(panels, args.out, args.title)


if __name__ == "__main__":
    sys.exit(main())

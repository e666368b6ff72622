"""Draws Chrome-trace timelines written by tessel (pid = device, tid = lane and track) as
a Gantt chart: one row per device and trace thread. Given several traces (for example
measured and simulated), stacks them with a shared time axis so that the same task can
be found in each.

Thread ids: tid % 3 is the lane (0 compute, 1 comm, 2 copy), tid // 3 the track (a
device's overlapping moves, one track each); names come from the trace's thread_name
events.

Two ways of drawing, chosen per panel:
- per span (small traces): one bar per task, coloured by task kind;
- aggregated (more than --max-spans spans, or more than 2,000 whose median is
  narrower than a pixel):
  a block of rows per lane, one row per device (its tracks merged; consecutive devices
  merged too past 240 rows), time cut into 1,000 buckets (about a pixel each), and each
  cell shaded by the fraction of the bucket in which the lane was busy (0-100 %).
  A million spans draw in seconds this way.

usage: timeline.py OUT.png TRACE.json[:LABEL] [TRACE.json[:LABEL] ...] [--title T]
                   [--max-spans N] [--aggregate | --per-span]
"""
import argparse
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
KIND_COLOURS = {
    "compute": "#0072B2",
    "input": "#999999",
    "output": "#999999",
    "move": "#E69F00",
    "touch": "#009E73",
}
LANE_NAMES = {0: "compute", 1: "comm", 2: "copy"}
LANE_COLOURS = {0: KIND_COLOURS["compute"], 1: KIND_COLOURS["move"], 2: KIND_COLOURS["touch"]}
FIG_WIDTH_IN = 11
DPI = 120
BUCKETS = 1000          # time buckets of an aggregated panel: about one per pixel column
MAX_ROWS = 240          # aggregated rows per panel before consecutive devices are merged
MAX_SPANS = 20000       # more spans than this: aggregate


class Trace:
    """The X events of one trace as numpy arrays (times in microseconds)."""

    def __init__(self, pid, tid, ts, dur, kind, thread_names, source):
        self.pid, self.tid, self.ts, self.dur, self.kind = pid, tid, ts, dur, kind
        self.thread_names = thread_names
        self.source = source

    def __len__(self):
        return len(self.ts)

    def end_us(self):
        return float((self.ts + self.dur).max()) if len(self) else 0.0


# tessel's own writer puts an X event's keys in this order (sorted, as nlohmann::json
# does too), so its events are read with one regular expression instead of json.load,
# which takes most of the time on a million spans; anything else falls back to json.
_X_EVENT = re.compile(rb'"dur":([-0-9.eE+]+),"name":"([A-Za-z_]*)(?:[^"\\]|\\.)*","ph":"X",'
                      rb'"pid":(-?[0-9]+),"tid":([0-9]+),"ts":([-0-9.eE+]+)\}')
_THREAD_NAME = re.compile(rb'\{"args":\{"name":"([^"\\]*)"\},"name":"thread_name","ph":"M",'
                          rb'"pid":(-?[0-9]+),"tid":([0-9]+)\}')
_SOURCE = re.compile(rb'"otherData":\{"source":"([^"\\]*)"\}\}\s*$')


def _load_fast(raw):
    found = _X_EVENT.findall(raw)
    if len(found) != raw.count(b'"ph":"X"'):
        return None
    source = _SOURCE.search(raw[-4096:])
    if source is None:
        return None
    table = np.array(found, dtype="S32").reshape(len(found), 5)  # dur, kind, pid, tid, ts
    numbers = {c: table[:, c].astype(np.float64) for c in (0, 2, 3, 4)}
    kinds = {}
    kind_idx = np.fromiter((kinds.setdefault(k, len(kinds)) for k in table[:, 1].tolist()), np.int64, len(table))
    threads = {(int(p), int(t)): n.decode() for n, p, t in _THREAD_NAME.findall(raw)}
    return Trace(numbers[2].astype(np.int64), numbers[3].astype(np.int64), numbers[4], numbers[0],
                 (kind_idx, [k.decode() for k in kinds]), threads, source.group(1).decode())


def load(path):
    """(Trace, source) of a Chrome-trace file."""
    with open(path, "rb") as f:
        raw = f.read()
    trace = _load_fast(raw)
    if trace is not None:
        return trace, trace.source
    doc = json.loads(raw)
    events = doc.get("traceEvents", [])
    xs = [e for e in events if e.get("ph") == "X"]
    names = {(e["pid"], e["tid"]): e.get("args", {}).get("name", "")
             for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    kinds = sorted({kind_of(e) for e in xs})
    kind_index = {k: i for i, k in enumerate(kinds)}
    trace = Trace(np.fromiter((e["pid"] for e in xs), np.int64, len(xs)),
                  np.fromiter((e.get("tid", 0) for e in xs), np.int64, len(xs)),
                  np.fromiter((e["ts"] for e in xs), np.float64, len(xs)),
                  np.fromiter((e.get("dur", 0.0) for e in xs), np.float64, len(xs)),
                  (np.fromiter((kind_index[kind_of(e)] for e in xs), np.int64, len(xs)), kinds),
                  names, doc.get("otherData", {}).get("source", ""))
    return trace, trace.source


def kind_of(event):
    return event.get("name", "").split(" ")[0]


def thread_label(trace, pid, tid):
    name = trace.thread_names.get((pid, tid))
    if not name:
        name = LANE_NAMES.get(tid % 3, str(tid)) + (f" {tid // 3}" if tid >= 3 else "")
    return f"dev {pid} {name}"


def should_aggregate(trace, end_us, max_spans):
    if len(trace) > max_spans:
        return True
    if len(trace) == 0:
        return False
    pixel_us = end_us / (FIG_WIDTH_IN * DPI * 0.85)
    return float(np.median(trace.dur)) < pixel_us and len(trace) > 2000


def busy_in_buckets(starts, ends, edges):
    """Busy time of the union of [starts, ends) in each bucket between `edges`."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_end[:-1]          # a gap before this span: a new merged interval
    first = np.flatnonzero(new)
    ms = s[first]
    me = np.maximum.reduceat(e, first)      # disjoint merged intervals [ms, me)
    # F(t) = busy time before t = sum over intervals of clip(t - start, 0, length).
    cs, ce = np.concatenate(([0.0], np.cumsum(ms))), np.concatenate(([0.0], np.cumsum(me)))
    ks = np.searchsorted(ms, edges, side="right")
    ke = np.searchsorted(me, edges, side="right")
    f = edges * ks - cs[ks] - (edges * ke - ce[ke])
    return np.diff(f)


def aggregate(trace, end_us):
    """Lane-major rows (a block per lane, devices in order within it, consecutive devices
    merged when there are more than MAX_ROWS rows) and their busy fractions, rows x BUCKETS."""
    lane = trace.tid % 3
    devices = np.unique(trace.pid)
    lanes = [int(ln) for ln in np.unique(lane)]
    group = max(1, -(-len(devices) * len(lanes) // MAX_ROWS))  # devices merged into one row
    groups = -(-len(devices) // group)
    edges = np.linspace(0.0, end_us, BUCKETS + 1)
    width = edges[1] - edges[0]
    dev_index = np.searchsorted(devices, trace.pid)
    key = lane * len(devices) + dev_index
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(key[order], np.arange(3 * len(devices) + 1))
    image = np.zeros((len(lanes) * groups, BUCKETS))
    labels, row_lanes = [], []
    for li, ln in enumerate(lanes):
        for g in range(groups):
            members = range(g * group, min((g + 1) * group, len(devices)))
            first, last = devices[members[0]], devices[members[-1]]
            labels.append(f"{LANE_NAMES.get(ln, str(ln))} dev {first}" + (f"-{last}" if last != first else ""))
            row_lanes.append(ln)
            busy = np.zeros(BUCKETS)
            # A merged row: the mean over its devices of each device's busy fraction.
            for d in members:
                sel = order[bounds[ln * len(devices) + d]:bounds[ln * len(devices) + d + 1]]
                if len(sel):
                    busy += busy_in_buckets(trace.ts[sel], trace.ts[sel] + trace.dur[sel], edges)
            image[li * groups + g] = busy / (width * len(members))
    return labels, row_lanes, np.clip(image, 0.0, 1.0), group, groups


def shade(image, row_lanes):
    """RGB: white (idle) to the lane's colour (busy the whole bucket)."""
    rgb = np.ones(image.shape + (3,))
    for r, ln in enumerate(row_lanes):
        colour = np.array(matplotlib.colors.to_rgb(LANE_COLOURS.get(ln, "#CC79A7")))
        rgb[r] = 1.0 - image[r][:, None] * (1.0 - colour)
    return rgb


def draw_spans(ax, trace, end_us):
    rows = sorted({(int(p), int(t)) for p, t in zip(trace.pid, trace.tid)},
                  key=lambda r: (r[0], r[1] % 3, r[1] // 3))
    index = {r: i for i, r in enumerate(rows)}
    kind_idx, kinds = trace.kind
    min_w = end_us * 1e-4  # a zero-length task stays visible
    for r, y in index.items():
        sel = np.flatnonzero((trace.pid == r[0]) & (trace.tid == r[1]))
        for k in np.unique(kind_idx[sel]):
            s = sel[kind_idx[sel] == k]
            bars = list(zip(trace.ts[s] / 1e3, np.maximum(trace.dur[s], min_w) / 1e3))
            ax.broken_barh(bars, (y - 0.4, 0.8), color=KIND_COLOURS.get(kinds[k], "#CC79A7"), linewidth=0)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([thread_label(trace, p, t) for p, t in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)


def draw_aggregated(ax, trace, end_us):
    labels, row_lanes, image, group, groups = aggregate(trace, end_us)
    ax.imshow(shade(image, row_lanes), aspect="auto", interpolation="nearest",
              extent=(0, end_us / 1e3, len(labels) - 0.5, -0.5))
    for boundary in range(groups, len(labels), groups):  # between lane blocks
        ax.axhline(boundary - 0.5, color="#333333", linewidth=0.8)
    step = max(1, groups // 12)  # about 12 labels per lane block, each block's first row labelled
    ticks = [b + k for b in range(0, len(labels), groups) for k in range(0, groups, step)]
    ax.set_yticks(ticks)
    ax.set_yticklabels([labels[t] for t in ticks], fontsize=6 if len(labels) > 40 else 7)
    return group


def rows_of(trace, aggregated):
    if not aggregated:
        return max(1, len({(int(p), int(t)) for p, t in zip(trace.pid, trace.tid)}))
    n = len(np.unique(trace.pid)) * len(np.unique(trace.tid % 3))
    return max(1, min(n, MAX_ROWS + 3))


def draw(panels, out, title="", max_spans=MAX_SPANS, mode="auto"):
    """panels: [(label, trace)] (trace as load() returns it); writes a PNG to `out` (atomically)."""
    panels = [(label, t[0] if isinstance(t, tuple) else t) for label, t in panels]
    end_us = max((t.end_us() for _, t in panels), default=1.0) or 1.0
    aggregated = [mode == "aggregate" or (mode == "auto" and should_aggregate(t, end_us, max_spans))
                  for _, t in panels]
    heights = [rows_of(t, a) for (_, t), a in zip(panels, aggregated)]
    # Per-span rows get 0.32 in each; aggregated panels at most 7 in.
    inches = [0.32 * h if not a else min(7.0, 0.6 + 0.06 * h) for h, a in zip(heights, aggregated)]
    height_in = 1.4 + sum(inches) + 0.4 * len(panels)
    top = 1.0 - 0.75 / height_in  # room for the title, legend and shading scale: 0.75 in
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False,
                             figsize=(FIG_WIDTH_IN, height_in),
                             gridspec_kw={"height_ratios": inches})
    notes = []
    for ax, (label, trace), agg in zip(axes[:, 0], panels, aggregated):
        if agg:
            group = draw_aggregated(ax, trace, end_us)
            how = f"{len(trace):,} spans, busy fraction per {end_us / BUCKETS / 1e3:.3g} ms bucket"
            if group > 1:
                how += f", {group} devices per row"
            notes.append(agg)
        else:
            draw_spans(ax, trace, end_us)
            how = f"{len(trace):,} spans"
        ax.set_title(f"{label}: {trace.end_us() / 1e3:.3f} ms ({how})", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("time (ms)")
    axes[-1, 0].set_xlim(0, end_us / 1e3 * 1.02)
    if all(aggregated):
        handles = [Patch(color=LANE_COLOURS[ln], label=f"{LANE_NAMES[ln]} lane busy") for ln in (0, 1, 2)]
    else:
        handles = [Patch(color=c, label=k) for k, c in KIND_COLOURS.items() if k != "output"]
    fig.legend(handles=handles, loc="upper right", ncol=len(handles), fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, top))
    if any(aggregated):
        # The shading scale: white = idle for the whole bucket, full colour = busy throughout.
        cax = fig.add_axes((0.3, 1.0 - 0.3 / height_in, 0.12, 0.1 / height_in))
        ramp = LinearSegmentedColormap.from_list("busy", ["#FFFFFF", "#000000"])
        cb = fig.colorbar(plt.cm.ScalarMappable(cmap=ramp, norm=plt.Normalize(0, 100)), cax=cax,
                          orientation="horizontal", ticks=[0, 50, 100])
        cb.ax.tick_params(labelsize=6)
        cb.set_label("shade: busy (% of bucket)", fontsize=6, labelpad=1)
    tmp = out + ".tmp.png"
    fig.savefig(tmp, dpi=DPI)
    plt.close(fig)
    os.replace(tmp, out)  # no partial picture on failure
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--title", default="")
    ap.add_argument("--max-spans", type=int, default=MAX_SPANS,
                    help="aggregate a panel with more spans than this (default %(default)s)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--aggregate", action="store_const", const="aggregate", dest="mode",
                      help="always draw busy fractions per bucket")
    mode.add_argument("--per-span", action="store_const", const="per-span", dest="mode",
                      help="always draw one bar per span (slow beyond some 10,000 spans)")
    args = ap.parse_args()
    panels = []
    for spec in args.traces:
        path, _, label = spec.partition(":")
        trace, source = load(path)
        panels.append((label or source or os.path.basename(path), trace))
    draw(panels, args.out, args.title, args.max_spans, args.mode or "auto")


if __name__ == "__main__":
    sys.exit(main())

"""Shared pieces of the plots/ scripts: a colour-blind-safe palette (Okabe and Ito),
reading tessel's CSV files, filtering and grouping rows, and writing a PNG atomically."""
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common
# form of colour blindness.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def read_rows(path, where=()):
    """Rows of a CSV as dicts, keeping those that match every 'col=value' in `where`
    and have no error."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for cond in where:
        col, _, value = cond.partition("=")
        rows = [r for r in rows if r.get(col) == value]
    return [r for r in rows if not r.get("error")]


def ordered(values):
    """Distinct values in first-seen order; numbers sorted numerically."""
    seen = list(dict.fromkeys(values))
    try:
        return sorted(seen, key=float)
    except ValueError:
        return seen


def save(fig, out):
    tmp = out + ".tmp.png"
    fig.savefig(tmp, dpi=130, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, out)


def add_common_args(p):
    p.add_argument("csv")
    p.add_argument("out")
    p.add_argument("--x", required=True, help="column on the x axis")
    p.add_argument("--y", required=True, help="numeric column on the y axis")
    p.add_argument("--group", required=True, help="column whose values get a colour each")
    p.add_argument("--panel", help="column whose values get a subplot each")
    p.add_argument("--where", action="append", default=[], help="keep rows with col=value (repeatable)")
    p.add_argument("--scale-y", type=float, default=1.0, help="multiply y by this (e.g. 1e3 for ms)")
    p.add_argument("--xlabel", default=None)
    p.add_argument("--ylabel", default=None)
    p.add_argument("--title", default="")
    p.add_argument("--log-y", action="store_true")

"""Scatter of simulated against measured seconds from `tessel reproduce sim-vs-measured`
(or any CSV with the two columns): log-log, the line y = x, one colour per --group
value, one marker per --marker value, and the MAPE in the title: the mean of the --error
column's magnitudes where the CSV has it (tessel's `error_pct`, each row's median over its
rounds of the round's simulated against measured error, the figure `tessel compare` prints),
otherwise computed from the plotted medians (which can differ by a point or so).

usage: scatter.py RESULTS.csv OUT.png [--x measured_s] [--y simulated_s] [--group workload]
                  [--marker policy] [--error error_pct] [--title T]
"""
import argparse
import sys

import tessel_plot_common as common
from tessel_plot_common import plt


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv")
    p.add_argument("out")
    p.add_argument("--x", default="measured_s")
    p.add_argument("--y", default="simulated_s")
    p.add_argument("--group", default="workload")
    p.add_argument("--marker", default="policy")
    p.add_argument("--error", default="error_pct",
                   help="column with each row's error in percent, for the title's MAPE (used where present)")
    p.add_argument("--title", default="simulated against measured")
    a = p.parse_args(argv)
    rows = common.read_rows(a.csv)
    if not rows:
        sys.exit(f"scatter.py: no rows in {a.csv}")
    groups = common.ordered(r[a.group] for r in rows)
    markers = common.ordered(r[a.marker] for r in rows)
    fig, ax = plt.subplots(figsize=(6.2, 5.2))
    xs = [float(r[a.x]) * 1e3 for r in rows]
    ys = [float(r[a.y]) * 1e3 for r in rows]
    lo, hi = min(xs + ys) / 1.3, max(xs + ys) * 1.3
    ax.plot([lo, hi], [lo, hi], color="#555555", linewidth=1, linestyle="--", label="y = x")
    for gi, g in enumerate(groups):
        for mi, m in enumerate(markers):
            pts = [(x, y) for x, y, r in zip(xs, ys, rows) if r[a.group] == g and r[a.marker] == m]
            if pts:
                ax.scatter([x for x, _ in pts], [y for _, y in pts], color=common.PALETTE[gi % len(common.PALETTE)],
                           marker=common.MARKERS[mi % len(common.MARKERS)], s=36,
                           label=f"{g} ({m})" if len(markers) > 1 else g)
    if a.error in rows[0]:
        mape = sum(abs(float(r[a.error])) for r in rows) / len(rows)
        what = "MAPE"
    else:
        mape = sum(abs(y - x) / x for x, y in zip(xs, ys)) / len(xs) * 100
        what = "MAPE of the medians"
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured (ms)")
    ax.set_ylabel("simulated (ms)")
    ax.set_title(f"{a.title}\n{what} {mape:.1f}% over {len(xs)} rows", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    common.save(fig, a.out)


if __name__ == "__main__":
    main(sys.argv[1:])

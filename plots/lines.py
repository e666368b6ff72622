"""Line chart from a tessel CSV (sweep or reproduce output): y against a numeric x, one
line per --group value (colour and marker), one subplot per --panel value.

usage: lines.py RESULTS.csv OUT.png --x COL --y COL --group COL [--panel COL] [--where col=value]
                [--scale-y F] [--xlabel L] [--ylabel L] [--title T] [--log-x] [--log-y]
"""
import argparse
import sys

import tessel_plot_common as common
from tessel_plot_common import plt


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_args(p)
    p.add_argument("--log-x", action="store_true")
    a = p.parse_args(argv)
    rows = common.read_rows(a.csv, a.where)
    if not rows:
        sys.exit(f"lines.py: no rows without an error in {a.csv} (where {a.where})")
    panels = common.ordered(r[a.panel] for r in rows) if a.panel else [None]
    groups = common.ordered(r[a.group] for r in rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(max(5, 4.2 * len(panels)), 3.8), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        sub = [r for r in rows if panel is None or r[a.panel] == panel]
        for gi, g in enumerate(groups):
            pts = {}
            for r in sub:
                if r[a.group] == g:
                    pts.setdefault(float(r[a.x]), []).append(float(r[a.y]) * a.scale_y)
            if not pts:
                continue
            xs = sorted(pts)
            ax.plot(xs, [sum(pts[x]) / len(pts[x]) for x in xs], label=g,
                    color=common.PALETTE[gi % len(common.PALETTE)], marker=common.MARKERS[gi % len(common.MARKERS)])
        ax.set_xlabel(a.xlabel or a.x)
        ax.set_ylabel(a.ylabel or a.y)
        if a.log_x:
            ax.set_xscale("log", base=2)
        if a.log_y:
            ax.set_yscale("log")
        if panel is not None:
            ax.set_title(f"{a.panel} = {panel}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][0].legend(title=a.group, fontsize=8)
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    common.save(fig, a.out)


if __name__ == "__main__":
    main(sys.argv[1:])

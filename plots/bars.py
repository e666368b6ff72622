"""Grouped bar chart from a tessel CSV (sweep or reproduce output): one group of bars
per x value, one colour per --group value, one subplot per --panel value.

usage: bars.py RESULTS.csv OUT.png --x COL --y COL --group COL [--panel COL] [--where col=value]
               [--scale-y F] [--xlabel L] [--ylabel L] [--title T] [--log-y]
"""
import argparse
import sys

import tessel_plot_common as common
from tessel_plot_common import plt


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_args(p)
    a = p.parse_args(argv)
    rows = common.read_rows(a.csv, a.where)
    if not rows:
        sys.exit(f"bars.py: no rows without an error in {a.csv} (where {a.where})")
    panels = common.ordered(r[a.panel] for r in rows) if a.panel else [None]
    groups = common.ordered(r[a.group] for r in rows)
    fig, axes = plt.subplots(1, len(panels), figsize=(max(5, 4.2 * len(panels)), 3.8), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        sub = [r for r in rows if panel is None or r[a.panel] == panel]
        xs = common.ordered(r[a.x] for r in sub)
        width = 0.8 / len(groups)
        for gi, g in enumerate(groups):
            heights = []
            for x in xs:
                vals = [float(r[a.y]) * a.scale_y for r in sub if r[a.group] == g and r[a.x] == x]
                heights.append(sum(vals) / len(vals) if vals else 0.0)
            pos = [i + (gi - (len(groups) - 1) / 2) * width for i in range(len(xs))]
            ax.bar(pos, heights, width, label=g, color=common.PALETTE[gi % len(common.PALETTE)])
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs, rotation=20 if max(len(x) for x in xs) > 6 else 0)
        ax.set_xlabel(a.xlabel or a.x)
        ax.set_ylabel(a.ylabel or a.y)
        if a.log_y:
            ax.set_yscale("log")
        if panel is not None:
            ax.set_title(f"{a.panel} = {panel}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(title=a.group, fontsize=8)
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    common.save(fig, a.out)


if __name__ == "__main__":
    main(sys.argv[1:])

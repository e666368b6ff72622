"""Pictures of `tessel compare --trace-dir DIR`: for every strategy and policy, the
measured timeline above the simulated one, on one time axis.

usage: compare_timelines.py DIR OUT.png [--title T]
"""
import argparse
import glob
import os
import sys

from timeline import draw, load


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    panels = []
    for measured in sorted(glob.glob(os.path.join(args.dir, "*-measured.json"))):
        stem = measured[: -len("-measured.json")]
        simulated = stem + "-simulated.json"
        if not os.path.exists(simulated):
            continue
        name = os.path.basename(stem)
        panels.append((f"{name} measured", load(measured)[0]))
        panels.append((f"{name} simulated", load(simulated)[0]))
    if not panels:
        print(f"no *-measured.json / *-simulated.json pairs in {args.dir}", file=sys.stderr)
        return 1
    draw(panels, args.out, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Summarize a kc-bench sweep the way the stage targets read it: per kernel, over the shapes it ran,
the geometric mean of its % of baseline, its lowest and highest shape, how many shapes it is at or
above the baseline, and how many fall below a floor; optionally the same for "the best of" a set of
kernels (at each shape the fastest of them), which is what a shape-by-shape dispatch could reach.

    sweep_summary.py RESULTS.json                               # every kernel of the run
    sweep_summary.py RESULTS.json --kernels 'hgemm/1[456]_'     # only the ids that match (re.search)
    sweep_summary.py RESULTS.json --best-of 'hgemm/1[456]_'     # and the best of those, shape by shape
    sweep_summary.py RESULTS.json --floor 80                    # count shapes below 80% (default 80)

RESULTS.json is what `kc-bench --markdown DIR` writes next to its table (DIR/<group>.json). Only the
rows with status "ok" and a % of baseline count: refused shapes are listed as such, never as a zero
or a pass; the baseline's and the peers' own rows are left out. % of baseline is kc-bench's (the
baseline's median timed alongside divided by the kernel's), so the figures printed are the table's,
combined, not new measurements.

Exit status: 0, or 2 when the file cannot be read or holds no results.
"""

import argparse
import json
import math
import re
import sys


def load_rows(path):
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or not results:
        raise ValueError("no \"results\" list: not a kc-bench --markdown JSON file")
    header = {key: data.get(key) for key in ("gpu", "commit", "date", "command")}
    return header, results


def kernel_rows(results, pattern):
    """{kernel: {shape: pct}} for the kernels' ok rows, and {kernel: [refused shapes]}."""
    timed, refused = {}, {}
    for row in results:
        if row.get("is_baseline") or row.get("is_peer"):
            continue
        kernel = row.get("kernel", "")
        if pattern is not None and not pattern.search(kernel):
            continue
        shape = row.get("shape", "")
        pct = row.get("pct_of_baseline")
        if row.get("status") == "ok" and isinstance(pct, (int, float)) and pct > 0:
            timed.setdefault(kernel, {})[shape] = float(pct)
        else:
            refused.setdefault(kernel, []).append(f"{shape} ({row.get('status')})")
            timed.setdefault(kernel, {})
    return timed, refused


def summarize(pcts, floor):
    """geometric mean, (lowest shape, pct), (highest shape, pct), at or above 100, below floor."""
    if not pcts:
        return None
    mean = math.exp(sum(math.log(p / 100.0) for p in pcts.values()) / len(pcts)) * 100.0
    lowest = min(pcts.items(), key=lambda item: item[1])
    highest = max(pcts.items(), key=lambda item: item[1])
    at_or_above = sum(1 for p in pcts.values() if p >= 100.0)
    below = sorted((shape for shape, p in pcts.items() if p < floor), key=lambda s: pcts[s])
    return mean, lowest, highest, at_or_above, below


def best_of(timed):
    """At each shape every kernel ran, the fastest of them: {shape: (pct, kernel)}."""
    shapes = None
    for pcts in timed.values():
        shapes = set(pcts) if shapes is None else shapes & set(pcts)
    best = {}
    for shape in sorted(shapes or ()):
        kernel, pct = max(((k, pcts[shape]) for k, pcts in timed.items()), key=lambda item: item[1])
        best[shape] = (pct, kernel)
    return best


def print_summary(name, summary, count, floor):
    if summary is None:
        print(f"{name}: no shape timed")
        return
    mean, lowest, highest, at_or_above, below = summary
    print(f"{name}: {count} shapes, geometric mean {mean:.1f}% of baseline, lowest {lowest[1]:.1f}% "
          f"({lowest[0]}), highest {highest[1]:.1f}% ({highest[0]}), {at_or_above} at or above 100%, "
          f"{len(below)} below {floor:g}%")
    if below:
        print("  below the floor: " + ", ".join(below))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a kc-bench --markdown JSON file")
    parser.add_argument("--kernels", help="regular expression: the kernel ids to summarize (re.search)")
    parser.add_argument("--best-of", help="regular expression: also the best of these kernels, shape by shape")
    parser.add_argument("--floor", type=float, default=80.0, help="%% of baseline to count shapes below (80)")
    args = parser.parse_args(argv)
    try:
        header, results = load_rows(args.results)
    except (OSError, ValueError) as error:
        print(f"sweep_summary.py: cannot read {args.results}: {error}", file=sys.stderr)
        return 2
    print(f"{header['gpu']}, commit {header['commit']}, {header['date']}")
    timed, refused = kernel_rows(results, re.compile(args.kernels) if args.kernels else None)
    for kernel in sorted(timed):
        print_summary(kernel, summarize(timed[kernel], args.floor), len(timed[kernel]), args.floor)
        if kernel in refused:
            print(f"  not timed: {len(refused[kernel])} shapes ({', '.join(refused[kernel][:4])}"
                  f"{', …' if len(refused[kernel]) > 4 else ''})")
    if args.best_of:
        chosen, _ = kernel_rows(results, re.compile(args.best_of))
        chosen = {k: v for k, v in chosen.items() if v}
        best = best_of(chosen)
        pcts = {shape: pct for shape, (pct, _) in best.items()}
        print_summary(f"best of {len(chosen)} kernels", summarize(pcts, args.floor), len(pcts), args.floor)
        wins = {}
        for _, kernel in best.values():
            wins[kernel] = wins.get(kernel, 0) + 1
        for kernel in sorted(wins, key=lambda k: -wins[k]):
            print(f"  fastest at {wins[kernel]} shapes: {kernel}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

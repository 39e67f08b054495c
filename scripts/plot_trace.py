#!/usr/bin/env python3
"""Draw one replay of a CUDA graph from a kc-trace CSV (bench/trace/): each kernel a bar from its
start to its end, one lane per kernel (name and grid), time from the replay's first start.

    python3 scripts/plot_trace.py trace.csv.gz --output timeline.png [--graph ID] [--zoom-us 100]
        [--title "..."] [--lane-names "substring=label;..."]

The replay drawn is the one whose span is the median of the graph's replays (after the first
two). Left: the whole replay; right (with --zoom-us): its first Z microseconds, where a
programmatic dependent's bar starts before the previous kernel's ends (its blocks are resident
and waiting) and the chain's hand-offs can be read kernel by kernel. --lane-names renames lanes
whose name and grid hold a substring (e.g. "1024x1x1=[gate|up]"; several separated by semicolons).
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_summary  # noqa: E402


def median_replay(replays, skip=2):
    used = replays[skip:] if len(replays) > skip else replays
    spans = [trace_summary.replay_span(r) for r in used]
    target = statistics.median_low(spans)
    return used[spans.index(target)]


def lane_of(activity, renames):
    key = trace_summary.kernel_label(activity.name, activity.grid, width=48)
    for substring, label in renames:
        if substring in key:
            return label
    return key


def draw(ax, replay, renames, lanes, t0, limit_us=None):
    colors = {}
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf"]
    for a in replay:
        start, end = (a.start - t0) / 1e3, (a.end - t0) / 1e3
        if limit_us is not None and start > limit_us:
            continue
        lane = lane_of(a, renames)
        y = lanes.index(lane)
        color = colors.setdefault(lane, palette[len(colors) % len(palette)])
        ax.broken_barh([(start, end - start)], (y - 0.35, 0.7), facecolors=color, edgecolors="black", linewidth=0.3)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(lanes, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("µs from the replay's first kernel start")
    ax.grid(axis="x", linewidth=0.3)
    if limit_us is not None:
        ax.set_xlim(0, limit_us)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--output", required=True)
    parser.add_argument("--graph", type=int)
    parser.add_argument("--zoom-us", type=float, help="also draw the replay's first Z microseconds")
    parser.add_argument("--title", default="")
    parser.add_argument("--lane-names", default="", help="\"substring=label;...\" lane renames (kernel names hold commas)")
    args = parser.parse_args(argv)
    try:
        graphs = trace_summary.replays_by_graph(trace_summary.read_trace_file(args.trace))
    except (OSError, ValueError) as error:
        print(f"plot_trace: {args.trace}: {error}", file=sys.stderr)
        return 2
    if not graphs:
        print(f"plot_trace: {args.trace}: no kernel ran inside a CUDA graph", file=sys.stderr)
        return 2
    graph = args.graph if args.graph is not None else max(graphs, key=lambda g: len(graphs[g]))
    if graph not in graphs:
        print(f"plot_trace: {args.trace}: no graph {graph}", file=sys.stderr)
        return 2
    renames = [tuple(item.split("=", 1)) for item in args.lane_names.split(";") if "=" in item]
    replay = [a for a in median_replay(graphs[graph]) if a.kind == "kernel"]
    t0 = min(a.start for a in replay)
    lanes = []
    for a in replay:
        lane = lane_of(a, renames)
        if lane not in lanes:
            lanes.append(lane)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if args.zoom_us else 1
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, 0.35 * len(lanes) + 1.6), squeeze=False)
    span = (max(a.end for a in replay) - t0) / 1e3
    draw(axes[0][0], replay, renames, lanes, t0)
    axes[0][0].set_title(f"one replay: {len(replay)} kernels, {span:.1f} µs", fontsize=9)
    if args.zoom_us:
        draw(axes[0][1], replay, renames, lanes, t0, args.zoom_us)
        axes[0][1].set_title(f"its first {args.zoom_us:g} µs", fontsize=9)
    if args.title:
        fig.suptitle(args.title, fontsize=9)
    fig.tight_layout()
    fig.savefig(args.output, dpi=130)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Plot the stage-2 ladders from the JSON kc-bench writes: GB/s per rung, per op, against the copy roof.

    kc-bench --filter ^stage2/ --markdown auto          # writes docs/benchmarks/<gpu>/stage2.json
    python3 scripts/plot_stage2.py docs/benchmarks/h200/stage2.png --json docs/benchmarks/h200/stage2.json

One panel per op, at its first documented bf16 shape: a bar per rung (GB/s over the op's minimum
bytes: each input read once, each output written once), the device-to-device copy bandwidth
measured in the same run as a dashed line (the roof a memory-bound kernel is judged against), and
the PyTorch peers, where the run merged them, as dotted lines. Only rows kc-bench checked and timed
("status": "ok") are drawn.
"""
import argparse
import json
import math
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as error:
        sys.exit(f"plot_stage2: cannot read {path}: {error.strerror}; run kc-bench with --markdown first")
    return report, [r for r in report.get("results", []) if r.get("status") == "ok" and r.get("gbps") is not None]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="image to write (.png or .svg)")
    parser.add_argument("--json", default="docs/benchmarks/h200/stage2.json", help="kc-bench JSON (default: %(default)s)")
    parser.add_argument("--dtype", default="bf16", help="dtype to draw (default bf16)")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report, rows = load(args.json)
    rows = [r for r in rows if r.get("dtype") == args.dtype]
    ops = list(dict.fromkeys(r["op"] for r in rows))  # the registration order
    if not ops:
        sys.exit(f"{args.json}: no timed {args.dtype} rows")
    roof = report.get("copy_gbps", 0.0)
    columns = 4
    panel_rows = math.ceil(len(ops) / columns)
    figure, grid = plt.subplots(panel_rows, columns, figsize=(4.2 * columns, 3.0 * panel_rows), squeeze=False)
    for index, op in enumerate(ops):
        axes = grid[index // columns][index % columns]
        shape = next(r["shape"] for r in rows if r["op"] == op)  # its first documented shape
        kernels = [r for r in rows if r["op"] == op and r["shape"] == shape and not r["is_baseline"] and not r["is_peer"]]
        peers = [r for r in rows if r["op"] == op and r["shape"] == shape and r["is_peer"]]
        names = [r["kernel"].split("/")[-1] for r in kernels]
        bars = axes.bar(range(len(kernels)), [r["gbps"] for r in kernels], color="tab:blue")
        for bar, r in zip(bars, kernels):
            axes.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{r['gbps']:.0f}", ha="center",
                      va="bottom", fontsize=6)
        if roof > 0:
            axes.axhline(roof, color="black", linestyle="--", linewidth=1, label=f"copy {roof:.0f} GB/s")
        for peer, style in zip(peers, ("tab:orange", "tab:green", "tab:red")):
            axes.axhline(peer["gbps"], color=style, linestyle=":", linewidth=1.2,
                         label=f"{peer['kernel']} {peer['gbps']:.0f}")
        axes.set_xticks(range(len(kernels)))
        axes.set_xticklabels(names, rotation=30, ha="right", fontsize=6)
        axes.set_ylim(0, max(roof, max((r["gbps"] for r in kernels), default=0)) * 1.18)
        axes.set_title(f"{op}  {'×'.join(shape.split('x'))} {args.dtype}", fontsize=8)
        axes.tick_params(axis="y", labelsize=6)
        axes.legend(fontsize=5, loc="lower right")
    for index in range(len(ops), panel_rows * columns):
        grid[index // columns][index % columns].axis("off")
    figure.suptitle(f"Stage 2 ladders, GB/s ({args.dtype}), {report['gpu']}, {report['date']}, "
                    f"commit {report['commit']}", fontsize=10)
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    figure.savefig(args.output, dpi=130)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main(sys.argv[1:])

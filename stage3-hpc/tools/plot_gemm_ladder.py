#!/usr/bin/env python3
"""Plot the tensor-core GEMM ladder from the JSON kc-bench writes.

    python3 stage3-hpc/tools/plot_gemm_ladder.py docs/benchmarks/h200/stage3-gemm.json \
        --output docs/benchmarks/h200/stage3-gemm.svg

One group of bars per rung (TFLOPS, one bar per problem shape), the op's baseline as a dashed line
per shape. Only rows kc-bench checked and timed ("status": "ok") are drawn.
"""
import argparse
import json
import sys


def load_rows(path):
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    rows = [r for r in report["results"] if r.get("status") == "ok" and r.get("tflops") is not None]
    return report, rows


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="stage3-gemm.json written by kc-bench --markdown")
    parser.add_argument("--output", required=True, help="image to write (.svg or .png)")
    parser.add_argument("--op", default="hgemm", help="op to plot (default hgemm)")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report, rows = load_rows(args.report)
    rows = [r for r in rows if r["op"] == args.op]
    if not rows:
        sys.exit(f"{args.report}: no timed rows for op {args.op}")
    shapes = sorted({r["shape"] for r in rows}, key=lambda s: [int(x) for x in s.split("x")])
    kernels = sorted({(r["rung"], r["kernel"]) for r in rows if not r["is_baseline"]})
    baselines = {r["shape"]: r["tflops"] for r in rows if r["is_baseline"]}
    tflops = {(r["kernel"], r["shape"]): r["tflops"] for r in rows if not r["is_baseline"]}

    width = 0.8 / len(shapes)
    figure, axes = plt.subplots(figsize=(max(8, 1.1 * len(kernels) + 2), 5))
    for i, shape in enumerate(shapes):
        xs = [k + (i - (len(shapes) - 1) / 2) * width for k in range(len(kernels))]
        ys = [tflops.get((name, shape), 0.0) for _, name in kernels]
        bars = axes.bar(xs, ys, width, label=shape)
        if shape in baselines:
            axes.axhline(baselines[shape], color=bars.patches[0].get_facecolor(), linestyle="--",
                         linewidth=1)
    axes.set_xticks(range(len(kernels)))
    axes.set_xticklabels([name.split("/")[-1] for _, name in kernels], rotation=30, ha="right")
    axes.set_ylabel("TFLOPS")
    axes.set_title(f"{args.op} on {report['gpu']} (dashed: {rows[0]['baseline']}), commit {report['commit']}")
    axes.legend(title="M x N x K", fontsize="small")
    figure.tight_layout()
    figure.savefig(args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main(sys.argv[1:])

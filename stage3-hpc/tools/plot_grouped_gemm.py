#!/usr/bin/env python3
"""Plot the grouped GEMM's sweep over tokens per expert from the JSONs kc-bench writes.

    python3 stage3-hpc/tools/plot_grouped_gemm.py docs/benchmarks/h200/stage3-grouped-gemm-sweep/*.json \
        --output docs/benchmarks/h200/stage3-grouped-gemm.png
    python3 stage3-hpc/tools/plot_grouped_gemm.py docs/benchmarks/h200/stage3-fp8-grouped-gemm.json \
        --op fp8_grouped_gemm --output docs/benchmarks/h200/stage3-fp8-grouped-gemm.png

With --op fp8_grouped_gemm the same panels for the FP8 grouped GEMM (block scales): its rungs (01, 02
and 03 by default) and its baseline, cuBLASLt once per expert; it has no peers.

Each JSON is one kc-bench --markdown run of the grouped_gemm op on one layer shape (G x N x K) and
one token count (the sweep's command is in the stage-3 README). TFLOPS against tokens per expert
(tokens / G), one panel per layer shape and routing (uniform, skew 0; Zipf, skew 1): the kc rungs
(01, the loop of GEMMs, 03, 05 and 07 by default; --rungs to change it), cuBLAS's two paths (the peers:
one grouped call, and one GemmEx per expert) and the baseline, the faster of the two in its own run.
Under each TFLOPS panel, the same rungs' % of the baseline timed alongside them (sample by sample,
at the same clocks: the board's power limit moves the clocks between runs, so a rung's TFLOPS and the
baseline's own run can differ by more than the two do side by side), with the 100% line of the
target. Only rows kc-bench checked and timed ("status": "ok") are drawn. The runs must come from one
GPU and one commit (the figure's heading names them).
"""
import argparse
import sys

from bench_report import read_report, save_figure

# op -> (default rungs, the baseline's label, the figure's title)
OPS = {
    "grouped_gemm": ("1,3,5,7", "cuBLAS, the faster path (kc's baseline, own run)", "Grouped GEMM (grouped_gemm, bf16)"),
    "fp8_grouped_gemm": ("1,2,3", "cuBLASLt per expert, block scales (kc's baseline, own run)",
                         "Grouped GEMM (fp8_grouped_gemm, e4m3, 1x128 / 128x128 block scales)"),
}
PEER_STYLES = {  # peer row name prefix -> (label, colour, line style)
    "cuBLAS GemmGroupedBatchedEx": ("cuBLAS GemmGroupedBatchedEx (one call)", "tab:gray", ":"),
    "cuBLAS GemmEx per expert": ("cuBLAS GemmEx per expert (a loop)", "tab:brown", ":"),
}
LAYER_NAMES = {"8x14336x4096": "Mixtral-like, 8 experts of 4096 -> 14336",
               "8x4096x14336": "Mixtral-like down, 8 experts of 14336 -> 4096",
               "64x1408x2048": "DeepSeek-like, 64 experts of 2048 -> 1408"}


def peer_style(kernel):
    for prefix, style in PEER_STYLES.items():
        if kernel.startswith(prefix):
            return list(PEER_STYLES).index(prefix), style
    return None


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="stage3-grouped-gemm.json files written by kc-bench --markdown")
    parser.add_argument("--output", required=True, help="image to write (.svg or .png)")
    parser.add_argument("--op", default="grouped_gemm", choices=sorted(OPS), help="the op (default grouped_gemm)")
    parser.add_argument("--rungs", help="kc rungs to draw (default 1,3,5,7; 1,2,3 for fp8_grouped_gemm)")
    args = parser.parse_args(argv)
    default_rungs, baseline_label, title = OPS[args.op]
    rungs = [int(r) for r in (args.rungs or default_rungs).split(",")]

    reports = [read_report(path, "plot_grouped_gemm") for path in args.reports]
    runs = {(r["gpu"], r["commit"]) for r in reports}
    if len(runs) != 1:
        sys.exit(f"plot_grouped_gemm: the runs come from {len(runs)} (GPU, commit) pairs; plot one at a time")
    rows = [row for report in reports for row in report["results"]
            if row.get("status") == "ok" and row.get("op") == args.op and row.get("tflops")]
    if not rows:
        sys.exit(f"plot_grouped_gemm: no timed rows of {args.op} in these files")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def series_of(row):
        """(order, label, colour, line style) of the line a row belongs to, or None."""
        if row.get("is_baseline"):
            return (0, baseline_label, "black", "-")
        if row.get("is_peer"):
            found = peer_style(row["kernel"])
            return (1 + found[0],) + found[1] if found else None
        if row.get("rung") in rungs:
            return (10 + row["rung"], f"kc {row['kernel'].split('/')[-1]}", colours[rungs.index(row["rung"])], "-")
        return None

    shapes = [s for s in LAYER_NAMES if any(row["shape"] == s for row in rows)]
    shapes += sorted({row["shape"] for row in rows} - set(shapes))
    skews = sorted({float(row["params"].get("skew", 0)) for row in rows})
    figure, all_axes = plt.subplots(2 * len(shapes), len(skews), squeeze=False, sharey="row",
                                    gridspec_kw={"height_ratios": [3, 2] * len(shapes)},
                                    figsize=(4.4 * len(skews) + 3.6, 5.6 * len(shapes)))
    for i, shape in enumerate(shapes):
        experts = int(shape.split("x")[0])
        for j, skew in enumerate(skews):
            axes, pct_axes = all_axes[2 * i][j], all_axes[2 * i + 1][j]
            lines, pct_lines = {}, {}
            for row in rows:
                series = series_of(row)
                if row["shape"] != shape or float(row["params"].get("skew", 0)) != skew or series is None:
                    continue
                per_expert = row["params"]["tokens"] / experts
                lines.setdefault(series, []).append((per_expert, row["tflops"]))
                if row.get("pct_of_baseline") and not row.get("is_peer"):
                    pct_lines.setdefault(series, []).append((per_expert, row["pct_of_baseline"]))
            for target, series_points in ((axes, lines), (pct_axes, pct_lines)):
                for (_, label, colour, style), points in sorted(series_points.items()):
                    points.sort()
                    target.plot([p[0] for p in points], [p[1] for p in points], style, marker="o",
                                 markersize=3.5, color=colour, label=label, linewidth=1.6 if style == "-" else 1.3)
            per_expert = sorted({p[0] for points in lines.values() for p in points})
            for target in (axes, pct_axes):
                target.set_xscale("log", base=2)
                target.set_xticks(per_expert)
                target.set_xticklabels([f"{p:g}" for p in per_expert], fontsize=7)
                target.grid(axis="y", linewidth=0.4, alpha=0.5)
            pct_axes.axhline(100, color="black", linewidth=0.8)
            pct_axes.set_xlabel("tokens per expert (tokens / G)", fontsize=8)
            if j == 0:
                axes.set_ylabel("TFLOPS")
                pct_axes.set_ylabel("% of baseline\n(timed alongside)", fontsize=8)
            routing = "uniform routing" if skew == 0 else f"Zipf routing (skew {skew:g})"
            axes.set_title(f"{LAYER_NAMES.get(shape, shape)},\n{routing}", fontsize=8, loc="left")
            axes.set_ylim(bottom=0)
    handles, labels = all_axes[0][0].get_legend_handles_labels()
    all_axes[0][-1].legend(handles, labels, fontsize="small", loc="upper left", bbox_to_anchor=(1.03, 1.0))
    contents = ("kc rungs, cuBLAS's two paths, the baseline in its own run" if args.op == "grouped_gemm"
                else "kc rungs, the baseline in its own run")
    save_figure(figure, reports[0], title,
                f"TFLOPS against tokens per expert ({contents}), and % of the baseline timed alongside", args.output)


if __name__ == "__main__":
    main(sys.argv[1:])

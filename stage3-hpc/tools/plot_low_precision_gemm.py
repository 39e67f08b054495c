#!/usr/bin/env python3
"""Plot the FP8 and INT8 GEMM ladders against cuBLASLt from the JSON kc-bench writes.

    python3 stage3-hpc/tools/plot_low_precision_gemm.py docs/benchmarks/h200/stage3-fp8-gemm.json \
        docs/benchmarks/h200/stage3-int8-gemm.json --output docs/benchmarks/h200/stage3-low-precision-gemm.png

One panel per op (and FP8 scaling): fp8_gemm with one scale a tensor, fp8_gemm with block scales,
int8_gemm (the s32 product) and int8_gemm_dequant (dequantized in the epilogue); in each, one
group of bars per rung and one bar per problem shape, each bar the rung's **% of its baseline
timed alongside it** (cuBLASLt's FP8 or INT8 GEMM in the same run, sample by sample, as the tables
print). The line at 100% is the baseline. A panel whose baseline refused every shape (cuBLASLt's
block-scaled FP8 on sm_90 in this build) has no bars and says so; only rows kc-bench checked and
timed ("status": "ok") are drawn.
"""
import argparse
import sys

from bench_report import grouped_bars, read_report, save_figure, timed_rows

OPS = ("fp8_gemm", "int8_gemm", "int8_gemm_dequant")


def panel_of(row):
    if row["op"] == "fp8_gemm":
        block = float(row.get("params", {}).get("scaling", 0.0)) == 1.0
        return "fp8_gemm, 1 x 128 / 128 x 128 block scales" if block else "fp8_gemm, one scale a tensor"
    return row["op"]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="stage3-fp8-gemm.json, stage3-int8-gemm.json (kc-bench --markdown)")
    parser.add_argument("--output", required=True, help="image to write (.svg or .png)")
    parser.add_argument("--ymax", type=float, default=160.0, help="top of the axis in %% (default 160)")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reports = [read_report(path, "plot_low_precision_gemm") for path in args.reports]
    runs = {(r["gpu"], r["date"], r["commit"]) for r in reports}
    if len(runs) != 1:
        sys.exit(f"plot_low_precision_gemm: the reports come from different runs {sorted(runs)}; give one run's tables")
    all_rows = [r for report in reports for r in report["results"] if r.get("op") in OPS]
    panels = list(dict.fromkeys(panel_of(r) for r in all_rows))
    rows = [r for report in reports for r in timed_rows(report, OPS, "pct_of_baseline") if r.get("baseline_alongside")]
    if not rows:
        sys.exit(f"{', '.join(args.reports)}: no rows of {', '.join(OPS)} timed against a baseline")
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of = {shape: colors[i % len(colors)] for i, shape in enumerate(shapes)}
    figure, all_axes = plt.subplots(len(panels), 1, squeeze=False, figsize=(11, 3.6 * len(panels)))
    for axes, panel in zip(all_axes[:, 0], panels):
        mine = [r for r in rows if panel_of(r) == panel]
        baseline = next(r["baseline"] for r in all_rows if panel_of(r) == panel)
        axes.set_title(f"{panel}; baseline: {baseline}", fontsize=9)
        axes.axhline(100.0, color="black", linestyle="--", linewidth=0.8)
        axes.set_ylim(0, args.ymax)
        axes.set_ylabel("% of the baseline alongside")
        if not mine:
            axes.set_xticks([])
            axes.text(0.5, 0.5, "no baseline: cuBLASLt refused every shape in this run", ha="center",
                      va="center", transform=axes.transAxes, fontsize=9)
            continue
        kernels = sorted({(r["rung"], r["kernel"]) for r in mine})
        panel_shapes = [s for s in shapes if any(r["shape"] == s for r in mine)]
        pct = {(r["kernel"], r["shape"]): r["pct_of_baseline"] for r in mine}
        grouped_bars(axes, kernels, panel_shapes, pct, args.ymax, color_of)
        axes.set_xticks(range(len(kernels)))
        axes.set_xticklabels([name.rsplit("/", 1)[-1] for _, name in kernels], fontsize=8)
        axes.legend(fontsize=7, ncol=min(4, len(panel_shapes)), title="M x N x K", title_fontsize=7)
    save_figure(figure, reports[0], "FP8 and INT8 GEMM ladders against cuBLASLt",
                "% of the baseline's time on the same problem, timed in alternation; dashed: the baseline", args.output)


if __name__ == "__main__":
    main(sys.argv[1:])

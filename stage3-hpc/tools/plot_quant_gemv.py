#!/usr/bin/env python3
"""Plot the weight-only quantized GEMV ladders from the JSON kc-bench writes.

    python3 stage3-hpc/tools/plot_quant_gemv.py docs/benchmarks/h200/stage3-quant.json \
        --output docs/benchmarks/h200/stage3-quant.png
    python3 stage3-hpc/tools/plot_quant_gemv.py docs/benchmarks/h200/stage3-int4.json \
        --output docs/benchmarks/h200/stage3-int4.png

A decode step's GEMV is memory-bound: its time is the weight's bytes over the bandwidth it reaches,
so each bar is a rung's **% of the copy bandwidth measured in the same run** (the table's "% of
ceiling": the op's bytes — the packed weight, x and y — over its time, against a device-to-device
copy), the figure the stage's GEMV target (85%) is stated in. One panel per weight format (GGUF q4_0,
q4_1 and q8_0 blocks in stage3-quant.json; 4-bit groups of G with scales and zero points in
stage3-int4.json), one group of bars per rung, one bar per problem shape (M x N x K). Only rows kc-bench checked and timed
("status": "ok") are drawn; a rung that refuses a shape (the early rungs take one row, rung 09 and
later batches) has no bar there. The dashed line is the 85% target.
"""
import argparse
import sys

from bench_report import grouped_bars, read_report, save_figure, timed_rows

OPS = ("gemv_gguf", "gemv_int4")
GGML_TYPES = {2: "q4_0", 3: "q4_1", 8: "q8_0"}  # ggml's type ids (the op's ggml_type parameter)
TARGET = 85.0


def weight_format(row):
    """'q4_1', 'int4 g128', ...: the panel a row belongs to."""
    params = row.get("params", {})
    if row["op"] == "gemv_int4":
        return f"int4 g{int(params.get('group_size', 128))}"
    return GGML_TYPES.get(int(params.get("ggml_type", -1)), f"ggml type {params.get('ggml_type')}")


def load(path):
    report = read_report(path, "plot_quant_gemv")
    return report, timed_rows(report, OPS, "pct_of_ceiling")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="stage3-quant.json or stage3-int4.json written by kc-bench --markdown")
    parser.add_argument("--output", required=True, help="image to write (.svg or .png)")
    parser.add_argument("--ymax", type=float, default=110.0, help="top of the axis in %% (default 110)")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report, rows = load(args.report)
    if not rows:
        sys.exit(f"{args.report}: no timed rows of {', '.join(OPS)}")
    formats = list(dict.fromkeys(weight_format(r) for r in rows))  # the table's order
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of = {shape: colors[i % len(colors)] for i, shape in enumerate(shapes)}
    largest = max(len({r["kernel"] for r in rows if weight_format(r) == f}) for f in formats)
    figure, all_axes = plt.subplots(len(formats), 1, squeeze=False,
                                    figsize=(max(11, 1.3 * largest + 4), 3.8 * len(formats)))
    for axes, fmt in zip(all_axes[:, 0], formats):
        mine = [r for r in rows if weight_format(r) == fmt]
        kernels = sorted({(r["rung"], r["kernel"]) for r in mine})
        panel_shapes = [s for s in shapes if any(r["shape"] == s for r in mine)]
        pct = {(r["kernel"], r["shape"]): r["pct_of_ceiling"] for r in mine}
        grouped_bars(axes, kernels, panel_shapes, pct, args.ymax, color_of)
        axes.axhline(TARGET, color="black", linestyle="--", linewidth=0.8)
        axes.set_xticks(range(len(kernels)))
        axes.set_xticklabels([name.rsplit("/", 1)[-1] for _, name in kernels], rotation=20, ha="right", fontsize=8)
        axes.set_ylim(0, args.ymax)
        axes.set_ylabel("% of copy bandwidth")
        axes.set_title(f"{fmt} weights", fontsize=9)
        axes.legend(fontsize=7, ncol=min(4, len(panel_shapes)), title="M x N x K", title_fontsize=7)
    save_figure(figure, report, "Weight-only quantized GEMV ladders",
                f"bytes over time against a device-to-device copy of {report['copy_gbps']:.0f} GB/s "
                f"measured in the run; dashed: the {TARGET:.0f}% target", args.output)


if __name__ == "__main__":
    main(sys.argv[1:])

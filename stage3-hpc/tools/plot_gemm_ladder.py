#!/usr/bin/env python3
"""Plot the tensor-core GEMM ladder from the JSON kc-bench writes.

    python3 stage3-hpc/tools/plot_gemm_ladder.py docs/benchmarks/h200/stage3-gemm.json \
        --output docs/benchmarks/h200/stage3-gemm.png

One group of bars per rung, one bar per problem shape, each bar the rung's **% of its baseline
timed alongside it** (kc-bench times a kernel in alternation with its baseline, sample by sample;
the ratio of those two medians is what the tables print, and what is drawn here, so the plot and
the table agree). Rungs 01-09 and 11 are the `hgemm` op against cuBLAS GemmEx; rung 10 is the
fused `gemm_bias_gelu` op against its own baseline, cuBLASLt with the GELU_BIAS epilogue. The line
at 100% is the baseline. Bars taller than the axis are cut and labelled with their value. Only rows
kc-bench checked and timed ("status": "ok") at the op's default parameters are drawn.

Two panels, each with its own colours: the tile-sized problems (M > 64) on top, the decode-sized
ones (M <= 64, where rung 11 runs and the tile rungs' 128-row tiles are mostly padding) below. A
rung with no timed row in a panel (rung 11 refuses M > 64) has no group there.
"""
import argparse
import sys

from bench_report import read_report, save_figure, timed_rows

OPS = ("hgemm", "gemm_bias_gelu")
SMALL_M = 64  # rung 11's limit: problems with M <= 64 go to the lower panel


def load(path):
    report = read_report(path, "plot_gemm_ladder")
    rows = [
        r
        for r in timed_rows(report, OPS, "pct_of_baseline")
        if r.get("baseline_alongside")
        and all(v == {"alpha": 1.0, "beta": 0.0}.get(k, v) for k, v in r.get("params", {}).items())
    ]
    return report, rows


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="stage3-gemm.json written by kc-bench --markdown")
    parser.add_argument("--output", required=True, help="image to write (.svg or .png)")
    parser.add_argument("--ymax", type=float, default=125.0, help="top of the axis in %% (default 125)")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report, rows = load(args.report)
    if not rows:
        sys.exit(f"{args.report}: no timed rows of {', '.join(OPS)}")
    shapes = list(dict.fromkeys(r["shape"] for r in rows))  # the documented order
    pct = {(r["kernel"], r["shape"]): r["pct_of_baseline"] for r in rows}
    baselines = {r["op"]: r["baseline"] for r in rows}
    panels = [
        (f"tile-sized problems (M > {SMALL_M})", [s for s in shapes if int(s.split("x")[0]) > SMALL_M]),
        (f"decode-sized problems (M <= {SMALL_M})", [s for s in shapes if int(s.split("x")[0]) <= SMALL_M]),
    ]
    panels = [(title, panel) for title, panel in panels if panel]

    largest = max(len({r["kernel"] for r in rows if r["shape"] in panel}) for _, panel in panels)
    figure, all_axes = plt.subplots(len(panels), 1, squeeze=False,
                                    figsize=(max(11, 1.2 * largest + 4), 4.6 * len(panels)))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for axes, (title, panel) in zip(all_axes[:, 0], panels):
        kernels = sorted({(r["rung"], r["kernel"]) for r in rows if r["shape"] in panel})
        width = 0.8 / len(panel)
        for i, shape in enumerate(panel):
            xs, ys = [], []
            for k, (_, name) in enumerate(kernels):
                if (name, shape) in pct:
                    xs.append(k + (i - (len(panel) - 1) / 2) * width)
                    ys.append(pct[(name, shape)])
            label = "×".join(shape.split("x")) if len(set(shape.split("x"))) > 1 else shape.split("x")[0] + "³"
            axes.bar(xs, [min(y, args.ymax) for y in ys], width, label=label, color=colors[i % len(colors)])
            for x, y in zip(xs, ys):
                if y > args.ymax:
                    axes.text(x, args.ymax, f"{y:.0f}%", rotation=90, ha="center", va="top", fontsize=7,
                              color="white")
        axes.axhline(100.0, color="black", linestyle="--", linewidth=1,
                     label="baseline, timed alongside (= 100%)")
        names = []
        for rung, name in kernels:
            short = name.split("/")[-1]
            names.append(short + ("\n(vs cuBLASLt\nGELU_BIAS)" if name.startswith("stage3/gemm_bias_gelu/") else ""))
        axes.set_xticks(range(len(kernels)))
        axes.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        axes.set_xlim(-0.6, largest - 0.4)
        axes.set_ylim(0, args.ymax)
        axes.set_ylabel("% of the baseline timed alongside")
        axes.set_title(title, fontsize=9, loc="left")
        axes.legend(title="M x N x K", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(figure, report, "Tensor-core GEMM ladder",
                f"hgemm vs {baselines.get('hgemm', '?')}; gemm_bias_gelu (rung 10) vs "
                f"{baselines.get('gemm_bias_gelu', '?')}", args.output)


if __name__ == "__main__":
    main(sys.argv[1:])

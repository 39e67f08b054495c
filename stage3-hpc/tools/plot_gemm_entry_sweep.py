#!/usr/bin/env python3
"""Plot the public GEMM entry (Gemm::run) across its shape sweep from the JSON kc-bench writes.

    python3 stage3-hpc/tools/plot_gemm_entry_sweep.py docs/benchmarks/h200/stage3-gemm-entry.json \
        --output docs/benchmarks/h200/stage3-gemm-entry.png

`stage3/hgemm/13_entry` is Gemm::run registered with kc-bench, run on the 58 shapes of
stage3-hpc/gemm/shape_sweep.txt. Top panel: one bar per shape, the entry's **% of cuBLAS timed
alongside it** (cuBLAS time / entry time, the two medians of samples taken in alternation: the
table's "% of baseline"), coloured by the path the entry took (the row's `note`, "path: ..."): a kc
rung, or cuBLAS GemmEx as its fallback (a fallback reads about 100% because it *is* cuBLAS). Shapes
are grouped by a class read from the shape alone (see shape_class), in the sweep's order within a
class. Lines at 100% (parity) and at 80% (the stage's floor); the geometric mean and the lowest
value are in the title. Bottom panel: the shapes with M <= 64, where the time is reading the weight
B: GB/s on B's bytes alone (N x K x 2) for the entry and for cuBLAS timed alongside it, against the
device-to-device copy bandwidth the same run measured (the JSON's `copy_gbps`, cudaMemcpy, read +
write bytes). Only rows kc-bench checked and timed ("status": "ok") are drawn.
"""
import argparse
import math
import sys

from bench_report import read_report, save_figure, timed_rows

KERNEL = "stage3/hgemm/13_entry"
FALLBACK = "cuBLAS GemmEx (fallback)"
PATH_COLOURS = {FALLBACK: "tab:gray", "stage3/hgemm/12_small_m_gemv": "tab:orange",
                "stage3/hgemm/16_small_m_cluster_split": "tab:green", "stage3/hgemm/09_tma_store": "tab:blue"}
FLOOR = 80.0
CLASSES = ("M ≤ 64, M a power of 2,\nLlama widths", "M ≤ 64, other M\nor small widths", "M = 128–256",
           "narrow N\n(N ≤ 128)", "odd sizes, K tails\n(K % 64 ≠ 0)", "prefill\n(M = 2048)", "squares")


def dims(shape):
    return tuple(int(d) for d in shape.split("x"))


def shape_class(shape):
    """One of CLASSES, close to the sweep file's sections, from M, N and K alone (rules in this order)."""
    m, n, k = dims(shape)
    if m <= 64:
        tuned = m & (m - 1) == 0 and min(n, k) >= 1024  # the small-M table's M at Llama widths
        return CLASSES[0] if tuned else CLASSES[1]
    if m <= 256:
        return CLASSES[2]
    if n <= 128:
        return CLASSES[3]
    if k % 64:
        return CLASSES[4]
    return CLASSES[6] if m == n == k else CLASSES[5]


def path_of(row):
    path = row.get("note", "").removeprefix("path: ")
    return FALLBACK if path.startswith("cuBLAS") else path


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="stage3-gemm-entry.json written by kc-bench --markdown")
    parser.add_argument("--output", required=True, help="image to write (.svg or .png)")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    report = read_report(args.report, "plot_gemm_entry_sweep")
    rows = [r for r in timed_rows(report, ("hgemm",), "pct_of_baseline") if r["kernel"] == KERNEL]
    if not rows:
        sys.exit(f"{args.report}: no timed rows of {KERNEL}")
    classes = [c for c in CLASSES if any(shape_class(r["shape"]) == c for r in rows)]
    rows.sort(key=lambda r: classes.index(shape_class(r["shape"])))  # stable: the sweep's order inside a class
    pct = [r["pct_of_baseline"] for r in rows]
    geomean = math.exp(sum(math.log(p) for p in pct) / len(pct))
    lowest = min(rows, key=lambda r: r["pct_of_baseline"])
    small = [r for r in rows if dims(r["shape"])[0] <= 64]
    kc = [r["pct_of_baseline"] for r in rows if path_of(r) != FALLBACK]

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(17, 10.5),
                                         gridspec_kw={"height_ratios": [len(rows), len(small)]})
    top.bar(range(len(rows)), pct, color=[PATH_COLOURS.get(path_of(r), "tab:red") for r in rows])
    top.axhline(100, color="black", linewidth=1)
    top.axhline(FLOOR, color="tab:red", linestyle="--", linewidth=1)
    for axes, part, names in ((top, rows, True), (bottom, small, False)):
        start = 0
        for name in classes:  # a line between classes; their names over the top panel's bars
            count = sum(shape_class(r["shape"]) == name for r in part)
            if names and count:
                axes.text(start + (count - 1) / 2, 139, name, ha="center", va="top", fontsize=8)
            if start and count:
                axes.axvline(start - 0.5, color="black", linewidth=0.6, alpha=0.5)
            start += count
    top.set_ylim(0, 140)
    top.set_ylabel("% of cuBLAS, timed alongside")
    paths = list(dict.fromkeys(path_of(r) for r in rows))
    handles = [Patch(color=PATH_COLOURS.get(p, "tab:red"), label=p) for p in paths]
    handles += [plt.Line2D([], [], color="black", label="100%: parity with cuBLAS"),
                plt.Line2D([], [], color="tab:red", linestyle="--", label=f"{FLOOR:.0f}%: the stage's floor")]
    top.legend(handles=handles, title="path the entry took", fontsize=8, title_fontsize=8,
               loc="upper left", bbox_to_anchor=(1.005, 1.0))
    top.set_title(f"Gemm::run's % of cuBLAS on the {len(rows)} shapes: geometric mean {geomean:.1f}%, lowest "
                  f"{lowest['pct_of_baseline']:.1f}% ({lowest['shape'].replace('x', '×')}, {path_of(lowest)}); "
                  f"a kc rung ran {len(kc)} of them, at {min(kc):.1f}–{max(kc):.1f}%",
                  fontsize=9, loc="left")

    b_bytes = [dims(r["shape"])[1] * dims(r["shape"])[2] * 2 for r in small]
    xs = range(len(small))
    bottom.bar(xs, [b / (r["time_ms"] * 1e6) for b, r in zip(b_bytes, small)],
               color=[PATH_COLOURS.get(path_of(r), "tab:red") for r in small])
    bottom.plot(xs, [b / (r["baseline_ms"] * 1e6) for b, r in zip(b_bytes, small)], "k_", markersize=9,
                markeredgewidth=2, label="cuBLAS timed alongside")
    bottom.axhline(report["copy_gbps"], color="tab:purple", linestyle=":", linewidth=1.2,
                   label=f"copy bandwidth, {report['copy_gbps']:.0f} GB/s\n(cudaMemcpy D2D in the same run)")
    bottom.set_ylabel("GB/s on B's bytes (N·K·2)")
    bottom.set_title("M ≤ 64: the weight B read once; bars: the entry, coloured by its path", fontsize=9,
                     loc="left")
    bottom.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    for axes, part in ((top, rows), (bottom, small)):
        axes.set_xticks(range(len(part)))
        axes.set_xticklabels([r["shape"].replace("x", "×") for r in part], rotation=90, fontsize=7)
        axes.set_xlim(-0.6, len(part) - 0.4)
    save_figure(figure, report, f"Public GEMM entry Gemm::run ({KERNEL}) across the shape sweep, bf16",
                f"driver {report['driver']}, CUDA runtime {report['cuda_runtime']}, cuBLAS {report['cublas']}; "
                f"baseline: {rows[0]['baseline']}", args.output)


if __name__ == "__main__":
    main(sys.argv[1:])

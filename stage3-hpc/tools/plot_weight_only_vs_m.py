#!/usr/bin/env python3
"""Plot the weight-only quantized GEMV/GEMM rungs against M (rows of x) from the JSONs kc-bench writes.

    python3 stage3-hpc/tools/plot_weight_only_vs_m.py \
        docs/notes/2026-12-04-stage3-gguf-wgmma-88daf5f.json \
        docs/notes/2026-12-04-stage3-gguf-wgmma-cublas-88daf5f.json \
        docs/notes/2026-12-04-stage3-gguf-wgmma-q4_1-88daf5f.json \
        docs/notes/2026-12-04-stage3-gguf-wgmma-q8_0-88daf5f.json \
        docs/benchmarks/h200/stage3-quant.json docs/benchmarks/h200/stage3-int4.json \
        --output docs/benchmarks/h200/stage3-weight-only-vs-m.png

The files are grouped into kc-bench runs by (commit, date, command): one kc-bench --markdown run
writes a report per group, so a run of the GGUF rungs with hgemm in its filter leaves the quantized
rows in one file and cuBLAS's bf16 rows in another. A point is the fastest kc rung of one run at
that M on one weight (N x K), the legend naming the rung at each M; a line is one (weight format,
weight, run), and lines from different runs are never joined. Top panel: **speed-up over cuBLAS bf16 on the same
M x N x K in the same run** (cuBLAS GemmEx's median / the rung's median), drawn only where that
run has a cuBLAS row of the shape; the stage's 3x target at M = 16-64 and the ~5x expected at M = 1
are drawn as targets, not measurements. Bottom panel: every format on the --weight shape, **GB/s
on the weight's own bytes** (the op's bytes, as kc-bench counts them from its GB/s and time, less
x's and y's bf16 bytes), against the device-to-device copy bandwidth the runs measured (their
`copy_gbps`). int4 rows at the op's default group of 128 only. Only rows kc-bench checked and
timed ("status": "ok") are drawn. The files must come from one GPU, driver and CUDA version.
"""
import argparse
import sys

from bench_report import read_report
from plot_quant_gemv import weight_format

OPS = ("gemv_gguf", "gemv_int4")
FORMAT_COLOURS = {"q4_0": "tab:blue", "q4_1": "tab:orange", "q8_0": "tab:green", "int4 g128": "tab:red"}
RUN_STYLES = ("-", "--", ":", "-.")
TARGET_BATCH, EXPECTED_M1 = 3.0, 5.0


def dims(shape):
    return tuple(int(d) for d in shape.split("x"))


def best_per_m(rows):
    """{M: the fastest row at M}, M ascending, over the rows given (one format, weight and run)."""
    best = {}
    for r in rows:
        m = dims(r["shape"])[0]
        if m not in best or r["time_ms"] < best[m]["time_ms"]:
            best[m] = r
    return dict(sorted(best.items()))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="JSON files written by kc-bench --markdown")
    parser.add_argument("--output", required=True, help="image to write (.svg or .png)")
    parser.add_argument("--weight", default="4096x4096", help="N x K of the bottom panel (default 4096x4096)")
    args = parser.parse_args(argv)

    reports = [read_report(path, "plot_weight_only_vs_m") for path in args.reports]
    machines = {(r["gpu"], r["driver"], r["cuda_runtime"], r["cublas"]) for r in reports}
    if len(machines) != 1:
        sys.exit(f"plot_weight_only_vs_m: the files come from {len(machines)} GPU/driver/CUDA setups")
    runs = {}  # (commit, date, command) -> {"copy_gbps", "quant": rows, "cublas": {shape: ms}}
    for report in reports:
        run = runs.setdefault((report["commit"], report["date"], report["command"]),
                              {"copy_gbps": report["copy_gbps"], "quant": [], "cublas": {}, "copies": []})
        for r in report["results"]:
            if r.get("status") != "ok" or not r.get("time_ms"):
                continue
            if r["op"] == "hgemm" and r.get("is_baseline"):
                run["cublas"][r["shape"]] = r["time_ms"]
            elif r["op"] in OPS and r.get("is_baseline") and r["shape"].endswith("x" + args.weight):
                run["copies"].append(r["gbps"])  # a cudaMemcpy of the op's bytes on this weight
            elif r["op"] in OPS and not r.get("is_baseline") and not r.get("is_peer"):
                if r["op"] == "gemv_int4" and r["params"].get("group_size", 128) != 128:
                    continue
                m, n, k = dims(r["shape"])
                r["weight_bytes"] = r["gbps"] * r["time_ms"] * 1e6 - 2 * m * (n + k)  # less x and y (bf16)
                run["quant"].append(r)
    ordered = sorted(runs.items(), key=lambda item: item[0][1])  # by date
    style_of = {commit: RUN_STYLES[i % len(RUN_STYLES)]
                for i, commit in enumerate(dict.fromkeys(key[0] for key, _ in ordered))}

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(12, 11.5), gridspec_kw={"height_ratios": [1, 1.25]})
    weight_colours = dict(zip(("4096x4096", "14336x4096", "4096x14336"), ("tab:blue", "tab:purple", "tab:cyan")))
    all_m = set()

    def draw(axes, best, value, label, colour, style):
        all_m.update(best)
        label += ": rung " + ", ".join(f"{best[m]['rung']:02d}" for m in best)  # the fastest, M by M
        axes.plot(list(best), [value(r) for r in best.values()], style, marker="o", markersize=4, color=colour,
                  label=label)

    for (commit, date, _), run in ordered:
        name = f"run {commit[:7]} {date[5:16]}"
        for fmt in dict.fromkeys(weight_format(r) for r in run["quant"]):
            mine = [r for r in run["quant"] if weight_format(r) == fmt]
            for weight in dict.fromkeys("x".join(r["shape"].split("x")[1:]) for r in mine):
                on_weight = [r for r in mine if r["shape"].endswith("x" + weight)]
                paired = best_per_m(r for r in on_weight if r["shape"] in run["cublas"])
                if paired:
                    draw(top, paired, lambda r, c=run["cublas"]: c[r["shape"]] / r["time_ms"],
                         f"{fmt}, {weight.replace('x', '×')} weight, {name}",
                         weight_colours.get(weight, "tab:gray"), style_of[commit])
                if weight == args.weight:
                    draw(bottom, best_per_m(on_weight), lambda r: r["weight_bytes"] / (r["time_ms"] * 1e6),
                         f"{fmt}, {name}", FORMAT_COLOURS.get(fmt, "tab:gray"), style_of[commit])
    if not top.lines:
        sys.exit("plot_weight_only_vs_m: no run holds both quantized rows and cuBLAS bf16 rows of a shape")
    top.axhline(1.0, color="black", linewidth=0.8, label="1×: level with cuBLAS bf16")
    top.plot([16, 64], [TARGET_BATCH] * 2, color="tab:red", linewidth=2.5, alpha=0.6,
             label=f"target: ≥ {TARGET_BATCH:.0f}× at M = 16–64 (not a measurement)")
    top.plot([1], [EXPECTED_M1], marker="*", markersize=13, color="white", markeredgecolor="tab:red",
             linestyle="none", label=f"expected ~{EXPECTED_M1:.0f}× at M = 1 (a target, not a measurement)")
    top.set_ylim(0, 5.6)
    top.set_ylabel("speed-up over cuBLAS bf16\n(same M×N×K, same kc-bench run)")
    top.set_title("Speed-up over cuBLAS bf16, where the run timed cuBLAS on the shape "
                  "(the fastest rung at each M in the legend)", fontsize=9, loc="left")
    copies = sorted({run["copy_gbps"] for _, run in ordered})
    bottom.axhspan(copies[0] - 8, copies[-1] + 8, color="black", alpha=0.25,
                   label=f"copy bandwidth of the runs, {copies[0]:.0f}–{copies[-1]:.0f} GB/s (cudaMemcpy D2D)")
    bottom.set_ylim(0, copies[-1] * 1.1)
    bottom.set_ylabel("GB/s on the weight's bytes")
    small = [g for _, run in ordered for g in run["copies"]]
    bottom.set_title(f"{args.weight.replace('x', '×')} weight, every format (the fastest rung at each M in the "
                     f"legend); a cudaMemcpy of the op's bytes on\nthis weight reached "
                     f"{min(small):.0f}–{max(small):.0f} GB/s in these runs (their 'copy of the same bytes' rows)",
                     fontsize=9, loc="left")
    for axes in (top, bottom):
        axes.set_xscale("log", base=2)
        axes.set_xticks(sorted(all_m))
        axes.set_xticklabels([str(m) for m in sorted(all_m)])
        axes.set_xlabel("M (rows of x)")
        axes.grid(axis="y", linewidth=0.4, alpha=0.5)
        axes.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    gpu, driver, cuda, cublas = machines.pop()

    def contents(run):
        formats = ", ".join(dict.fromkeys(weight_format(r) for r in run["quant"]))
        return formats + (" + cuBLAS bf16" if run["cublas"] else "")

    figure.suptitle(f"Weight-only quantized GEMV/GEMM against M, {gpu}, driver {driver}, CUDA runtime {cuda}, "
                    f"cuBLAS {cublas}; kc-bench runs (commit, date, contents):\n"
                    + ";\n".join(f"{key[0][:7]} {key[1]} ({contents(run)})" for key, run in ordered),
                    fontsize=8.5)
    figure.tight_layout()
    figure.savefig(args.output, dpi=150, bbox_inches="tight")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Plot the stage-1 SGEMM ladder from the JSON that kc-bench writes.

Left: TFLOPS of every rung at 4096^3, with cuBLAS as a line. Right: TFLOPS against the square size
(256 ... 8192) for every rung and for cuBLAS. Only rows that passed the check and were timed
(status "ok") with alpha = 1, beta = 0 are plotted.

    kc-bench --filter stage1/sgemm --markdown auto      # writes docs/benchmarks/<gpu>/stage1.json
    python3 scripts/plot_stage1.py docs/benchmarks/h200/stage1.png \
        --json docs/benchmarks/h200/stage1.json
"""
import argparse
import json
import sys


def square_size(shape):
    """4096 for "4096x4096x4096", None for any other shape."""
    parts = shape.split("x")
    if len(parts) == 3 and parts[0] == parts[1] == parts[2] and parts[0].isdigit():
        return int(parts[0])
    return None


def load_rows(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as error:
        sys.exit(f"plot_stage1: cannot read {path}: {error.strerror}; run kc-bench with --markdown first")
    except json.JSONDecodeError as error:
        sys.exit(f"plot_stage1: {path} is not valid JSON ({error})")
    rows = [
        r
        for r in data.get("results", [])
        if r.get("status") == "ok"
        and r.get("tflops") is not None
        and r.get("params", {}).get("alpha", 1.0) == 1.0
        and r.get("params", {}).get("beta", 0.0) == 0.0
        and (r.get("is_baseline") or r.get("kernel", "").startswith("stage1/sgemm/"))
    ]
    if not rows:
        sys.exit(f"plot_stage1: {path} has no timed stage-1 SGEMM results (status ok)")
    return data, rows


def series(rows):
    """{label: {"rung": n, "points": {size: tflops}}}; cuBLAS under the label "cuBLAS"."""
    out = {}
    for r in rows:
        size = square_size(r["shape"])
        if size is None:
            continue
        if r.get("is_baseline"):
            label, rung = "cuBLAS", 1000
        else:
            label, rung = r["kernel"].split("/")[-1], r.get("rung", 0)
        entry = out.setdefault(label, {"rung": rung, "points": {}})
        entry["points"][size] = r["tflops"]
    return dict(sorted(out.items(), key=lambda item: item[1]["rung"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="PNG file to write")
    parser.add_argument("--json", default="docs/benchmarks/h200/stage1.json", help="kc-bench JSON (default: %(default)s)")
    parser.add_argument("--size", type=int, default=4096, help="square size of the bar chart (default: %(default)s)")
    args = parser.parse_args()

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_stage1: needs matplotlib (pip install matplotlib)")

    data, rows = load_rows(args.json)
    lines = series(rows)
    rungs = {label: s for label, s in lines.items() if label != "cuBLAS"}
    cublas = lines.get("cuBLAS", {"points": {}})["points"]

    fig, (bars, curves) = plt.subplots(1, 2, figsize=(15, 6))
    labels = list(rungs)
    values = [rungs[label]["points"].get(args.size, 0.0) for label in labels]
    drawn = bars.bar(range(len(labels)), values, color="tab:blue")
    for rect, value in zip(drawn, values):
        text = f"{value:.1f}" if value > 0 else "not timed"
        bars.annotate(text, (rect.get_x() + rect.get_width() / 2, rect.get_height()), ha="center", va="bottom", fontsize=8)
    if args.size in cublas:
        bars.axhline(cublas[args.size], color="tab:red", linestyle="--", label=f"cuBLAS {cublas[args.size]:.1f}")
        bars.legend(loc="upper left")
    bars.set_xticks(range(len(labels)))
    bars.set_xticklabels(labels, rotation=40, ha="right", fontsize=8)
    bars.set_ylabel("TFLOPS")
    bars.set_title(f"SGEMM ladder at {args.size}\u00b3")

    # tab20 rather than the default 10-colour cycle: the ladder has more than ten rungs.
    palette = matplotlib.colormaps["tab20"].colors
    for index, (label, s) in enumerate(lines.items()):
        points = sorted(s["points"].items())
        if not points:
            continue
        style = ({"color": "black", "linestyle": "--", "linewidth": 2} if label == "cuBLAS"
                 else {"marker": "o", "markersize": 3, "color": palette[(2 * index) % 20 + (index // 10) % 2]})
        curves.plot([p[0] for p in points], [p[1] for p in points], label=label, **style)
    curves.set_xscale("log", base=2)
    sizes = sorted({size for s in lines.values() for size in s["points"]})
    curves.set_xticks(sizes)
    curves.set_xticklabels([str(size) for size in sizes])
    curves.set_xlabel("M = N = K")
    curves.set_ylabel("TFLOPS")
    curves.set_title("TFLOPS by size")
    curves.grid(True, which="major", alpha=0.3)
    curves.legend(fontsize=7, loc="upper left")

    fig.suptitle(f"{data.get('gpu', '?')}, {data.get('date', '')}, commit {data.get('commit', '?')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(args.output, dpi=150)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

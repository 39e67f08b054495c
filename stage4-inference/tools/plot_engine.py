#!/usr/bin/env python3
"""Plot kc-engine-bench's JSON: batch-1 decode against the bandwidth bound, and throughput
against concurrency.

    python3 stage4-inference/tools/plot_engine.py docs/benchmarks/h200/stage4.json \\
        --output docs/benchmarks/h200/stage4.png

Left: decode tok/s at batch 1 against the context, one colour per model, solid for kc and dashed
for the bound the copy bandwidth measured in the same run sets (every weight and the K/V rows
read once a token: copy GB/s over bytes a token). Right: output tok/s against the number of
requests at once. Each model is drawn in the fastest mode the file holds (CUDA graphs and fused
norms over eager), named in the legend; peers the JSON rows carry ("peers") are drawn as markers.
"""
import argparse
import json
import sys


def mode_of(model):
    parts = ["CUDA graphs" if model.get("cuda_graphs") else "eager",
             "fused kernels" if model.get("fuse_kernels") else "unfused kernels"]
    if "decode_min_split_keys" in model:
        parts.append(f"splits >= {model['decode_min_split_keys']} keys")
    return ", ".join(parts)


def best_runs(report):
    """For each model name, the run with the highest batch-1 decode rate at its first context."""
    best = {}
    for model in report["models"]:
        rate = model["decode"][0]["tok_s"] if model.get("decode") else 0.0
        if model["name"] not in best or rate > best[model["name"]][0]:
            best[model["name"]] = (rate, model)
    return [entry[1] for entry in best.values()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    with open(args.report, encoding="utf-8") as f:
        report = json.load(f)
    if report.get("tool") != "kc-engine-bench" or not report.get("models"):
        sys.exit(f"plot_engine: {args.report} is not kc-engine-bench's JSON")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = best_runs(report)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    copy = report["copy_gbps"] * 1e9
    markers = ["s", "^", "D", "v"]
    for i, model in enumerate(runs):
        colour = colours[i % len(colours)]
        label = f"{model['name']} ({mode_of(model)})"
        decode = model.get("decode", [])
        if decode:
            contexts = [d["context"] for d in decode]
            left.plot(contexts, [d["tok_s"] for d in decode], "o-", color=colour, label=label)
            left.plot(contexts, [copy / d["bytes_per_token"] for d in decode], "--", color=colour, alpha=0.6)
        concurrency = model.get("concurrency", [])
        if concurrency:
            right.plot([c["requests"] for c in concurrency], [c["tok_s"] for c in concurrency], "o-", color=colour,
                       label=label)
        for rows, axis, size_key in ((decode, left, "context"), (concurrency, right, "requests")):
            peer_names = sorted({name for row in rows for name in row.get("peers", {})})
            for j, name in enumerate(peer_names):
                points = [(row[size_key], row["peers"][name]) for row in rows if name in row.get("peers", {})]
                axis.plot([p[0] for p in points], [p[1] for p in points], markers[j % len(markers)], color=colour,
                          mfc="none", label=f"{model['name']}: {name}")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("context (tokens in the cache)")
    left.set_ylabel("decode tok/s, batch 1")
    left.set_title("batch-1 decode (dashed: copy-bandwidth bound)")
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("requests at once")
    right.set_ylabel("output tok/s")
    right.set_title("throughput against concurrency")
    for axis in (left, right):
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    fig.suptitle(f"kc-engine-bench, {report['gpu'].split(' (')[0]}, {report['date']}, commit {report['commit']}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

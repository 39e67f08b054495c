#!/usr/bin/env python3
"""Plot kc-serve's load sweeps: output tokens/s and p99 latencies against the number of clients.

    python3 stage4-inference/scripts/serve_load_test.py --spawn build/gpu-check/stage4-inference/server/kc-serve \\
        --synthetic llama-3.2-1b --tokenizer stage4-inference/tests/data/tokenizer/smollm2.tokenizer.json -- \\
        --clients 1,4,16,64,256 --duration 20 --max-tokens 128 --processes 4 --out sweep-1b.json
    python3 stage4-inference/tools/plot_serve.py sweep-1b.json [sweep-smollm2.json ...] \\
        --label "Llama-3.2-1B shape" [--label ...] --output serve.png

Each file is serve_load_test.py's output for a list of client counts ({"phases": [...]}). Left:
output tokens/s over each phase against the clients streaming at once. Right: time to first
token p99 (solid) and time between tokens p99 (dashed), in ms. One colour per file; its label is
--label in file order, else the server's --model/--synthetic argument.
"""
import argparse
import json
import sys


def default_label(report):
    words = report.get("server", "").split()
    for flag in ("--synthetic", "--model"):
        if flag in words and words.index(flag) + 1 < len(words):
            return words[words.index(flag) + 1].rsplit("/", 1)[-1]
    return "kc-serve"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--label", action="append", default=[])
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    reports = []
    for path in args.reports:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        if report.get("tool") != "serve_load_test" or not report.get("phases"):
            sys.exit(f"plot_serve: {path} is not serve_load_test.py's output for a list of client counts")
        reports.append(report)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    for i, report in enumerate(reports):
        colour = colours[i % len(colours)]
        label = args.label[i] if i < len(args.label) else default_label(report)
        phases = sorted(report["phases"], key=lambda phase: phase["clients"])
        clients = [phase["clients"] for phase in phases]
        left.plot(clients, [phase["tokens_per_s"] for phase in phases], "o-", color=colour, label=label)
        right.plot(clients, [phase["ttft_p99_ms"] for phase in phases], "o-", color=colour,
                   label=f"{label}: first token p99")
        right.plot(clients, [phase["inter_token_p99_ms"] for phase in phases], "s--", color=colour,
                   label=f"{label}: between tokens p99")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("clients streaming at once")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    left.set_ylabel("output tokens/s")
    left.set_title("throughput against concurrency")
    right.set_ylabel("ms")
    right.set_title("p99 latencies against concurrency")
    first = reports[0]
    fig.suptitle(f"kc-serve load sweep, {first.get('gpu') or 'no GPU named'}, {first.get('date', '')}, "
                 f"commit {first.get('commit') or '?'}", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

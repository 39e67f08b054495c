#!/usr/bin/env python3
"""Plot the FlashAttention ladder from the JSON kc-bench writes.

    python3 stage3-hpc/tools/plot_attention_ladder.py docs/benchmarks/h200/stage3-attention.json \
        --output docs/benchmarks/h200/stage3-attention.png

TFLOPS against the sequence length (Sq = Sk) on the op's bench shapes with B x S = 16k tokens, one
panel per head dimension and mask: the tensor-core rungs (04-08 by default, --rungs to change it),
the PyTorch SDPA peers (FlashAttention-2 and cuDNN backends, timed by bench/peers/torch_peers.py on
the same machine and merged into the table) and the baseline, cuDNN's SDPA in its own run. TFLOPS,
not % of baseline, so that the peers and the baseline sit on the same axis as the rungs; the
table's % compares each rung with the baseline timed alongside it. Only rows kc-bench checked and
timed ("status": "ok") are drawn; shapes with fewer kv heads than query heads (grouped-query) are
in the table, not here.
"""
import argparse
import sys

from bench_report import read_report, save_figure

OP = "attention_fwd"
PEER_STYLES = {  # peer row name -> (label, colour, line style)
    "torch SDPA flash (FA2)": ("PyTorch SDPA, FlashAttention-2 backend", "tab:gray", ":"),
    "torch SDPA cuDNN": ("PyTorch SDPA, cuDNN backend", "tab:brown", ":"),
}


def load(path):
    report = read_report(path, "plot_attention_ladder")
    rows = [r for r in report["results"] if r.get("status") == "ok" and r.get("op") == OP and r.get("tflops")]
    return report, rows


def dims(shape):
    """B, Hq, Hkv, Sq, Sk, D of a shape key such as 4x16x16x4096x4096x128."""
    return [int(v) for v in shape.split("x")]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="stage3-attention.json written by kc-bench --markdown")
    parser.add_argument("--output", required=True, help="image to write (.svg or .png)")
    parser.add_argument("--rungs", default="4,5,6,7,8", help="kc rungs to draw (default 4,5,6,7,8)")
    args = parser.parse_args(argv)
    rungs = [int(r) for r in args.rungs.split(",")]

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report, rows = load(args.report)
    rows = [r for r in rows if dims(r["shape"])[1] == dims(r["shape"])[2] and dims(r["shape"])[3] == dims(r["shape"])[4]]
    tokens = {dims(r["shape"])[0] * dims(r["shape"])[3] for r in rows}
    x_label = "sequence length Sq = Sk" + (f" (B x S = {tokens.pop() // 1024}k)" if len(tokens) == 1 else "")
    if not rows:
        sys.exit(f"{args.report}: no timed rows of {OP} with Sq = Sk and as many kv heads as query heads")

    def series_of(row):
        """(order, label, colour, line style) of the line a row belongs to, or None."""
        if row.get("is_baseline"):
            return (0, "cuDNN SDPA, kc's baseline (own run)", "black", "-")
        if row.get("is_peer"):
            style = PEER_STYLES.get(row["kernel"])
            return (1 + list(PEER_STYLES).index(row["kernel"]),) + style if style else None
        if row.get("rung") in rungs:
            colour = plt.rcParams["axes.prop_cycle"].by_key()["color"][rungs.index(row["rung"])]
            return (10 + row["rung"], f"kc {row['kernel'].split('/')[-1]}", colour, "-")
        return None

    head_dims = sorted({dims(r["shape"])[5] for r in rows}, reverse=True)
    masks = sorted({int(r["params"].get("causal", 0)) for r in rows})
    figure, all_axes = plt.subplots(len(head_dims), len(masks), squeeze=False, sharex=True, sharey=True,
                                    figsize=(4.2 * len(masks) + 3.4, 3.6 * len(head_dims)))
    panels = [(i, j, head_dim, causal) for i, head_dim in enumerate(head_dims) for j, causal in enumerate(masks)]
    for i, j, head_dim, causal in panels:
        axes = all_axes[i][j]
        lines = {}
        for row in rows:
            _, _, _, length, _, d = dims(row["shape"])
            series = series_of(row)
            if d != head_dim or int(row["params"].get("causal", 0)) != causal or series is None:
                continue
            lines.setdefault(series, []).append((length, row["tflops"]))
        for (_, label, colour, style), points in sorted(lines.items()):
            points.sort()
            axes.plot([p[0] for p in points], [p[1] for p in points], style, marker="o", markersize=4,
                      color=colour, label=label, linewidth=1.6 if style == "-" else 1.3)
        sequence_lengths = sorted({p[0] for points in lines.values() for p in points})
        axes.set_xscale("log", base=2)
        axes.set_xticks(sequence_lengths)
        axes.set_xticklabels([f"{s // 1024}k" for s in sequence_lengths])
        if i == len(head_dims) - 1:
            axes.set_xlabel(x_label)
        if j == 0:
            axes.set_ylabel("TFLOPS")
        axes.set_title(f"D = {head_dim}, {'causal' if causal else 'no mask'}", fontsize=9, loc="left")
        axes.grid(axis="y", linewidth=0.4, alpha=0.5)
        axes.set_ylim(bottom=0)
    handles, labels = all_axes[0][0].get_legend_handles_labels()
    all_axes[0][-1].legend(handles, labels, fontsize="small", loc="upper left", bbox_to_anchor=(1.03, 1.0))
    dtypes = "/".join(sorted({r["dtype"] for r in rows}))
    save_figure(figure, report, f"FlashAttention ladder ({OP}, {dtypes})",
                "kc rungs, the PyTorch SDPA peers and the cuDNN baseline (own run)", args.output)


if __name__ == "__main__":
    main(sys.argv[1:])

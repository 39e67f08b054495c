#!/usr/bin/env python3
"""The tuner of kc::stage3::Gemm's small-M table: which kernel the public GEMM entry runs for
1 < M <= 64 on an sm_90 GPU (stage3-hpc/gemm/small_m_dispatch_h200.json, read by CMake into
src/gemm.cpp's table; stage3-hpc/README.md, "How the entry picks a kernel for small M").

A tuning run is kc-bench timing the candidate rungs in alternation with cuBLAS on the tuning shapes
(every weight below at M = 2, 4, 8, 16, 32, 64: 120 shapes), a few times over on one GPU; this script reads those
runs and writes the table:

    SHAPES=$(scripts/tune_small_m_dispatch.py --print-shapes)
    for r in 1 2 3 4 5; do
      build/ci/bench/kc-bench --filter "$(scripts/tune_small_m_dispatch.py --print-filter)" \\
          --shapes "$SHAPES" --markdown /tmp/tune/$r
    done
    scripts/tune_small_m_dispatch.py /tmp/tune/*/stage3-gemm.json \\
        --out stage3-hpc/gemm/small_m_dispatch_h200.json

The rule, shape by shape: each kernel's % of cuBLAS is the median over a session's runs of kc-bench's
own figure (cuBLAS's median timed alongside divided by the kernel's), and its figure for the table is
the lowest of its sessions' medians; the entry takes the candidate with the highest figure when it is
at least --margin points above 100 (faster than cuBLAS by more than the run-to-run spread of a
few-microsecond shape, in every session), and cuBLAS otherwise. A session is the runs of one commit
(one tuning call on one machine): the ratio of a rung to cuBLAS on one shape moves more between
machines than between the runs of one (the stage-3 README has the measured spread), so a kernel is
taken only where it won on each machine it was tuned on. Kernels that ran but are
not candidates (rung 14: it needs a workspace with counters that one launch at a time may use) are
kept in the table's figures, so what leaving them out costs stays visible. A shape a candidate
refused (rung 12 above M = 8) or failed is not its to win; a run in which a candidate failed its
check anywhere is refused whole.

Exit status: 0, or 2 on a run that cannot be read, lacks a tuning shape, or disagrees on the GPU.
"""

import argparse
import json
import statistics
import sys

# The weights (N x K of an nn.Linear, C = A.B^T) of the decode projections the table is tuned on:
# per model [Q | K | V], O, [gate | up], down; then the models' output projections.
TUNING_WEIGHTS = [
    ("Llama-3-8B", [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]),
    ("Llama-3-70B", [(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)]),
    ("Llama-3.2-1B", [(3072, 2048), (2048, 2048), (16384, 2048), (2048, 8192)]),
    ("SmolLM2-135M", [(960, 576), (576, 576), (3072, 576), (576, 1536)]),
    # The output projections (lm_head): Llama 3's 128256-token vocabulary at the 1B's, 8B's and 70B's
    # widths, SmolLM2's 49152 at 576.
    ("lm_head", [(128256, 2048), (128256, 4096), (128256, 8192), (49152, 576)]),
]
TUNING_MS = [2, 4, 8, 16, 32, 64]

# The kernels the entry may take from the table (their GemmKernel in kc/stage3/gemm.hpp), and cuBLAS.
CANDIDATES = ["stage3/hgemm/12_small_m_gemv", "stage3/hgemm/16_small_m_cluster_split"]
ALSO_MEASURED = ["stage3/hgemm/14_small_m_weights_as_a"]
CUBLAS = "cuBLAS GemmEx"
BASELINE_PREFIX = "cuBLAS GemmEx (bf16, FP32 accumulation"


def tuning_shapes():
    return [(m, n, k) for _, weights in TUNING_WEIGHTS for (n, k) in weights for m in TUNING_MS]


def shape_text(shape):
    return "x".join(str(x) for x in shape)


def kernel_filter():
    ids = [kernel.split("/")[-1] for kernel in CANDIDATES + ALSO_MEASURED]
    return "stage3/hgemm/(" + "|".join(ids) + ")$"


def load_run(path):
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise ValueError(f"{path}: no \"results\" list: not a kc-bench --markdown JSON file")
    pcts = {}
    baselines = set()
    for row in data["results"]:
        kernel = row.get("kernel", "")
        if row.get("is_baseline"):
            baselines.add(kernel)
            continue
        if kernel not in CANDIDATES + ALSO_MEASURED:
            continue
        if row.get("status") in ("FAILED", "harness error") or row.get("correct") is False:
            raise ValueError(f"{path}: {kernel} at {row.get('shape')}: {row.get('status')} "
                             f"({row.get('detail', '')}): a run with a wrong kernel cannot tune anything")
        pct = row.get("pct_of_baseline")
        if row.get("status") == "ok" and isinstance(pct, (int, float)) and pct > 0:
            pcts[(row.get("shape"), kernel)] = float(pct)
    if not any(b.startswith(BASELINE_PREFIX) for b in baselines):
        raise ValueError(f"{path}: the baseline is not cuBLAS GemmEx with FP32 accumulation ({sorted(baselines)})")
    return data, pcts


def choose(pcts_by_kernel, margin):
    """The table's kernel for one shape: the fastest candidate if at least `margin` points past 100."""
    best, best_pct = CUBLAS, 100.0 + margin
    for kernel in CANDIDATES:
        pct = pcts_by_kernel.get(kernel)
        if pct is not None and pct >= best_pct:
            best, best_pct = kernel, pct
    return best


def build_table(paths, margin):
    runs = [load_run(path) for path in paths]
    first = runs[0][0]
    for data, _ in runs[1:]:
        for key in ("gpu", "driver", "cuda_runtime", "cublas"):
            if data.get(key) != first.get(key):
                raise ValueError(f"the runs disagree on {key}: {first.get(key)!r} and {data.get(key)!r}")
    sessions = sorted({data.get("commit") for data, _ in runs})
    entries = []
    for shape in tuning_shapes():
        text = shape_text(shape)
        worst, by_session = {}, {}
        for kernel in CANDIDATES + ALSO_MEASURED:
            session_medians = {}
            for session in sessions:
                values = [pcts[(text, kernel)] for data, pcts in runs
                          if data.get("commit") == session and (text, kernel) in pcts]
                if values:
                    session_medians[session] = round(statistics.median(values), 1)
            if session_medians:
                worst[kernel] = min(session_medians.values())
                by_session[kernel] = session_medians
        if not worst:
            raise ValueError(f"no run timed any kernel at {text}: run kc-bench on every tuning shape "
                             "(--print-shapes)")
        entry = {"m": shape[0], "n": shape[1], "k": shape[2], "kernel": choose(worst, margin),
                 "pct_of_cublas": worst}
        if len(sessions) > 1:
            entry["pct_of_cublas_by_session"] = by_session
        entries.append(entry)
    return {
        "what": "kc::stage3::Gemm's small-M table: for 1 < M <= 64 on an sm_90 GPU with sm_90a code, the "
                "kernel the entry runs at each tuning shape; other shapes take the entry at the same M "
                "bucket (the smallest tuned M at or above theirs) with the nearest weight (the least "
                "|log2 N ratio| + |log2 K ratio|)",
        "tool": "scripts/tune_small_m_dispatch.py",
        "rule": f"per kernel, the lowest over the sessions (the runs of one commit) of its median % of cuBLAS; "
                f"the candidate with the highest, if at least {margin} points above 100; cuBLAS GemmEx otherwise",
        "margin_points": margin,
        "candidates": CANDIDATES,
        "also_measured": ALSO_MEASURED,
        "runs": len(runs),
        "sessions": {session: sum(1 for data, _ in runs if data.get("commit") == session) for session in sessions},
        "gpu": first.get("gpu"),
        "driver": first.get("driver"),
        "cuda_runtime": first.get("cuda_runtime"),
        "cublas": first.get("cublas"),
        "dates": sorted({data.get("date") for data, _ in runs}),
        "commits": sessions,
        "command": first.get("command"),
        "entries": entries,
    }


def summary(table):
    lines = []
    counts = {}
    for entry in table["entries"]:
        counts[entry["kernel"]] = counts.get(entry["kernel"], 0) + 1
    lines.append(f"{len(table['entries'])} shapes, {table['runs']} runs on {table['gpu']} at {', '.join(table['commits'])}: " +
                 ", ".join(f"{kernel} {count}" for kernel, count in sorted(counts.items())))
    for entry in table["entries"]:
        figures = "  ".join(f"{kernel.split('/')[-1][:2]} {pct:6.1f}" for kernel, pct in entry["pct_of_cublas"].items())
        lines.append(f"{entry['m']:>3}x{entry['n']}x{entry['k']:<6} {entry['kernel']:<40} {figures}")
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="*", help="kc-bench --markdown JSON files of the tuning shapes")
    parser.add_argument("--out", help="write the table here (JSON); without it, print a summary only")
    parser.add_argument("--margin", type=float, default=1.0,
                        help="points above 100%% of cuBLAS a candidate needs to be taken (default 1)")
    parser.add_argument("--print-shapes", action="store_true", help="print the tuning shapes for kc-bench --shapes")
    parser.add_argument("--print-filter", action="store_true", help="print the kc-bench --filter of the tuning run")
    args = parser.parse_args(argv)
    if args.print_shapes:
        print(",".join(shape_text(shape) for shape in tuning_shapes()))
        return 0
    if args.print_filter:
        print(kernel_filter())
        return 0
    if not args.runs:
        parser.error("give the kc-bench JSON files of the tuning runs")
    if args.margin < 0:
        parser.error("--margin must be >= 0")
    try:
        table = build_table(args.runs, args.margin)
    except (OSError, ValueError) as error:
        print(f"tune_small_m_dispatch.py: {error}", file=sys.stderr)
        return 2
    print(summary(table))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(table, handle, indent=1)
            handle.write("\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""GPU test of kc-trace (bench/trace/): bench/trace/kc-trace-probe replays a graph of three
kernels of known length under the injection library, and scripts/trace_summary.py must find every
replay and every node with the durations the probe spins — node 0 20 us, node 2 10 us, node 1
(a programmatic dependent on compute capability 9.0+) starting about 20 us before node 0 ends and
advancing the replay by about 5 us. Without the library the same run must leave no trace (the
records come from the injection, nothing else). Exits 77 (ctest: skipped) without a GPU, unless
KC_REQUIRE_GPU=1.

    test_trace_gpu.py LIBKC_TRACE KC_TRACE_PROBE"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import trace_summary  # noqa: E402

REPLAYS = 12
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def main(library, probe):
    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "plain.csv")
        run = subprocess.run([probe, str(REPLAYS)], env={**os.environ, "KC_TRACE_OUT": plain},
                             capture_output=True, text=True)
        if run.returncode == 77:
            print(run.stderr.strip() + "; skipped")
            return 77
        check(run.returncode == 0, f"the probe runs without the library (exit {run.returncode}: {run.stderr.strip()})")
        check(not os.path.exists(plain), "no trace without CUDA_INJECTION64_PATH")

        path = os.path.join(tmp, "trace.csv")
        env = {**os.environ, "KC_TRACE_OUT": path, "CUDA_INJECTION64_PATH": os.path.abspath(library)}
        run = subprocess.run([probe, str(REPLAYS)], env=env, capture_output=True, text=True)
        check(run.returncode == 0, f"the probe runs under the library (exit {run.returncode}: {run.stderr.strip()})")
        check("kc-trace: recording kernels" in run.stderr, "the library says it records")
        programmatic = "programmatic: yes" in run.stdout
        with open(path, newline="") as f:
            activities = trace_summary.read_trace(f)
        graphs = trace_summary.replays_by_graph(activities)
        check(len(graphs) == 1, f"one graph (found {len(graphs)})")
        if len(graphs) != 1:
            return 1
        (graph, replays), = graphs.items()
        check(len(replays) == REPLAYS, f"{REPLAYS} replays (found {len(replays)})")
        s = trace_summary.summarize_graph(graph, replays, skip=2)
        check(s.nodes == 3, f"3 nodes a replay (found {s.nodes})")
        if s.nodes != 3:
            return 1
        names = [trace_summary.short_name(row.name) for row in s.rows]
        check(names == ["spin_then_let_dependents_start", "wait_then_spin", "spin_kernel"], f"the nodes in order: {names}")
        duration = [row.duration_us for row in s.rows]
        after = [row.after_previous_us for row in s.rows]
        advance = [row.advance_us for row in s.rows]
        check(20 <= duration[0] < 26, f"node 0 spins 20 us: {duration[0]:.2f}")
        check(10 <= duration[2] < 16, f"node 2 spins 10 us: {duration[2]:.2f}")
        check(5 <= advance[1] < 11, f"node 1 ends 5 us after node 0: advance {advance[1]:.2f}")
        check(0 <= after[2] < 5, f"node 2 starts after node 1's end: {after[2]:+.2f}")
        if programmatic:
            check(after[1] < -15, f"node 1, a programmatic dependent, starts while node 0 runs: {after[1]:+.2f}")
            check(duration[1] >= 20, f"and its duration includes its wait: {duration[1]:.2f}")
        else:
            check(after[1] >= 0, f"node 1, an ordinary launch, starts after node 0's end: {after[1]:+.2f}")
        check(abs(s.span_us - sum(advance)) < 0.5, f"the advances add up to the span: {sum(advance):.2f} vs {s.span_us:.2f}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

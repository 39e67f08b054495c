#!/usr/bin/env python3
"""Tests of scripts/trace_summary.py on a small kc-trace CSV written here: replays grouped by their
launch's correlation id, the span, the kernels' sum and the idle time inside the span worked out by
hand, a node's start against the previous node's end (negative where they overlap), the nodes
added up by name, two traces side by side (--against), the most replayed graph chosen by default,
names shortened, and exit status 2 on a file that is not a kc-trace CSV or holds no graph."""

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import trace_summary  # noqa: E402

HEADER = ("kind,name,start_ns,end_ns,stream,correlation,graph,graph_node,grid_x,grid_y,grid_z,block_x,block_y,"
          "block_z,registers,static_smem,dynamic_smem,bytes\n")
GEMV = '"void kc::stage3::(anonymous namespace)::gemv<1, true>(kc::Launch, int)"'
ATTN = '"void kc::attention::decode<64>(kc::Params)"'


def kernel(name, start, end, correlation, graph, node, grid=(8, 1, 1)):
    return (f"kernel,{name},{start},{end},7,{correlation},{graph},{node},{grid[0]},{grid[1]},{grid[2]},256,1,1,"
            "40,0,0,0\n")


def replay(t0, correlation, graph=3, gap=0):
    # gemv 0..10 us, attention 8..15 us (starts 2 us before gemv ends), gemv 16+gap .. 26+gap us.
    return [kernel(GEMV, t0, t0 + 10_000, correlation, graph, 100),
            kernel(ATTN, t0 + 8_000, t0 + 15_000, correlation, graph, 101, grid=(4, 8, 1)),
            kernel(GEMV, t0 + 16_000 + gap, t0 + 26_000 + gap, correlation, graph, 102)]


def trace(rows):
    return HEADER + "".join(rows)


def run(text, args):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(text)
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = trace_summary.main([f.name] + args)
    finally:
        os.unlink(f.name)
    return status, out.getvalue(), err.getvalue()


class TraceSummaryTest(unittest.TestCase):
    def setUp(self):
        rows = []
        # Graph 3: four replays 100 us apart, the last with a 2 us longer hole before its last node.
        for i, gap in enumerate([0, 0, 0, 2_000]):
            rows += replay(1_000_000 + 100_000 * i, correlation=50 + i, gap=gap)
        # Graph 9: one replay, and an eager kernel.
        rows += replay(2_000_000, correlation=90, graph=9)
        rows.append(kernel(GEMV, 3_000_000, 3_004_000, 91, 0, 0))
        self.text = trace(rows)

    def test_replays_span_idle_and_overlap(self):
        graphs = trace_summary.replays_by_graph(trace_summary.read_trace(io.StringIO(self.text)))
        self.assertEqual(sorted(graphs), [3, 9])
        self.assertEqual(len(graphs[3]), 4)
        s = trace_summary.summarize_graph(3, graphs[3], skip=0)
        self.assertEqual((s.replays, s.nodes), (4, 3))
        # Spans 26, 26, 26, 28 us: median 26. Busy: 0..15 and 16..26 -> 25 us, idle 1 (3 for the last).
        self.assertAlmostEqual(s.span_us, 26.0)
        self.assertAlmostEqual(s.kernel_sum_us, 27.0)
        self.assertAlmostEqual(s.idle_us, 1.0)
        # From a replay's end (t0 + 26 us) to the next one's start (t0 + 100 us): 74 us.
        self.assertAlmostEqual(s.between_us, 74.0)
        self.assertIsNone(s.rows[0].after_previous_us)
        self.assertAlmostEqual(s.rows[1].after_previous_us, -2.0)  # the attention started 2 us before the gemv ended
        self.assertAlmostEqual(s.rows[2].after_previous_us, 1.0)
        skipped = trace_summary.summarize_graph(3, graphs[3], skip=3)
        self.assertAlmostEqual(skipped.span_us, 28.0)
        self.assertAlmostEqual(skipped.idle_us, 3.0)

    def test_by_name(self):
        graphs = trace_summary.replays_by_graph(trace_summary.read_trace(io.StringIO(self.text)))
        rows = trace_summary.by_name(trace_summary.summarize_graph(3, graphs[3], skip=0).rows)
        self.assertEqual(rows[0], ("gemv<1, true> 8x1x1", 2, 10.0, 20.0, 21.0))
        self.assertEqual(rows[1], ("decode<64> 4x8x1", 1, 7.0, 7.0, 5.0))

    def test_main_defaults_to_the_most_replayed_graph(self):
        status, out, _ = run(self.text, ["--skip", "0"])
        self.assertEqual(status, 0)
        self.assertIn("graph 3: 4 replays of 3 nodes; median span 26.0 us", out)
        self.assertIn("-2.00", out)
        status, out, _ = run(self.text, ["--graph", "9", "--by-name", "--markdown"])
        self.assertEqual(status, 0)
        self.assertIn("graph 9: 1 replays", out)
        self.assertIn("| gemv<1, true> 8x1x1 | 2 | 10.00 | 20.0 | 21.0 |", out)
        status, out, _ = run(self.text, ["--eager"])
        self.assertEqual(status, 0)
        self.assertIn("gemv<1, true>", out)
        self.assertIn("4.00", out)

    def test_against_sets_two_graphs_side_by_side(self):
        # The same graph with the attention 3 us longer and a kernel only the other trace has.
        other = []
        for i in range(4):
            t0 = 1_000_000 + 100_000 * i
            other += [kernel(GEMV, t0, t0 + 10_000, 60 + i, 5, 200),
                      kernel(ATTN, t0 + 8_000, t0 + 18_000, 60 + i, 5, 201, grid=(4, 8, 1)),
                      kernel(GEMV, t0 + 19_000, t0 + 29_000, 60 + i, 5, 202),
                      kernel('"void argmax(int)"', t0 + 29_000, t0 + 30_000, 60 + i, 5, 203, grid=(1, 1, 1))]
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(trace(other))
        try:
            here = trace_summary.graph_summary(trace_summary.read_trace(io.StringIO(self.text)), None, 0)
            there = trace_summary.graph_summary(trace_summary.read_trace_file(f.name), None, 0)
            rows = {name: (a, b, d) for name, _, a, b, d in trace_summary.against(here, there)}
            self.assertEqual(rows["decode<64> 4x8x1"], (5.0, 8.0, -3.0))
            self.assertEqual(rows["argmax 1x1x1"], (0.0, 1.0, -1.0))
            self.assertAlmostEqual(rows["gemv<1, true> 8x1x1"][2], 0.0)
            self.assertEqual(next(iter(rows)), "decode<64> 4x8x1")  # largest difference first
            status, out, _ = run(self.text, ["--skip", "0", "--against", f.name])
        finally:
            os.unlink(f.name)
        self.assertEqual(status, 0)
        self.assertIn("span 26.0 us here, 30.0 us there (-4.0 us, -13.3%)", out)
        status, _, err = run(self.text, ["--against", "/nonexistent.csv"])
        self.assertEqual(status, 2)
        self.assertIn("/nonexistent.csv", err)

    def test_short_name(self):
        self.assertEqual(trace_summary.short_name("void a::(anonymous namespace)::k<1, (x::Y)2>(a::B, int)"),
                         "k<1, (x::Y)2>")
        self.assertEqual(trace_summary.short_name("plain"), "plain")
        self.assertEqual(len(trace_summary.short_name("void f<" + "1, " * 50 + "2>()", width=20)), 20)

    def test_errors(self):
        status, _, err = run("a,b\n1,2\n", [])
        self.assertEqual(status, 2)
        self.assertIn("not a kc-trace CSV", err)
        status, _, err = run(trace([kernel(GEMV, 0, 10, 1, 0, 0)]), [])
        self.assertEqual(status, 2)
        self.assertIn("no kernel ran inside a CUDA graph", err)
        status, _, err = run(self.text, ["--graph", "4"])
        self.assertEqual(status, 2)
        self.assertIn("no graph 4; graphs: 3 (4 replays), 9 (1 replays)", err)
        status, _, err = run(trace([kernel(GEMV, "x", 10, 1, 0, 0)]), [])
        self.assertEqual(status, 2)
        self.assertIn("line 2", err)


if __name__ == "__main__":
    unittest.main()

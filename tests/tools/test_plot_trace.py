#!/usr/bin/env python3
"""Tests of scripts/plot_trace.py's choices (no drawing, so no matplotlib): the replay drawn is the
one of median span after the first two, and lanes are renamed by the first substring that matches
their name and grid."""

import io
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import plot_trace  # noqa: E402
import trace_summary  # noqa: E402

HEADER = ("kind,name,start_ns,end_ns,stream,correlation,graph,graph_node,grid_x,grid_y,grid_z,block_x,block_y,"
          "block_z,registers,static_smem,dynamic_smem,bytes\n")


def row(name, start, end, correlation, node, grid=8):
    return f'kernel,"{name}",{start},{end},7,{correlation},3,{node},{grid},1,1,256,1,1,40,0,0,0\n'


class PlotTraceTest(unittest.TestCase):
    def test_median_replay_after_the_first_two(self):
        lines = [HEADER]
        # Spans 100 (left out), 100 (left out), 30, 10, 20 us: the median of the last three is 20.
        for i, span in enumerate([100, 100, 30, 10, 20]):
            t0 = 1_000_000 * (i + 1)
            lines.append(row("void k(int)", t0, t0 + span * 1000, 40 + i, 1))
        graphs = trace_summary.replays_by_graph(trace_summary.read_trace(io.StringIO("".join(lines))))
        replay = plot_trace.median_replay(graphs[3])
        self.assertEqual(replay[0].correlation, 44)

    def test_lane_names(self):
        a = trace_summary.read_trace(io.StringIO(HEADER + row("void ns::gemv<1, false, true, 1>(Args)", 0, 5, 1, 1, 512)))[0]
        self.assertEqual(plot_trace.lane_of(a, []), "gemv<1, false, true, 1> 512x1x1")
        renames = [("false, false, 1> 512x1x1", "o"), ("false, true, 1> 512x1x1", "down"), ("512x1x1", "other")]
        self.assertEqual(plot_trace.lane_of(a, renames), "down")


if __name__ == "__main__":
    unittest.main()

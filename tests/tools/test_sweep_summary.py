#!/usr/bin/env python3
"""Tests of scripts/sweep_summary.py on a small kc-bench JSON written here: the geometric mean and
extremes of % of baseline, refused shapes kept out of the figures (and named), the baseline's and
peers' rows left out, the best of a set of kernels shape by shape, and exit status 2 on a file that
is not a kc-bench result."""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import sweep_summary  # noqa: E402


def row(kernel, shape, pct, status="ok", baseline=False, peer=False):
    return {"kernel": kernel, "shape": shape, "status": status, "pct_of_baseline": pct,
            "is_baseline": baseline, "is_peer": peer}


RESULTS = {
    "gpu": "a GPU", "commit": "abc1234", "date": "2026-01-01 00:00 UTC", "command": "kc-bench ...",
    "results": [
        row("cuBLAS", "1x8x8", None, baseline=True),
        row("cuBLAS default math", "1x8x8", 101.0, peer=True),
        row("stage3/hgemm/14_a", "1x8x8", 200.0),
        row("stage3/hgemm/14_a", "2x8x8", 50.0),
        row("stage3/hgemm/14_a", "4x8x8", None, status="refused"),
        row("stage3/hgemm/16_b", "1x8x8", 100.0),
        row("stage3/hgemm/16_b", "2x8x8", 90.0),
        row("stage3/hgemm/16_b", "4x8x8", 79.0),
        row("stage3/hgemm/09_c", "1x8x8", 10.0),
    ],
}


def run(args, payload=RESULTS):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        if isinstance(payload, str):
            handle.write(payload)
        else:
            json.dump(payload, handle)
        path = handle.name
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            status = sweep_summary.main([path] + args)
    finally:
        os.unlink(path)
    return status, out.getvalue(), err.getvalue()


class SweepSummary(unittest.TestCase):
    def test_geometric_mean_extremes_and_counts(self):
        status, out, _ = run(["--kernels", "1[46]_"])
        self.assertEqual(status, 0)
        # 14_a: sqrt(2.0 x 0.5) = 1 -> 100%; the refused shape is not a figure but is named
        self.assertIn("stage3/hgemm/14_a: 2 shapes, geometric mean 100.0% of baseline, lowest 50.0% (2x8x8), "
                      "highest 200.0% (1x8x8), 1 at or above 100%, 1 below 80%", out)
        self.assertIn("not timed: 1 shapes (4x8x8 (refused))", out)
        # 16_b: (1.0 x 0.9 x 0.79)^(1/3)
        self.assertIn("stage3/hgemm/16_b: 3 shapes, geometric mean 89.3% of baseline", out)
        self.assertIn("below the floor: 4x8x8", out)
        self.assertNotIn("09_c", out)  # filtered out
        self.assertNotIn("cuBLAS", out)  # baseline and peer rows are never summarized

    def test_best_of_takes_the_fastest_kernel_on_the_shapes_all_of_them_ran(self):
        _, out, _ = run(["--kernels", "1[46]_", "--best-of", "1[46]_"])
        # common shapes 1x8x8 (200 from 14_a) and 2x8x8 (90 from 16_b): sqrt(2.0 x 0.9) = 134.2%
        self.assertIn("best of 2 kernels: 2 shapes, geometric mean 134.2% of baseline", out)
        self.assertIn("fastest at 1 shapes: stage3/hgemm/14_a", out)
        self.assertIn("fastest at 1 shapes: stage3/hgemm/16_b", out)

    def test_the_floor_is_a_parameter(self):
        _, out, _ = run(["--kernels", "16_", "--floor", "95"])
        self.assertIn("2 below 95%", out)

    def test_a_file_that_is_not_a_kc_bench_result_is_refused(self):
        status, _, err = run([], payload={"rows": []})
        self.assertEqual(status, 2)
        self.assertIn("not a kc-bench --markdown JSON file", err)
        status, _, err = run([], payload="{ not json")
        self.assertEqual(status, 2)
        self.assertIn("cannot read", err)


if __name__ == "__main__":
    unittest.main()

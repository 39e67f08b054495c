#!/usr/bin/env python3
"""Tests of scripts/tune_small_m_dispatch.py on kc-bench JSON written here: the median over runs
decides, a candidate needs the margin past 100% of cuBLAS, a non-candidate (rung 14) is kept in the
figures but never chosen, a refused shape is not a candidate's to win, a failed check refuses the
whole run, runs of different GPUs are refused, the runs of each commit are a session in which a
candidate must win, a tuning shape no run timed is an error,
and the table written is what CMake reads (m, n, k, kernel per entry)."""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import tune_small_m_dispatch as tuner  # noqa: E402

R12, R14, R16 = tuner.CANDIDATES[0], tuner.ALSO_MEASURED[0], tuner.CANDIDATES[1]
BASELINE = "cuBLAS GemmEx (bf16, FP32 accumulation and reductions)"


def run_json(pcts, gpu="NVIDIA H200", commit="abc", failed=None):
    """A kc-bench JSON: pcts {kernel: pct or None (refused)} at every tuning shape, overridden per
    shape by pcts[(shape, kernel)]."""
    rows = []
    for shape in tuner.tuning_shapes():
        text = tuner.shape_text(shape)
        rows.append({"kernel": BASELINE, "shape": text, "status": "ok", "is_baseline": True, "pct_of_baseline": None})
        for kernel in (R12, R14, R16):
            pct = pcts.get((text, kernel), pcts.get(kernel))
            status = "ok" if pct is not None else "refused"
            if failed == (text, kernel):
                status, pct = "FAILED", None
            rows.append({"kernel": kernel, "shape": text, "status": status, "pct_of_baseline": pct,
                         "is_baseline": False, "correct": status != "FAILED"})
    return {"gpu": gpu, "driver": "d", "cuda_runtime": "13.0", "cublas": "13.1.0", "commit": commit,
            "date": "2026-01-01 00:00 UTC", "command": "kc-bench ...", "results": rows}


class TunerTest(unittest.TestCase):
    def write(self, payloads):
        self.dir = tempfile.mkdtemp()
        paths = []
        for i, payload in enumerate(payloads):
            path = os.path.join(self.dir, f"run{i}.json")
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(payload, handle)
            paths.append(path)
        return paths

    def tune(self, payloads, *extra):
        paths = self.write(payloads)
        out_path = os.path.join(self.dir, "table.json")
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            status = tuner.main(paths + ["--out", out_path] + list(extra))
        table = None
        if status == 0:
            with open(out_path, encoding="utf-8") as handle:
                table = json.load(handle)
        return status, table, out.getvalue() + err.getvalue()

    def entry(self, table, shape):
        m, n, k = shape
        return next(e for e in table["entries"] if (e["m"], e["n"], e["k"]) == (m, n, k))

    def test_median_and_margin_decide(self):
        shape = tuner.tuning_shapes()[0]
        text = tuner.shape_text(shape)
        # rung 16: 99, 103, 104 -> median 103 (taken); rung 12: 100.5 everywhere (inside the margin).
        runs = [run_json({R12: 100.5, R14: 90.0, R16: 95.0, (text, R16): pct}) for pct in (99.0, 103.0, 104.0)]
        status, table, _ = self.tune(runs)
        self.assertEqual(status, 0)
        self.assertEqual(self.entry(table, shape)["kernel"], R16)
        self.assertEqual(self.entry(table, shape)["pct_of_cublas"][R16], 103.0)
        other = tuner.tuning_shapes()[1]
        self.assertEqual(self.entry(table, other)["kernel"], "cuBLAS GemmEx")  # 100.5 < 101
        status, table, _ = self.tune(runs, "--margin", "0")
        self.assertEqual(self.entry(table, other)["kernel"], R12)

    def test_rung14_is_measured_but_never_chosen(self):
        status, table, _ = self.tune([run_json({R12: 50.0, R14: 150.0, R16: 90.0})])
        self.assertEqual(status, 0)
        for e in table["entries"]:
            self.assertEqual(e["kernel"], "cuBLAS GemmEx")
            self.assertEqual(e["pct_of_cublas"][R14], 150.0)

    def test_refused_shape_is_not_won(self):
        shape = tuner.tuning_shapes()[0]
        status, table, _ = self.tune([run_json({R12: None, R14: 90.0, R16: 99.0})])
        self.assertEqual(status, 0)
        self.assertNotIn(R12, self.entry(table, shape)["pct_of_cublas"])
        self.assertEqual(self.entry(table, shape)["kernel"], "cuBLAS GemmEx")

    def test_failed_check_refuses_the_run(self):
        shape = tuner.shape_text(tuner.tuning_shapes()[3])
        status, _, text = self.tune([run_json({R12: 120.0, R14: 90.0, R16: 99.0}, failed=(shape, R16))])
        self.assertEqual(status, 2)
        self.assertIn("wrong kernel", text)

    def test_runs_must_agree_and_cover_every_shape(self):
        status, _, text = self.tune([run_json({R16: 110.0}), run_json({R16: 110.0}, gpu="another GPU")])
        self.assertEqual(status, 2)
        self.assertIn("disagree on gpu", text)
        partial = run_json({R12: None, R14: None, R16: None})
        status, _, text = self.tune([partial])
        self.assertEqual(status, 2)
        self.assertIn("no run timed any kernel", text)

    def test_every_session_must_win(self):
        # Two sessions (commits): rung 16 wins by 5 points in one, loses by 3 in the other.
        shape = tuner.tuning_shapes()[0]
        text = tuner.shape_text(shape)
        first = [run_json({R12: 50.0, R14: 90.0, R16: 105.0}, commit="abc") for _ in range(3)]
        second = [run_json({R12: 50.0, R14: 90.0, R16: 105.0, (text, R16): 97.0}, commit="def") for _ in range(3)]
        status, table, _ = self.tune(first + second)
        self.assertEqual(status, 0)
        self.assertEqual(table["commits"], ["abc", "def"])
        self.assertEqual(table["sessions"], {"abc": 3, "def": 3})
        entry = self.entry(table, shape)
        self.assertEqual(entry["kernel"], "cuBLAS GemmEx")
        self.assertEqual(entry["pct_of_cublas"][R16], 97.0)
        self.assertEqual(entry["pct_of_cublas_by_session"][R16], {"abc": 105.0, "def": 97.0})
        self.assertEqual(self.entry(table, tuner.tuning_shapes()[1])["kernel"], R16)

    def test_table_has_what_cmake_reads(self):
        status, table, _ = self.tune([run_json({R12: 110.0, R14: 90.0, R16: 105.0})])
        self.assertEqual(status, 0)
        self.assertEqual(len(table["entries"]), len(tuner.tuning_shapes()))
        for e in table["entries"]:
            self.assertEqual(set(e) >= {"m", "n", "k", "kernel"}, True)
            # rung 12 wins where it ran (M <= 8 in kc-bench; here every shape ran it)
            self.assertEqual(e["kernel"], R12)
        for key in ("gpu", "driver", "cuda_runtime", "cublas", "commits", "sessions", "dates", "command", "runs", "rule"):
            self.assertIn(key, table)

    def test_print_shapes_and_filter(self):
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(tuner.main(["--print-shapes"]), 0)
        shapes = out.getvalue().strip().split(",")
        self.assertEqual(len(shapes), len(tuner.TUNING_MS) * sum(len(w) for _, w in tuner.TUNING_WEIGHTS))
        self.assertIn("2x4096x4096", shapes)
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(tuner.main(["--print-filter"]), 0)
        self.assertIn("16_small_m_cluster_split", out.getvalue())


if __name__ == "__main__":
    unittest.main()

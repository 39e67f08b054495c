#!/usr/bin/env python3
"""Tests of stage3-hpc/cmake/SmallMDispatchTable.cmake, the configure-time reader of the GEMM
entry's small-M table (stage3-hpc/gemm/small_m_dispatch_h200.json): the committed JSON becomes one
row per entry in the order given; each malformed table stops the configure with the entry and the
rule it breaks (rung 12 above M = 8, a kernel the entry cannot launch, M outside 2..64, no entries,
no commits). Runs the function in CMake's script mode: argv[1] is the cmake executable."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODULE = os.path.join(ROOT, "stage3-hpc", "cmake", "SmallMDispatchTable.cmake")
TABLE = os.path.join(ROOT, "stage3-hpc", "gemm", "small_m_dispatch_h200.json")
CMAKE = sys.argv.pop(1) if len(sys.argv) > 1 else "cmake"


class SmallMTableCMakeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.driver = os.path.join(self.dir, "driver.cmake")
        with open(self.driver, "w", encoding="utf-8") as handle:
            handle.write("include(${MODULE})\nkc_small_m_dispatch_table(${JSON} ${OUT})\n")
        with open(TABLE, encoding="utf-8") as handle:
            self.table = json.load(handle)

    def configure(self, table):
        path = os.path.join(self.dir, "table.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(table, handle)
        out = os.path.join(self.dir, "rows.inc")
        if os.path.exists(out):
            os.remove(out)
        result = subprocess.run([CMAKE, f"-DPROJECT_SOURCE_DIR={self.dir}", f"-DMODULE={MODULE}", f"-DJSON={path}",
                                 f"-DOUT={out}", "-P", self.driver], capture_output=True, text=True)
        rows = None
        if os.path.exists(out):
            with open(out, encoding="utf-8") as handle:
                rows = [line for line in handle.read().splitlines() if line.startswith("{")]
        return result.returncode, result.stdout + result.stderr, rows

    def entry_at(self, m):
        return next(i for i, e in enumerate(self.table["entries"]) if e["m"] == m)

    def test_the_committed_table_becomes_one_row_per_entry(self):
        status, text, rows = self.configure(self.table)
        self.assertEqual(status, 0, text)
        self.assertEqual(len(rows), len(self.table["entries"]))
        names = {"cuBLAS GemmEx": "cublas_gemm_ex", "stage3/hgemm/12_small_m_gemv": "hgemm_12_small_m_gemv",
                 "stage3/hgemm/16_small_m_cluster_split": "hgemm_16_small_m_cluster_split"}
        for row, entry in zip(rows, self.table["entries"]):
            self.assertEqual(row, f"{{{entry['m']}, {entry['n']}, {entry['k']}, GemmKernel::{names[entry['kernel']]}}},")

    def refused(self, table, *words):
        status, text, rows = self.configure(table)
        self.assertNotEqual(status, 0, "a malformed table was accepted")
        self.assertIsNone(rows, "a malformed table still wrote rows")
        for word in words:
            self.assertIn(word, text)

    def test_rung_12_above_m_8_is_refused(self):
        i = self.entry_at(16)
        self.table["entries"][i]["kernel"] = "stage3/hgemm/12_small_m_gemv"
        self.refused(self.table, f"entry {i}", "rung 12 takes M <= 8")

    def test_a_kernel_the_entry_cannot_launch_is_refused(self):
        self.table["entries"][3]["kernel"] = "stage3/hgemm/14_small_m_weights_as_a"
        self.refused(self.table, "entry 3", "not a kernel the entry can take")

    def test_m_outside_the_small_m_range_is_refused(self):
        for m in (1, 65):
            self.setUp()
            self.table["entries"][0]["m"] = m
            self.refused(self.table, "entry 0", "1 < M <= 64")

    def test_a_table_without_entries_or_commits_is_refused(self):
        self.table["entries"] = []
        self.refused(self.table, "no \"entries\" list")
        self.setUp()
        del self.table["commits"]
        self.refused(self.table, "no \"commits\" list")


if __name__ == "__main__":
    unittest.main()

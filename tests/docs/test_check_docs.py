#!/usr/bin/env python3
"""Tests of the docs check itself, on a small fixture repository (tests/docs/fixtures/repo/: a
kernel list, kc-bench's help text, one committed JSON, two kernel files and two pages): no build,
no GPU.

  NegativeControls  bad.md quotes an unregistered id, a filter that selects nothing, a flag
                    kc-bench does not take, a missing file, a missing table, a missing anchor, a
                    citation naming the wrong commit and three wrong figures; a kernel file's
                    "run just this rung" filter selects nothing: each must fail, naming file,
                    line and what is wrong.
  PositiveControl   clean.md (true ids, paths, links, figures, and the figures the check must
                    leave alone: ranges, estimates, targets, changes, another run) passes.
  Units             shapes, rounding, sentences, which figures are measurements, anchors.

Run: python3 tests/docs/test_check_docs.py [ClassName ...]   (CTest: label docs)
"""

import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE / "fixtures" / "repo"
CHECKER = HERE / "check_docs.py"
sys.path.insert(0, str(HERE))
import check_docs as checker  # noqa: E402


def run_checker(*files):
    """Runs the check on fixture files as CTest runs it on the repository."""
    result = subprocess.run(
        [sys.executable, str(CHECKER), "--root", str(REPO), "--kernel-list", str(REPO / "kernels.txt"),
         "--help-text", str(REPO / "kc-bench-help.txt"), *(str(REPO / f) for f in files)],
        capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


class PositiveControl(unittest.TestCase):
    def test_clean_page_passes(self):
        status, output = run_checker("stage1-sgemm/clean.md", "stage1-sgemm/kernels/01_naive.cu")
        self.assertEqual(status, 0, output)
        self.assertIn("1 Markdown files and 1 kernel sources against 3 registered kernels and 1 "
                      "committed tables: 0 findings", output)


class NegativeControls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.status, cls.output = run_checker("stage1-sgemm/bad.md",
                                             "stage1-sgemm/kernels/02_coalesced.cu")

    def expect(self, text):
        self.assertIn(text, self.output)

    def test_the_check_fails(self):
        self.assertEqual(self.status, 1, self.output)
        self.expect(": 12 findings")

    def test_unregistered_kernel_id(self):
        self.expect("stage1-sgemm/bad.md:3: [ids] kernel id stage1/sgemm/03_smem_tiling is not "
                    "registered")
        self.expect("stage1-sgemm/bad.md:4: [ids] kernel id stage2/rmsnorm_bf16/05_row_in_registers is "
                    "not registered (registered: stage2/rmsnorm/05_row_in_registers)")

    def test_filter_that_selects_nothing(self):
        self.expect("stage1-sgemm/bad.md:5: [ids] kc-bench --filter 'stage2/rmsnorm_bf16/' selects no "
                    "registered kernel")
        self.expect("stage1-sgemm/kernels/02_coalesced.cu:3: [ids] kc-bench --filter "
                    "'stage1/sgemm_f32/02_coalesced' selects no registered kernel "
                    "(did you mean stage1/sgemm/02_coalesced?)")

    def test_flag_kc_bench_does_not_take(self):
        self.expect("stage1-sgemm/bad.md:16: [flags] kc-bench takes no flag --alpha (an op's parameter "
                    "is --param alpha=VALUE, if the op has one)")

    def test_missing_file(self):
        self.expect("stage1-sgemm/bad.md:3: [paths] path kernels/03_smem_tiling.cu does not exist")

    def test_missing_table_and_anchor(self):
        self.expect("stage1-sgemm/bad.md:6: [tables] link target ../docs/benchmarks/h200/stage9.md "
                    "does not exist")
        self.expect("stage1-sgemm/bad.md:7: [tables] link ../docs/benchmarks/h200/stage1.md#hgemm: "
                    "docs/benchmarks/h200/stage1.md has no heading #hgemm")

    def test_citation_naming_another_commit(self):
        self.expect("stage1-sgemm/bad.md:9: [tables] cites docs/benchmarks/h200/stage1.json but names "
                    "4a52019, 2026-11-29; that table is commit ec6eb97, 2026-12-01")

    def test_wrong_figures(self):
        self.expect("stage1-sgemm/bad.md:10: [figures] 45.0% for rung 02 at 4096x4096x4096: the committed "
                    "table docs/benchmarks/h200/stage1.json (commit ec6eb97, 2026-12-01) holds % of "
                    "baseline: stage1/sgemm/02_coalesced f32 11.78")
        self.expect("stage1-sgemm/bad.md:10: [figures] 6.5 TFLOPS for rung 02 at 2048x2048x2048")
        self.expect("stage1-sgemm/bad.md:14: [figures] 15% for rung 02 at 2048x2048x2048")

    def test_true_cells_of_the_bad_table_pass(self):
        self.assertNotIn("bad.md:14: [figures] 6.0", self.output)
        self.assertNotIn("bad.md:14: [figures] 11.8%", self.output)


class Units(unittest.TestCase):
    def setUp(self):
        committed = checker.load_committed(REPO)
        ids = checker.kernel_ids_from_list((REPO / "kernels.txt").read_text())
        self.check = checker.Checker(REPO, ids, committed)
        self.figures = checker.FigureCheck(self.check, REPO / "stage1-sgemm" / "clean.md", [], 1)

    def kinds(self, sentence):
        plain = checker.plain_text(sentence)
        return [(f.number, f.kind) for f in self.figures.figures_in(plain)]

    def test_shapes(self):
        keys = [checker.shape_key(m) for m in checker.SHAPE.finditer(
            "at 4096³, 8192×14336×4096 and 32768 × 4096; not 4096.5 or 1.5")]
        self.assertEqual(keys, ["4096x4096x4096", "8192x14336x4096", "32768x4096"])

    def test_rounding(self):
        self.assertTrue(checker.holds("95.7", 95.68))
        self.assertTrue(checker.holds("96", 95.68))
        self.assertFalse(checker.holds("95.6", 95.68))
        self.assertFalse(checker.holds("95", 95.68))
        self.assertFalse(checker.holds("95", None))

    def test_sentences(self):
        text = "Rung 11 reaches 95.7% at 4096³. Then 98.3% (e.g. at 8192³). `x` ends it."
        self.assertEqual([s for _, s in checker.sentences(text)],
                         ["Rung 11 reaches 95.7% at 4096³.", "Then 98.3% (e.g. at 8192³).",
                          "`x` ends it."])

    def test_measurements_and_the_rest(self):
        self.assertEqual(self.kinds("rung 11: 95.7% of cuBLAS at 4096³, 98.3% at 8192³"),
                         [("95.7", "pct_baseline"), ("98.3", "pct_baseline")])
        self.assertEqual(self.kinds("RMSNorm at 97.6% of copy bandwidth, 4107 GB/s, 0.5 TFLOPS"),
                         [("97.6", "pct_ceiling"), ("4107", "gbps"), ("0.5", "tflops")])
        for sentence in ("87–98% of cuBLAS at 4096³", "about 60 TFLOPS", "≥ 90% at 2048³",
                         "(targets 95%, 95% and 90%: met)", "1.0% faster at 4096³ and 1.7% at 8192³",
                         "84.2% busy", "61% of rung 09", "up to 2% between machines",
                         "below the 90%-of-copy target", "~78% of it"):
            kinds = [k for _, k in self.kinds(sentence)]
            self.assertEqual(kinds, [None] * len(kinds), sentence)

    def test_scope(self):
        self.assertEqual(self.figures.scope("at commit `4a52019`", 1), "other")
        self.assertEqual(self.figures.scope("on 2026-11-29", 1), "other")
        self.assertEqual(self.figures.scope("kc-hgemm-tune measured", 1), "other")
        self.assertEqual(self.figures.scope("commit `ec6eb97`", 1), "committed")
        self.assertEqual(self.figures.scope("[t](../docs/benchmarks/h200/stage1.md)", 1),
                         "committed")
        self.assertEqual(self.figures.scope("rung 02 at 4096³", 1), "plain")
        self.assertEqual(self.figures.scope("44.7% in the committed table", 1), "committed")
        self.assertEqual(self.figures.scope("the committed table; at commit `4a52019` 61.9%", 1),
                         "other")

    def test_anchors(self):
        self.assertEqual(checker.slugify("Residual add + RMSNorm — `kernels/residual_rmsnorm/`"),
                         "residual-add--rmsnorm--kernelsresidual_rmsnorm")
        self.assertEqual(checker.slugify("01 — naive"), "01--naive")

    def test_filters_with_placeholders_are_not_checked(self):
        for pattern in ("REGEX", "^stageN/"):
            self.check.check_filter(REPO / "x.md", 1, pattern)
        self.assertEqual(self.check.findings, [])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *sys.argv[1:]])

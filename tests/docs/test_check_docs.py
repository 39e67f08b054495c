#!/usr/bin/env python3
"""Tests of the docs check itself, on a small fixture repository (tests/docs/fixtures/repo/: a
kernel list, kc-bench's help text, two committed JSONs -- stage 1's SGEMM and a few rows of stage
3's attention, whose shapes have six dimensions and a `causal` parameter --, two kernel files and
four pages): no build, no GPU.

  NegativeControls  bad.md quotes an unregistered id, a filter that selects nothing, a flag
                    kc-bench does not take, a missing file, a missing table, a missing anchor, a
                    citation naming the wrong commit and three wrong figures; a kernel file's
                    "run just this rung" filter selects nothing: each must fail, naming file,
                    line and what is wrong. attention_bad.md quotes wrong figures at a
                    six-dimension shape: one the table does not hold, causal and non-causal
                    figures swapped (in prose and in a table column), a shape the table lacks.
  PositiveControl   clean.md (true ids, paths, links, figures, and the figures the check must
                    leave alone: ranges, estimates, targets, changes, another run) passes, and so
                    does attention_clean.md (true figures at six-dimension shapes, with and
                    without the mask, and the figures that belong to no shape or to a kernel
                    compared with).
  Units             shapes (2 to 6 dimensions) and their parameters, rounding, sentences, which
                    figures are measurements, anchors.

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
        self.assertIn("1 Markdown files and 1 kernel sources against 3 registered kernels and 2 "
                      "committed tables: 0 findings", output)

    def test_clean_attention_page_passes(self):
        status, output = run_checker("stage3-hpc/attention_clean.md")
        self.assertEqual(status, 0, output)
        self.assertIn(": 0 findings", output)


class NegativeControls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.status, cls.output = run_checker("stage1-sgemm/bad.md",
                                             "stage1-sgemm/kernels/02_coalesced.cu")
        cls.attention_status, cls.attention_output = run_checker("stage3-hpc/attention_bad.md")

    def expect(self, text):
        self.assertIn(text, self.output)

    def expect_attention(self, text):
        self.assertIn(text, self.attention_output)

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

    # Figures at attention's six-dimension shapes (B×Hq×Hkv×Sq×Sk×D), with and without the mask.
    ATTENTION = "stage3-hpc/attention_bad.md"
    TABLE = ("the committed table docs/benchmarks/h200/stage3-attention.json (commit 681647a, "
             "2026-12-02)")
    ROW = "stage3/attention_fwd/07_fa3_overlap bf16"

    def test_the_check_fails_on_the_attention_page(self):
        self.assertEqual(self.attention_status, 1, self.attention_output)
        self.expect_attention(": 5 findings")

    def test_six_dimension_shape_that_does_not_match(self):
        self.expect_attention(f"{self.ATTENTION}:4: [figures] 86.0% for rung 07 of attention_fwd at "
                              f"4x16x16x4096x4096x128: {self.TABLE} holds % of baseline: "
                              f"{self.ROW} 84.32; {self.ROW} 85.2")

    def test_causal_figure_held_to_the_causal_row(self):
        self.expect_attention(f"{self.ATTENTION}:5: [figures] 84.3% for rung 07 of attention_fwd at "
                              f"4x16x16x4096x4096x128 causal=1: {self.TABLE} holds % of baseline: "
                              f"{self.ROW} 85.2")
        self.expect_attention(f"{self.ATTENTION}:5: [figures] 85.2% for rung 07 of attention_fwd at "
                              f"4x16x16x4096x4096x128 causal=0: {self.TABLE} holds % of baseline: "
                              f"{self.ROW} 84.32")

    def test_causal_column_of_a_table(self):
        self.expect_attention(f"{self.ATTENTION}:13: [figures] 522.2 for rung 07 of attention_fwd at "
                              f"4x16x16x4096x4096x128 causal=1: {self.TABLE} holds TFLOPS: "
                              f"{self.ROW} 469.523")
        self.assertNotIn(f"{self.ATTENTION}:13: [figures] 84%", self.attention_output)
        self.assertNotIn(f"{self.ATTENTION}:13: [figures] 85%", self.attention_output)

    def test_six_dimension_shape_the_table_lacks(self):
        self.expect_attention(f"{self.ATTENTION}:6: [figures] 530.0 TFLOPS at "
                              f"4x16x16x4096x4096x64: {self.TABLE} has no such shape")


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
        keys = [checker.shape_key(m) for m in checker.SHAPE.finditer(
            "16384x32x8x128, 256x32x8x128x4096, 4×16×16×4096×4096×128 and 1x14336x4096; "
            "B×Hq×Hkv×Sq×Sk×D is none")]
        self.assertEqual(keys, ["16384x32x8x128", "256x32x8x128x4096", "4x16x16x4096x4096x128",
                                "1x14336x4096"])

    def test_parameters_written_with_a_shape(self):
        def key(text):
            return checker.problem_key(checker.SHAPE.search(text), text)
        self.assertEqual(key("at `4x16x16x4096x4096x128 bf16 causal=1`"),
                         "4x16x16x4096x4096x128 causal=1")
        self.assertEqual(key("| 4×16×16×4096×4096×128 causal |"), "4x16x16x4096x4096x128 causal=1")
        self.assertEqual(key("at 4×16×16×4096×4096×128, non-causal"), "4x16x16x4096x4096x128 causal=0")
        self.assertEqual(key("at 1×16×16×16384×16384×128 with the mask"),
                         "1x16x16x16384x16384x128 causal=1")
        self.assertEqual(key("at 1×16×16×16384×16384×128 without the causal mask"),
                         "1x16x16x16384x16384x128 causal=0")
        self.assertEqual(key("| 8×14336×4096 tokens=256 skew=1 |"), "8x14336x4096 tokens=256 skew=1")
        self.assertEqual(key("at 4096³ and 8192³"), "4096x4096x4096")
        for text in ("at 4×16×16×4096×4096×128, causal and not", "at 4×16×16×4096×4096×128 without "
                     "and with the mask", "at 4×16×16×4096×4096×128 (causal)"):
            self.assertEqual(key(text), "4x16x16x4096x4096x128", text)
        self.assertEqual(checker.split_problem("4x16x16x4096x4096x128 causal=1"),
                         ("4x16x16x4096x4096x128", {"causal": 1.0}))
        row = {"shape": "4x16x16x4096x4096x128", "params": {"causal": 1.0, "scale": 0.0}}
        self.assertTrue(checker.has_params(row, {"causal": 1.0}))
        self.assertTrue(checker.has_params(row, {}))
        self.assertFalse(checker.has_params(row, {"causal": 0.0}))
        self.assertFalse(checker.has_params(row, {"tokens": 256.0}))

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
        self.assertEqual(self.kinds("rung 07: 84.3% and 85.2% of cuDNN, 90.2% and 90.1% of "
                                    "copy ceiling"),
                         [("84.3", "pct_baseline"), ("85.2", "pct_baseline"),
                          ("90.2", "pct_ceiling"), ("90.1", "pct_ceiling")])
        for sentence in ("87–98% of cuBLAS at 4096³", "about 60 TFLOPS", "≥ 90% at 2048³",
                         "(targets 95%, 95% and 90%: met)", "1.0% faster at 4096³ and 1.7% at 8192³",
                         "84.2% busy", "61% of rung 09", "up to 2% between machines",
                         "below the 90%-of-copy target", "~78% of it", "73% and 83% of it"):
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

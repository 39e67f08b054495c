#!/usr/bin/env python3
"""Tests of the SASS contract checker itself, on saved SASS text (tests/sass/fixtures/): no
cuobjdump, no build, no GPU.

  NegativeControls  a listing with a spill, one without its cp.async, a loop below its FFMA
                    share, a rung without a row: each must fail, and say why.
  PositiveControl   the clean listing passes.
  Skips             without cuobjdump the check reports SKIPPED (exit 77), never passes;
                    with KC_REQUIRE_SASS=1 that becomes a failure.
  Units             instruction matching, loops, object names, the table's syntax.

Run: python3 tests/sass/test_check_sass_contracts.py [ClassName ...]   (CTest: label sass)
"""

import io
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
CHECKER = HERE / "check_sass_contracts.py"
sys.path.insert(0, str(HERE))
import check_sass_contracts as checker  # noqa: E402


def run_checker(*args, env=None):
    """Runs the checker as CTest does; returns (exit status, stdout + stderr)."""
    result = subprocess.run([sys.executable, str(CHECKER), *args], capture_output=True, text=True,
                            env=env, check=False)
    return result.returncode, result.stdout + result.stderr


def check_fixture(name, contracts=FIXTURES / "contracts.md"):
    return run_checker("--contracts", str(contracts),
                       "--sass", f"fixture/kernel={FIXTURES / name}")


def write_table(directory, rows):
    path = Path(directory) / "contracts.md"
    path.write_text("| object | kernel | arch | require | forbid | checks | claim |\n"
                    "|---|---|---|---|---|---|---|\n" + "".join(f"{row}\n" for row in rows))
    return path


class PositiveControl(unittest.TestCase):
    def test_clean_listing_passes(self):
        status, output = check_fixture("pass.sass")
        self.assertEqual(status, 0, output)
        self.assertIn("2 rows held against 4 (kernel, architecture) pairs; 0 violations", output)


class NegativeControls(unittest.TestCase):
    def test_spill_fails_and_names_it(self):
        status, output = check_fixture("spill.sass")
        self.assertEqual(status, 1, output)
        for arch in ("sm_80", "sm_90a"):
            self.assertIn(f"VIOLATION: fixture/kernel [{arch}]", output)
        self.assertIn("local-memory spill: 1 x STL (STL.64 at /*0060*/)", output)
        self.assertIn("local-memory spill: 1 x LDL (LDL.LU.64 at /*0180*/)", output)
        self.assertIn("claimed in: fixture: no spills", output)
        self.assertIn("tests/sass/fixtures/contracts.md:11", output)

    def test_missing_instruction_fails_and_names_it(self):
        status, output = check_fixture("missing.sass")
        self.assertEqual(status, 1, output)
        self.assertIn("required LDGSTS.E.BYPASS.128 is missing", output)
        self.assertIn("claimed in: fixture: a cp.async k-tile loop", output)
        self.assertNotIn("spill", output)

    def test_loop_share_below_threshold_fails_with_the_measured_value(self):
        with tempfile.TemporaryDirectory() as directory:
            table = write_table(directory, [
                "| `fixture/kernel` | `*` | sm_80 | | | loop(FFMA).share(FFMA) >= 0.60 | x |"])
            status, output = check_fixture("pass.sass", table)
        self.assertEqual(status, 1, output)
        # The loop runs from the LDGSTS at 0x60 to the branch at 0x160: 17 instructions, 8 FFMA.
        self.assertIn("loop(FFMA).share(FFMA) >= 0.60 does not hold: 0.471 (8 FFMA) in the FFMA "
                      "loop, /*0060*/../*0160*/, 17 instructions", output)

    def test_kernel_count_and_loop_count_fail(self):
        with tempfile.TemporaryDirectory() as directory:
            table = write_table(directory, [
                "| `fixture/kernel` | `*` | sm_90a | | | kernels == 2; loop(FFMA).count(LDS.128) == 3 | x |"])
            status, output = check_fixture("pass.sass", table)
        self.assertEqual(status, 1, output)
        self.assertIn("kernels == 2 does not hold: '*' matches 1 kernels", output)
        self.assertIn("loop(FFMA).count(LDS.128) == 3 does not hold: 2 in the FFMA loop", output)

    def test_object_without_row_fails(self):
        with tempfile.TemporaryDirectory() as directory:
            table = write_table(directory, ["| `fixture/other` | `*` | sm_80 | | LDL STL | | x |"])
            status, output = run_checker("--contracts", str(table),
                                         "--sass", f"fixture/kernel={FIXTURES / 'pass.sass'}",
                                         "--sass", f"fixture/other={FIXTURES / 'pass.sass'}")
        self.assertEqual(status, 1, output)
        self.assertIn("fixture/kernel has kernels but no row in tests/sass/contracts.md covers it",
                      output)

    def test_row_for_a_missing_object_fails(self):
        with tempfile.TemporaryDirectory() as directory:
            table = write_table(directory, [
                "| `fixture/*` | `*` | sm_80 | | LDL STL | | x |",
                "| `fixture/09_renamed` | `*` | sm_80 | LDGSTS | | | x |"])
            status, output = check_fixture("pass.sass", table)
        self.assertEqual(status, 1, output)
        self.assertIn("no object matches fixture/09_renamed", output)

    def test_pattern_matching_no_kernel_fails(self):
        with tempfile.TemporaryDirectory() as directory:
            table = write_table(directory, [
                "| `fixture/kernel` | `stream_k_kernel` | sm_80 | LDGSTS | | | x |"])
            status, output = check_fixture("pass.sass", table)
        self.assertEqual(status, 1, output)
        self.assertIn("fixture/kernel [sm_80]: no kernel matches 'stream_k_kernel'", output)


class Skips(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.objects = Path(self.directory.name) / "objects.txt"
        self.objects.write_text("/nonexistent/kernels/01_naive.cu.o\n")
        self.env = dict(os.environ, PATH="/nonexistent")  # no cuobjdump anywhere
        self.env.pop("KC_REQUIRE_SASS", None)
        self.env.pop("KC_CUOBJDUMP", None)

    def tearDown(self):
        self.directory.cleanup()

    def test_without_cuobjdump_the_check_is_skipped_not_passed(self):
        status, output = run_checker("--objects", f"stage1={self.objects}",
                                     "--cuobjdump", "KC_CUOBJDUMP-NOTFOUND", env=self.env)
        self.assertEqual(status, 77, output)
        self.assertIn("SKIPPED: cuobjdump not found", output)

    def test_required_sass_turns_the_skip_into_a_failure(self):
        env = dict(self.env, KC_REQUIRE_SASS="1")
        status, output = run_checker("--objects", f"stage1={self.objects}",
                                     "--cuobjdump", "/nonexistent/cuobjdump", env=env)
        self.assertEqual(status, 1, output)
        self.assertIn("KC_REQUIRE_SASS is set", output)

    def test_no_built_architecture_is_a_skip(self):
        status, output = run_checker("--contracts", str(FIXTURES / "contracts.md"), "--archs", "86",
                                     "--sass", f"fixture/kernel={FIXTURES / 'pass.sass'}",
                                     env=self.env)
        self.assertEqual(status, 77, output)
        self.assertIn("not checked, architecture not built here", output)


class Units(unittest.TestCase):
    def test_opcode_matching(self):
        match = checker.opcode_matches
        self.assertTrue(match("LDL.LU.64", "LDL"))
        self.assertTrue(match("STL.128", "STL"))
        self.assertFalse(match("LDS.128", "LDL"))
        self.assertTrue(match("LDG.E.128.CONSTANT", "LDG.E.128"))
        self.assertFalse(match("LDG.E.64", "LDG.E.128"))
        self.assertFalse(match("LDG.E", "LDG.E.128"))
        self.assertTrue(match("HMMA.16816.F32.BF16", "HMMA"))
        self.assertFalse(match("HGMMA.64x256x16.F32.BF16", "HMMA"))
        self.assertTrue(match("LDGSTS.E.BYPASS.128.ZFILL", "LDGSTS.E.BYPASS.128"))
        self.assertFalse(match("RED.E.ADD.F32x4.FTZ", "RED.E.ADD.F32"))

    def test_parse_skips_nops_and_keeps_predicated_opcodes(self):
        kernels = checker.parse_sass((FIXTURES / "pass.sass").read_text())
        self.assertEqual([k.arch for k in kernels], ["sm_80", "sm_90a"])
        opcodes = [i.opcode for i in kernels[0].instructions]
        self.assertNotIn("NOP", opcodes)
        self.assertIn("BRA", opcodes)  # `@P0 BRA 0x60`: predicate stripped
        self.assertEqual(kernels[0].name, "kc fixture pipelined_kernel 0 GemmArgs")

    def test_hot_loop_leaves_out_nested_loops(self):
        lines = []
        for address, text in [(0x00, "MOV R1, RZ"), (0x10, "HMMA.16816.F32.BF16 R4, R8, R12, R4"),
                              (0x20, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R3], R2"),
                              (0x30, "@!P0 BRA 0x20"), (0x40, "HMMA.16816.F32.BF16 R4, R8, R12, R4"),
                              (0x50, "@P1 BRA 0x10"), (0x60, "EXIT")]:
            lines.append(f"        /*{address:04x}*/                   {text} ;  /* 0x0 */")
        kernel = checker.parse_sass("\tcode for sm_90a\n\t\tFunction : k\n" + "\n".join(lines))[0]
        body = checker.hot_loop(kernel, "HMMA")
        # The K loop is 0x10..0x50 without the spin-wait 0x20..0x30 nested in it.
        self.assertEqual([i.address for i in body], [0x10, 0x40, 0x50])

    def test_object_names_follow_the_rung_file(self):
        name = checker.object_name
        self.assertEqual(name("stage1", "/b/stage1-sgemm/CMakeFiles/kc_stage1.dir/kernels/09_cp_async.cu.o"),
                         "stage1/09_cp_async")
        self.assertEqual(name("stage2", "/b/CMakeFiles/kc_stage2.dir/kernels/rmsnorm/04_vectorized.cu.o"),
                         "stage2/rmsnorm/04_vectorized")
        self.assertEqual(name("stage3", "/b/CMakeFiles/kc_stage3.dir/gemm/09_tma_store.cu.o"),
                         "stage3/09_tma_store")
        self.assertEqual(name("stage3", "/b/CMakeFiles/kc_stage3.dir/arch/sm90/gemm/09_tma_store.cu.o"),
                         "stage3/09_tma_store")

    def test_built_architectures(self):
        self.assertEqual(checker.built_archs("80;90a"), {"sm_80", "sm_90a"})
        self.assertEqual(checker.built_archs("80,90a"), {"sm_80", "sm_90a"})
        self.assertEqual(checker.built_archs("80-real;90a-virtual"), {"sm_80"})
        self.assertIsNone(checker.built_archs("native"))

    def test_vec16_expands_to_the_three_element_types(self):
        include, exclude = checker._kernel_globs("map_kernel<vec16> !map_kernelIfLi4ENS0_3Add")
        self.assertEqual(include, ["*map_kernelI13__nv_bfloat16Li8E*", "*map_kernelI6__halfLi8E*",
                                   "*map_kernelIfLi4E*"])
        self.assertEqual(exclude, ["*map_kernelIfLi4ENS0_3Add*"])

    def test_table_errors_are_reported_with_their_line(self):
        table = ("| object | kernel | arch | require | forbid | checks | claim |\n"
                 "|---|---|---|---|---|---|---|\n"
                 "| `stage1/*` | `*` | sm_70 | | | loop(FFMA).share >= 1 | x |\n")
        with self.assertRaises(ValueError) as raised:
            checker.parse_contracts(table, "t.md")
        self.assertIn("t.md:3: unknown architecture 'sm_70'", str(raised.exception))
        self.assertIn("t.md:3: check 'loop(FFMA).share >= 1'", str(raised.exception))

    def test_bad_table_exits_2(self):
        with tempfile.TemporaryDirectory() as directory:
            table = write_table(directory, ["| `fixture/kernel` | `*` | sm_80 | | | count(FFMA) => 1 | x |"])
            status, output = check_fixture("pass.sass", table)
        self.assertEqual(status, 2, output)
        self.assertIn("cannot read the check 'count(FFMA) => 1'", output)

    def test_project_table_parses(self):
        contracts = checker.parse_contracts((HERE / "contracts.md").read_text(), "contracts.md")
        stages = {c.stage for c in contracts}
        self.assertEqual(stages, {"stage1", "stage2", "stage3"})
        for stage in stages:  # every stage keeps its blanket no-spill row
            self.assertTrue(any(c.kernel_pattern.startswith("*") and c.forbid == ["LDL", "STL"]
                                and c.stage == stage for c in contracts), stage)

    def test_report_prints_the_loop(self):
        objects = [checker.ObjectFile("fixture/kernel", str(FIXTURES / "pass.sass"), is_text=True)]
        out = io.StringIO()
        checker.report(objects, checker.Tools(None, None), out)
        self.assertIn("FFMA loop 8/17 = 0.471", out.getvalue())


if __name__ == "__main__":
    unittest.main(verbosity=2)

#!/usr/bin/env python3
"""Tests of tests/sass/same_sass.py on saved SASS text (fixtures/): a listing against itself with
its functions renamed is identical; against a listing that differs by a spill it is not, and the
exit status says so; each function counts under its own architecture. No cuobjdump, no build, no GPU.

Run: python3 tests/sass/test_same_sass.py   (CTest: kc_sass_same_sass, label sass)
"""
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
sys.path.insert(0, str(HERE))
import same_sass  # noqa: E402


class SameSass(unittest.TestCase):
    def test_renamed_functions_are_identical(self):
        text = (FIXTURES / "pass.sass").read_text()
        renamed = text.replace("_ZN2kc7fixture", "_ZN2kc13moved_fixture")
        self.assertNotEqual(text, renamed)
        self.assertEqual(same_sass.compare(text, renamed), (2, 2, 0, 0))

    def test_a_different_body_is_found(self):
        clean, spill = (FIXTURES / "pass.sass").read_text(), (FIXTURES / "spill.sass").read_text()
        n_before, n_after, only_before, only_after = same_sass.compare(clean, spill)
        self.assertEqual((n_before, n_after), (2, 2))
        self.assertGreater(only_before, 0)
        self.assertGreater(only_after, 0)

    def test_each_function_counts_under_its_own_architecture(self):
        # The last function of one architecture's listing belongs to it, not to the next: the same
        # functions in another order within a section are identical, the same body under another
        # architecture is not.
        def listing(sections):
            lines = []
            for arch, functions in sections:
                lines.append(f"arch = {arch}")
                for name, instructions in functions:
                    lines.append(f"\t\tFunction : {name}")
                    lines += [f"        /*{16 * i:04x}*/                   {x} ;" for i, x in enumerate(instructions)]
            return "\n".join(lines) + "\n"

        f = ("f", ["MOV R1, R2", "EXIT"])
        g = ("g", ["IADD3 R1, R2, R3, RZ", "EXIT"])
        first = listing([("sm_80", [f, g]), ("sm_90a", [f])])
        swapped = listing([("sm_80", [g, f]), ("sm_90a", [f])])
        self.assertEqual(same_sass.compare(first, swapped), (3, 3, 0, 0))
        moved = listing([("sm_80", [f]), ("sm_90a", [f, g])])
        self.assertEqual(same_sass.compare(first, moved), (3, 3, 1, 1))

    def test_exit_status(self):
        script = HERE / "same_sass.py"
        with tempfile.TemporaryDirectory() as d:
            renamed = Path(d) / "renamed.sass"
            renamed.write_text((FIXTURES / "pass.sass").read_text().replace("fixture", "elsewhere"))
            same = subprocess.run([sys.executable, script, FIXTURES / "pass.sass", renamed], capture_output=True,
                                  text=True)
            self.assertEqual(same.returncode, 0, same.stdout + same.stderr)
            self.assertIn("identical", same.stdout)
            other = subprocess.run([sys.executable, script, FIXTURES / "pass.sass", FIXTURES / "spill.sass"],
                                   capture_output=True, text=True)
            self.assertEqual(other.returncode, 1, other.stdout + other.stderr)
            self.assertIn("differ", other.stdout)
            empty = Path(d) / "empty.sass"
            empty.write_text("no functions here\n")
            none = subprocess.run([sys.executable, script, empty, FIXTURES / "pass.sass"], capture_output=True,
                                  text=True)
            self.assertEqual(none.returncode, 2, none.stdout + none.stderr)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Summarize a GoogleTest run for scripts/gpu-check.sh: what passed, what was skipped and why, what
failed and with which message, and how many conformance checks passed.

Two inputs:

    test_summary.py ctest ctest.xml     # the JUnit XML of `ctest --output-junit` (one test per case;
                                        # ctest decides the status: run, fail, notrun + <skipped>)
    test_summary.py gtest run.log       # the stdout of a GoogleTest executable, e.g. run under
                                        # compute-sanitizer (the status comes from [ OK ] / [ FAILED ]
                                        # / [ SKIPPED ] lines; a test with none of them did not finish)

A test counts as skipped only when its status says so (ctest's <skipped> element, GoogleTest's
[  SKIPPED ] line), never because "Skipped" appears in its name. "checks passed" adds up the
"<kernel>: N checks passed" lines that the conformance suite prints, over the tests that passed
only. compute-sanitizer's own "=========" lines are ignored here: gpu-check.sh reads those.

Exit status: 0 when no test failed or stopped unfinished, 1 otherwise, 2 when the input cannot be read.
"""

import re
import sys
import xml.etree.ElementTree as ET

MAX_LISTED = 40  # lines per list printed; the rest are counted

RUN = re.compile(r"^\[ RUN      \] (\S+)")
OK = re.compile(r"^\[       OK \] (\S+).*\(\d+ ms\)$")
FAILED = re.compile(r"^\[  FAILED  \] ([^\s,]+).*\(\d+ ms\)$")
SKIPPED = re.compile(r"^\[  SKIPPED \] (\S+).*\(\d+ ms\)$")
CHECKS = re.compile(r"^\S+: (\d+) checks passed\b")
FAILURE_AT = re.compile(r"^(.*:\d+): Failure$")
SKIPPED_AT = re.compile(r"^.*:\d+: Skipped$")
CONFORMANCE_CHECK = re.compile(r", seed \d+: ")
RESULT_ANYWHERE = re.compile(r"^\[(       OK |  FAILED  |  SKIPPED )\] ", re.MULTILINE)


class Test:
    def __init__(self, name):
        self.name = name
        self.status = "unfinished"  # passed, failed, skipped, unfinished
        self.checks_passed = 0
        self.failures = []  # (where, message)
        self.skip_reason = ""


def read_block(lines, start):
    """The lines after lines[start] up to a blank line, a GoogleTest marker, the next failure or a
    "checks passed" line."""
    block = []
    for line in lines[start + 1:]:
        if (not line.strip() or line.startswith("[") or line.startswith("=========")
                or FAILURE_AT.match(line) or CHECKS.match(line)):
            break
        block.append(line.strip())
    return block


def failure_message(block):
    """A conformance failure's own sentence, else the whole assertion text on one line."""
    for line in block:
        if CONFORMANCE_CHECK.search(line):
            return line
    text = " | ".join(block) or "(no message)"
    return text if len(text) <= 300 else text[:297] + "..."


def parse_gtest_text(text, tests=None, default_name=None):
    """Tests found in GoogleTest output, with their checks, failure messages and skip reasons."""
    tests = {} if tests is None else tests
    lines = text.splitlines()
    current = None
    for i, line in enumerate(lines):
        if line.startswith("========="):
            continue  # compute-sanitizer's report, read elsewhere
        if m := RUN.match(line):
            current = tests.setdefault(m.group(1), Test(m.group(1)))
            continue
        test = current or (tests.setdefault(default_name, Test(default_name)) if default_name else None)
        if m := OK.match(line):
            tests.setdefault(m.group(1), Test(m.group(1))).status = "passed"
            current = None
        elif m := FAILED.match(line):
            tests.setdefault(m.group(1), Test(m.group(1))).status = "failed"
            current = None
        elif m := SKIPPED.match(line):
            tests.setdefault(m.group(1), Test(m.group(1))).status = "skipped"
            current = None
        elif test is None:
            continue
        elif m := CHECKS.match(line):
            test.checks_passed += int(m.group(1))
        elif m := FAILURE_AT.match(line):
            test.failures.append((m.group(1), failure_message(read_block(lines, i))))
        elif SKIPPED_AT.match(line) and not test.skip_reason:
            test.skip_reason = " ".join(read_block(lines, i))
    return tests


def from_ctest_junit(path):
    tree = ET.parse(path)
    tests = {}
    for case in tree.getroot().iter("testcase"):
        name = case.get("name", "?")
        out = case.findtext("system-out") or ""
        parsed = parse_gtest_text(out, {}, default_name=name)
        test = parsed.get(name) or Test(name)
        # ctest is the authority on the status; the output adds the details.
        for other in parsed.values():
            if other is not test:
                test.checks_passed += other.checks_passed
                test.failures += other.failures
                test.skip_reason = test.skip_reason or other.skip_reason
        status = case.get("status", "")
        skipped = case.find("skipped")
        if status == "run":
            test.status = "passed"
        elif skipped is not None and skipped.get("message") == "SKIP_REGULAR_EXPRESSION_MATCHED":
            test.status = "skipped"
        elif skipped is not None and (skipped.get("message") or "").startswith("SKIP_RETURN_CODE="):
            # A script test that exits with its SKIP_RETURN_CODE (e.g. the openai client test
            # without the openai package): ctest counts it as skipped, and so does this summary.
            test.status = "skipped"
            lines = [line for line in out.splitlines() if line.strip()]
            test.skip_reason = test.skip_reason or (lines[-1] if lines else skipped.get("message"))
        elif status == "disabled":
            test.status = "skipped"
            test.skip_reason = test.skip_reason or "disabled in ctest"
        else:
            # fail (a failed assertion, a crash or a timeout) or notrun for any other reason
            # (ctest counts an executable it cannot find as failed, and so does this summary).
            test.status = "failed"
            if not test.failures:
                if skipped is not None:  # notrun: ctest says why (e.g. "Unable to find executable")
                    message = skipped.get("message") or "not run"
                elif not RESULT_ANYWHERE.search(out):
                    message = (f"no GoogleTest result after {float(case.get('time', 0)):.0f} s: it crashed "
                               "or reached the ctest --timeout (ctest.log says which)")
                else:
                    tail = [line for line in out.splitlines() if line.strip()][-1:] or ["(no output)"]
                    message = tail[0]
                test.failures.append(("ctest", message))
        tests[name] = test
    return tests


def from_gtest_log(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse_gtest_text(f.read())


def print_list(title, rows):
    if not rows:
        return
    print(f"  {title} ({len(rows)}):")
    for row in rows[:MAX_LISTED]:
        print(f"    {row}")
    if len(rows) > MAX_LISTED:
        print(f"    ... and {len(rows) - MAX_LISTED} more")


def main(argv):
    if len(argv) != 2 or argv[0] not in ("ctest", "gtest"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    kind, path = argv
    try:
        tests = from_ctest_junit(path) if kind == "ctest" else from_gtest_log(path)
    except (OSError, ET.ParseError) as error:
        print(f"test_summary.py: cannot read {path}: {error}", file=sys.stderr)
        return 2
    by_status = {s: [t for t in tests.values() if t.status == s]
                 for s in ("passed", "skipped", "failed", "unfinished")}
    counts = ", ".join(f"{len(v)} {k}" for k, v in by_status.items() if v or k in ("passed", "failed"))
    print(f"  {len(tests)} tests: {counts}")
    # The conformance suite prints how many checks it ran ("N checks passed") even when some of them
    # failed, so a failed test contributes N minus its failed checks.
    checks_passed = sum(t.checks_passed for t in by_status["passed"])
    failed_checks = 0
    for t in by_status["failed"]:
        failed_here = sum(1 for _, m in t.failures if CONFORMANCE_CHECK.search(m))
        failed_checks += failed_here
        checks_passed += max(0, t.checks_passed - failed_here)
    if checks_passed or failed_checks:
        print(f"  conformance: {checks_passed} checks passed, {failed_checks} failed")
    print_list("FAILED", [f"{t.name}: {t.failures[0][1]} [{t.failures[0][0]}]"
                          + (f" (+{len(t.failures) - 1} more failures)" if len(t.failures) > 1 else "")
                          if t.failures else t.name for t in by_status["failed"]])
    print_list("did not finish (crash, abort or time-out: see the log)", [t.name for t in by_status["unfinished"]])
    print_list("skipped", [f"{t.name}: {t.skip_reason or '(no reason printed)'}" for t in by_status["skipped"]])
    return 1 if by_status["failed"] or by_status["unfinished"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Whether two builds of the same kernels compiled to the same machine code.

    python3 tests/sass/same_sass.py BEFORE AFTER [--cuobjdump PATH]

BEFORE and AFTER are object files (disassembled with cuobjdump -sass) or saved SASS listings
(.sass). For a refactor that moves a kernel — into a shared header, behind a template parameter —
the functions' names change (an anonymous namespace's hash, the template arguments) while the
instructions should not: so the comparison is of each architecture's multiset of function bodies,
each body its instructions in order with addresses and encodings dropped and branch targets masked.
It prints how many functions each side has and "identical", or how many bodies each side has that
the other lacks, and exits 0 when identical, 1 when not (2 on bad input). A scheduling or register
difference counts: the committed measurements of a kernel hold for its SASS, so a refactor that
changes it needs the kernel timed again.

    cmake --build build/ci --target <the rung's object>   # before and after the change, copying
    python3 tests/sass/same_sass.py before.o build/ci/stage3-hpc/CMakeFiles/kc_stage3.dir/quant/06_gemv_gguf_bulk_stream.cu.o

Compile both sides without a compiler cache (the object's command from `ninja -t commands OBJ`
with the launcher dropped): a build through ccache has returned an object from before an edit to
a kernel header's device code, and two stale objects compare identical.
"""
import argparse
import collections
import hashlib
import re
import subprocess
import sys

INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;")
BRANCH_TARGET = re.compile(r"0x[0-9a-f]+")


def listing(path, cuobjdump):
    """The SASS text of an object file, or the file itself when it is a saved listing."""
    if path.endswith(".sass"):
        with open(path, encoding="utf-8") as f:
            return f.read()
    result = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"same_sass: cuobjdump -sass {path} failed: {result.stderr.strip()}")
    return result.stdout


def bodies(text):
    """Counter of (architecture, hash of the body's instructions) over every function."""
    out = collections.Counter()
    arch, name, lines = None, None, []

    def close():
        if name is not None:
            out[(arch, hashlib.sha1("\n".join(lines).encode()).hexdigest())] += 1

    for line in text.splitlines():
        found = re.match(r"\s*arch = (\w+)", line)
        if found:  # a new architecture's listing: the function before it belongs to the old one
            close()
            name, lines = None, []
            arch = found.group(1)
        if "Function :" in line:
            close()
            name, lines = line.split("Function :", 1)[1].strip(), []
            continue
        found = INSTRUCTION.match(line)
        if found and name is not None:
            instruction = found.group(1)
            if "BRA" in instruction or "CALL" in instruction:
                instruction = BRANCH_TARGET.sub("X", instruction)
            lines.append(instruction)
    close()
    return out


def compare(before_text, after_text):
    """(functions before, functions after, bodies only before, bodies only after)."""
    a, b = bodies(before_text), bodies(after_text)
    return sum(a.values()), sum(b.values()), sum((a - b).values()), sum((b - a).values())


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--cuobjdump", default="cuobjdump")
    args = parser.parse_args(argv)
    n_before, n_after, only_before, only_after = compare(listing(args.before, args.cuobjdump),
                                                         listing(args.after, args.cuobjdump))
    if n_before == 0 or n_after == 0:
        print(f"same_sass: no functions in {'the first' if n_before == 0 else 'the second'} listing")
        return 2
    same = only_before == 0 and only_after == 0
    print(f"functions {n_before} and {n_after}: " +
          ("identical" if same else f"differ ({only_before} bodies only before, {only_after} only after)"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Checks the SASS contracts of tests/sass/contracts.md against built object files.

Each rung's header comment names the instructions it is about (cp.async -> LDGSTS, ldmatrix +
mma.sync -> LDSM + HMMA, TMA + WGMMA -> UTMALDG + HGMMA, "no spills" -> no LDL/STL). This script
disassembles the objects with `cuobjdump --dump-sass` and holds every row of the contract table
against the machine code, so that a claim in a comment fails a test the day it stops being true.
No GPU is needed, only cuobjdump and the nvdisasm it calls.

Usage (CTest runs it this way, one test per stage; see tests/sass/CMakeLists.txt):
  check_sass_contracts.py --objects stage1=<file listing kc_stage1's objects, one a line>
      [--cuobjdump PATH] [--nvdisasm PATH] [--archs "80;90a"] [--contracts contracts.md]
  check_sass_contracts.py --report --objects stage1=<list>   per-kernel statistics, no checks
  check_sass_contracts.py --sass NAME=FILE ...                saved SASS text stands in for object
                                                              NAME (the checker's own tests)

Exit status: 0 every row that applies holds; 1 a row is violated (each violation printed with
the object, kernel, architecture, what was expected and the table line); 2 the table, the
command line or an object is wrong; 77 nothing could be checked (cuobjdump or nvdisasm not
found): CTest reports that as SKIPPED -- unless KC_REQUIRE_SASS=1 is set (CI sets it), which
makes it a failure.

Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fnmatch
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_SKIP = 0, 1, 2, 77
SPILL_OPCODES = ("LDL", "STL")

# --------------------------------------------------------------------------------------------
# SASS text -> kernels
# --------------------------------------------------------------------------------------------

# `        /*0a50*/  @!P0 LDGSTS.E.BYPASS.128 [R3+0x1000], desc[UR8][R4.64] ;  /* 0x... */`
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;")
_PREDICATE = re.compile(r"^@!?U?P[0-7T]\s+")
_CODE_FOR = re.compile(r"^\s*code for (sm_\w+)")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_HEX = re.compile(r"0x([0-9a-fA-F]+)")


@dataclass
class Instruction:
    address: int
    opcode: str  # with its modifiers, e.g. LDGSTS.E.BYPASS.128; the predicate left out
    operands: str


@dataclass
class Kernel:
    arch: str
    mangled: str
    instructions: list = field(default_factory=list)  # without NOPs (alignment padding)

    @property
    def name(self) -> str:
        return readable_name(self.mangled)


def parse_sass(text: str) -> list:
    """The kernels of a `cuobjdump --dump-sass` listing, each with its architecture."""
    kernels, arch, current = [], None, None
    for line in text.splitlines():
        match = _CODE_FOR.match(line)
        if match:
            arch, current = match.group(1), None
            continue
        match = _FUNCTION.match(line)
        if match:
            current = Kernel(arch or "unknown", match.group(1))
            kernels.append(current)
            continue
        match = _INSTRUCTION.match(line)
        if match and current is not None:
            body = _PREDICATE.sub("", match.group(2))
            opcode, _, operands = body.partition(" ")
            if opcode != "NOP":
                current.instructions.append(
                    Instruction(int(match.group(1), 16), opcode, operands.strip()))
    return kernels


def readable_name(mangled: str) -> str:
    """A rough reading of an Itanium-mangled name for messages: its identifiers and literal
    template arguments in order, e.g. `kc stage1 sgemm_pipelined_kernel SearchSpaceTiles 0
    GemmArgs PipelineParams`. The contracts match the mangled name itself."""
    words, i = [], 0
    while i < len(mangled):
        rest = mangled[i:]
        literal = re.match(r"L[a-z](n?\d+)E", rest)  # Li8E, Lb1E: an integer or bool argument
        enum = re.match(r"(\d+)E", rest) if i > 0 and mangled[i - 1] == "E" else None
        if literal or (enum and words):
            match = literal or enum
            words.append(match.group(1).replace("n", "-"))
            i += len(match.group(0))
            continue
        if re.match(r"If(?=L|E)", rest):  # a float template argument
            words.append("float")
            i += 2
            continue
        number = re.match(r"[1-9]\d*", rest)
        if number:
            start = i + len(number.group(0))
            identifier = mangled[start:start + int(number.group(0))]
            if re.fullmatch(r"[A-Za-z_]\w*", identifier or "-"):
                anonymous = re.match(r"_GLOBAL__N__[0-9a-f]+_\d+_(\w+?)_(cu|cpp)_", identifier)
                words.append(f"(anonymous, {anonymous.group(1)}.{anonymous.group(2)})"
                             if anonymous else identifier)
                i = start + len(identifier)
                continue
        substitution = re.match(r"[ST][0-9A-Z]*_", rest)
        i += len(substitution.group(0)) if substitution else 1
    return " ".join(words) or mangled


def opcode_matches(opcode: str, wanted: str) -> bool:
    """`wanted` names an instruction by its base and the modifiers it must carry, in order:
    LDL matches LDL, LDL.64 and LDL.LU.128; LDG.E.128 matches LDG.E.128 and
    LDG.E.128.CONSTANT but not LDG.E or LDG.E.64; HMMA never matches HGMMA (equal bases)."""
    have, need = opcode.split("."), wanted.split(".")
    if have[0] != need[0]:
        return False
    position = 1
    for modifier in need[1:]:
        try:
            position = have.index(modifier, position) + 1
        except ValueError:
            return False
    return True


def count(instructions, wanted: str) -> int:
    return sum(1 for instruction in instructions if opcode_matches(instruction.opcode, wanted))


def loop_bodies(kernel: Kernel) -> list:
    """Every loop of the kernel as the list of its own instructions. A loop runs from a backward
    branch's target up to the branch, in address order; its own instructions are those not
    inside a shorter loop nested in it (so a barrier wait spinning inside a GEMM's K loop, or
    the loops that load a tile, are not part of the K loop's body)."""
    spans = set()
    for instruction in kernel.instructions:
        if instruction.opcode.split(".")[0] == "BRA":
            target = _HEX.search(instruction.operands)
            if target and int(target.group(1), 16) < instruction.address:
                spans.add((int(target.group(1), 16), instruction.address))
    spans = sorted(spans, key=lambda span: (span[1] - span[0], span[0]))  # shortest first
    bodies = {span: [] for span in spans}
    for instruction in kernel.instructions:
        for start, end in spans:
            if start <= instruction.address <= end:
                bodies[(start, end)].append(instruction)
                break
    return [body for body in bodies.values() if body]


def hot_loop(kernel: Kernel, wanted: str) -> list:
    """The body of the loop with the most `wanted` instructions of its own (ties: the shorter
    body); empty if no loop has any. For FFMA in an SGEMM: the unrolled k-tile loop."""
    best = max(loop_bodies(kernel), key=lambda body: (count(body, wanted), -len(body)), default=[])
    return best if count(best, wanted) > 0 else []


# --------------------------------------------------------------------------------------------
# The contract table
# --------------------------------------------------------------------------------------------

# A numeric check, `;`-separated in the `checks` column:
#   kernels == 3                   how many kernels the row's kernel pattern matches (per arch)
#   count(X) >= 1, share(X) >= .2  X instructions in the whole kernel; share = X / all
#   loop(Y).count(X) == 32         X instructions in the body of Y's hot loop (hot_loop)
#   loop(Y).share(X) >= 0.80       ... as a share of that body's instructions
#   loop(Y).size <= 1200           instructions in that body
_CHECK = re.compile(r"^(?:loop\((?P<loop>[A-Z0-9_.]+)\)\.)?(?P<function>kernels|count|share|size)"
                    r"(?:\((?P<opcode>[A-Z0-9_.]+)\))?\s*(?P<operator>>=|<=|==|>|<)\s*"
                    r"(?P<value>[0-9]*\.?[0-9]+)$")
_OPERATORS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
              ">": lambda a, b: a > b, "<": lambda a, b: a < b}
_KNOWN_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120")
_EMPTY = ("", "-", "—")

# `name<vec16>` in a kernel pattern: the instances of template `name` whose first two template
# arguments are an element type and its 16-byte vector width (stage 2's kernels: bf16 and fp16
# 8 elements, float 4), i.e. the kernels that claim LDG.E.128 / STG.E.128.
_VEC16 = ("I13__nv_bfloat16Li8E", "I6__halfLi8E", "IfLi4E")


@dataclass
class Check:
    text: str
    function: str  # kernels, count, share, size
    opcode: str | None
    loop: str | None
    operator: str
    value: float


@dataclass
class Contract:
    line: int
    object_pattern: str  # <stage>/<source stem>, glob allowed: stage1/10_autotuned, stage2/*/*
    include: list  # globs on the mangled name (each implicitly *...*), expanded from the pattern
    exclude: list
    kernel_pattern: str  # as written
    archs: list
    require: list
    forbid: list
    checks: list
    claim: str
    origin: str = "contracts.md"

    @property
    def stage(self) -> str:
        return self.object_pattern.split("/", 1)[0]


def _cells(line: str) -> list:
    return [cell.strip().strip("`").strip() for cell in line.strip().strip("|").split("|")]


def _kernel_globs(pattern: str):
    include, exclude = [], []
    for word in pattern.split():
        negative = word.startswith("!")
        word = word.lstrip("!")
        expanded = ([word.replace("<vec16>", suffix) for suffix in _VEC16] if "<vec16>" in word
                    else [word])
        for glob in expanded:
            glob = glob if glob == "*" else f"*{glob}*"
            (exclude if negative else include).append(glob)
    return include or ["*"], exclude


def parse_check(text: str) -> Check:
    match = _CHECK.match(text)
    if not match:
        raise ValueError(f"cannot read the check '{text}' (e.g. 'loop(FFMA).share(FFMA) >= 0.80', "
                         "'count(LDGSTS) >= 1', 'kernels == 3')")
    function, opcode, loop = match.group("function"), match.group("opcode"), match.group("loop")
    if (function in ("count", "share")) != (opcode is not None) or \
            (function == "size" and loop is None) or (function == "kernels" and loop is not None):
        raise ValueError(f"check '{text}': count(X) and share(X) name an instruction, size needs "
                         "loop(Y).size, kernels stands alone")
    return Check(text, function, opcode, loop, match.group("operator"),
                 float(match.group("value")))


def parse_contracts(text: str, origin: str) -> list:
    """The rows of every Markdown table whose header starts with `object | kernel | arch`."""
    contracts, header, errors, tables = [], None, [], 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            if [c.lower() for c in cells[:3]] == ["object", "kernel", "arch"]:
                header, tables = [c.lower() for c in cells], tables + 1
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the |---|---| line
        row = dict(zip(header, cells + [""] * (len(header) - len(cells))))
        where = f"{origin}:{number}"
        archs = row["arch"].split()
        for arch in archs or ["(none)"]:
            if arch not in _KNOWN_ARCHS:
                errors.append(f"{where}: unknown architecture '{arch}'")
        checks = []
        for check_text in [c.strip() for c in row.get("checks", "").split(";")]:
            if check_text not in _EMPTY:
                try:
                    checks.append(parse_check(check_text))
                except ValueError as error:
                    errors.append(f"{where}: {error}")
        if "/" not in row["object"]:
            errors.append(f"{where}: object '{row['object']}' must be <stage>/<source file stem>, "
                          "e.g. stage1/09_cp_async")
        pattern = row["kernel"] if row["kernel"] not in _EMPTY else "*"
        include, exclude = _kernel_globs(pattern)
        contracts.append(Contract(
            line=number, object_pattern=row["object"], include=include, exclude=exclude,
            kernel_pattern=pattern, archs=archs,
            require=[] if row.get("require", "") in _EMPTY else row["require"].split(),
            forbid=[] if row.get("forbid", "") in _EMPTY else row["forbid"].split(),
            checks=checks, claim=row.get("claim", ""), origin=origin))
    if tables == 0:
        errors.append(f"{origin}: no table with the header '| object | kernel | arch | ...'")
    if errors:
        raise ValueError("\n".join(errors))
    return contracts


# --------------------------------------------------------------------------------------------
# Objects and their disassembly
# --------------------------------------------------------------------------------------------

class SkipError(Exception):
    """Nothing can be checked here (a missing tool): CTest's SKIPPED, never a pass."""


@dataclass
class ObjectFile:
    name: str  # <stage>/<source stem>: stage1/10_autotuned, stage2/rmsnorm/04_vectorized
    path: str  # the object file, or the saved SASS text
    is_text: bool = False
    _kernels: list = None

    def kernels(self, tools) -> list:
        if self._kernels is None:
            text = Path(self.path).read_text() if self.is_text else tools.dump_sass(self.path)
            self._kernels = parse_sass(text)
        return self._kernels


def object_name(stage: str, path: str) -> str:
    """stage1 + .../kc_stage1.dir/kernels/09_cp_async.cu.o -> stage1/09_cp_async. The folders
    below the last `kernels`, `gemm`, `attention` or `quant` folder are kept (stage 2's op
    folders: stage2/rmsnorm/04_vectorized), so a rung keeps its name when helpers move."""
    parts = Path(path).as_posix().split("/")
    stem = re.sub(r"\.(cu|cpp|cc)\.(o|obj)$|\.(o|obj)$", "", parts[-1])
    folders = parts[:-1]
    for index in range(len(folders) - 1, -1, -1):
        if folders[index] in ("kernels", "gemm", "attention", "quant"):
            return "/".join([stage] + folders[index + 1:] + [stem])
    return f"{stage}/{stem}"


def read_object_list(stage: str, list_file: str) -> list:
    objects = []
    for raw in Path(list_file).read_text().splitlines():
        path = raw.strip()
        if path and re.search(r"\.cu\.(o|obj)$", path):  # host-only objects hold no SASS
            objects.append(ObjectFile(object_name(stage, path), path))
    return objects


class Tools:
    def __init__(self, cuobjdump: str | None, nvdisasm: str | None):
        self.cuobjdump, self.nvdisasm = cuobjdump, nvdisasm

    @staticmethod
    def _usable(path: str | None) -> bool:
        return bool(path) and not path.endswith("-NOTFOUND") and os.path.isfile(path) \
            and os.access(path, os.X_OK)

    def resolve(self):
        """Finds cuobjdump and the nvdisasm it needs, or raises SkipError saying what is missing."""
        cuobjdump = self.cuobjdump if self._usable(self.cuobjdump) else shutil.which("cuobjdump")
        if not self._usable(cuobjdump):
            given = f" (KC_CUOBJDUMP={self.cuobjdump})" if self.cuobjdump else ""
            raise SkipError(f"cuobjdump not found{given}: install the CUDA toolkit's cuobjdump or "
                            "`python3 -m pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`, "
                            "then reconfigure with -DKC_CUOBJDUMP=<its path> (.ci/run does this)")
        candidates = [self.nvdisasm,
                      os.path.join(os.path.dirname(os.path.realpath(cuobjdump)), "nvdisasm"),
                      os.path.join(os.path.dirname(os.path.abspath(cuobjdump)), "nvdisasm"),
                      shutil.which("nvdisasm")]
        nvdisasm = next((c for c in candidates if self._usable(c)), None)
        if nvdisasm is None:
            raise SkipError(f"nvdisasm not found: cuobjdump ({cuobjdump}) needs it to print SASS; "
                            "install nvidia-cuda-nvdisasm or pass -DKC_NVDISASM=<its path>")
        self.cuobjdump, self.nvdisasm = cuobjdump, nvdisasm

    def dump_sass(self, path: str) -> str:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} does not exist: build first (cmake --build <dir>)")
        env = dict(os.environ, NVDISASM_PATH=os.path.dirname(os.path.abspath(self.nvdisasm)))
        result = subprocess.run([self.cuobjdump, "--dump-sass", path], capture_output=True,
                                text=True, env=env, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"cuobjdump --dump-sass {path} failed ({result.returncode}): "
                               f"{result.stderr.strip()}")
        return result.stdout


# --------------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------------

def built_archs(spec: str | None):
    """CMAKE_CUDA_ARCHITECTURES ("80;90a", "80-real;90a") -> {"sm_80", "sm_90a"}; None when
    absent or not a list of numbers (native, all): then the objects themselves decide."""
    if not spec:
        return None
    archs = set()
    for item in re.split(r"[;,\s]+", spec.strip()):
        match = re.fullmatch(r"(\d+[af]?)(-real|-virtual)?", item)
        if not match:
            return None
        if match.group(2) != "-virtual":
            archs.add(f"sm_{match.group(1)}")
    return archs or None


def _compare(check: Check, measured) -> bool:
    return _OPERATORS[check.operator](measured, check.value)


def evaluate(kernel: Kernel, contract: Contract) -> list:
    """The ways `kernel` breaks `contract`, one sentence each; empty if it holds."""
    problems = []
    for wanted in contract.require:
        if count(kernel.instructions, wanted) == 0:
            problems.append(f"required {wanted} is missing")
    for unwanted in contract.forbid:
        hits = [i for i in kernel.instructions if opcode_matches(i.opcode, unwanted)]
        if hits:
            what = ("local-memory spill" if unwanted.split(".")[0] in SPILL_OPCODES
                    else "forbidden instruction")
            shown = ", ".join(f"{i.opcode} at /*{i.address:04x}*/" for i in hits[:3])
            more = ", ..." if len(hits) > 3 else ""
            problems.append(f"{what}: {len(hits)} x {unwanted} ({shown}{more})")
    for check in contract.checks:
        if check.function == "kernels":
            continue  # per (object, arch): run_checks
        if check.loop:
            scope = hot_loop(kernel, check.loop)
            if not scope:
                problems.append(f"{check.text}: no loop contains {check.loop}")
                continue
            where = (f"the {check.loop} loop, /*{scope[0].address:04x}*/../*{scope[-1].address:04x}*/"
                     f", {len(scope)} instructions")
        else:
            scope, where = kernel.instructions, f"the kernel, {len(kernel.instructions)} instructions"
        if check.function == "size":
            measured, shown = len(scope), f"{len(scope)}"
        else:
            hits = count(scope, check.opcode)
            measured = hits if check.function == "count" else hits / max(1, len(scope))
            shown = f"{hits}" if check.function == "count" else f"{measured:.3f} ({hits} {check.opcode})"
        if not _compare(check, measured):
            problems.append(f"{check.text} does not hold: {shown} in {where}")
    return problems


def select_kernels(kernels: list, contract: Contract, arch: str) -> list:
    return [k for k in kernels if k.arch == arch
            and any(fnmatch.fnmatchcase(k.mangled, g) for g in contract.include)
            and not any(fnmatch.fnmatchcase(k.mangled, g) for g in contract.exclude)]


def run_checks(contracts: list, objects: list, tools: Tools, archs_built, out):
    """Holds the rows of the stages that have objects against those objects and prints every
    violation. Returns (violations, rows checked)."""
    by_stage = {}
    for obj in objects:
        by_stage.setdefault(obj.name.split("/", 1)[0], []).append(obj)
    # cuobjdump takes about a second an object: disassemble them side by side.
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(lambda obj: obj.kernels(tools), objects))
    present = {k.arch for obj in objects for k in obj.kernels(tools)}
    archs = archs_built if archs_built is not None else present
    violations, not_built, covered = [], [], set()
    rows_checked = pairs_checked = 0

    for contract in contracts:
        stage_objects = by_stage.get(contract.stage)
        if stage_objects is None:
            continue  # another stage's row: another test holds it
        where = f"{contract.origin}:{contract.line}"
        matched = [o for o in stage_objects if fnmatch.fnmatchcase(o.name, contract.object_pattern)]
        if not matched:
            violations.append(f"{where}: no object matches {contract.object_pattern} among the "
                              f"{len(stage_objects)} of {contract.stage} (renamed or removed? "
                              "update tests/sass/contracts.md)")
            continue
        covered.update(o.name for o in matched)
        # A row over several objects (a glob) may skip objects without such kernels (a rung whose
        # kernel lives in the previous rung's object); it must still match somewhere.
        several = any(ch in contract.object_pattern for ch in "*?[")
        row_checked = False
        for arch in contract.archs:
            if arch not in archs:
                not_built.append(f"{where} [{arch}]")
                continue
            arch_checked = False
            for obj in matched:
                kernels = select_kernels(obj.kernels(tools), contract, arch)
                for check in (c for c in contract.checks if c.function == "kernels"):
                    if not _compare(check, len(kernels)):
                        violations.append(f"{obj.name} [{arch}]: {check.text} does not hold: "
                                          f"'{contract.kernel_pattern}' matches {len(kernels)} "
                                          f"kernels ({where})")
                if not kernels:
                    if several:
                        continue
                    has_arch = any(k.arch == arch for k in obj.kernels(tools))
                    violations.append(
                        f"{obj.name} [{arch}]: no kernel matches '{contract.kernel_pattern}' ({where})"
                        if has_arch else
                        f"{obj.name} [{arch}]: the object has no {arch} code ({where})")
                    continue
                row_checked = arch_checked = True
                for kernel in kernels:
                    pairs_checked += 1
                    for problem in evaluate(kernel, contract):
                        violations.append(
                            f"{obj.name} [{arch}] {kernel.name}\n    {problem}\n"
                            f"    row {where}; claimed in: {contract.claim or '-'}\n"
                            f"    kernel: {kernel.mangled}")
            if several and not arch_checked:
                violations.append(f"{where}: no {arch} kernel of {contract.object_pattern} matches "
                                  f"'{contract.kernel_pattern}'")
        rows_checked += row_checked

    for stage_objects in by_stage.values():
        for obj in stage_objects:
            if obj.name not in covered and obj.kernels(tools):
                violations.append(f"{obj.name} has kernels but no row in tests/sass/contracts.md "
                                  "covers it (add one: at least `forbid LDL STL` where it claims "
                                  "no spills)")

    for violation in violations:
        print(f"VIOLATION: {violation}", file=out)
    if not_built:
        print(f"not checked, architecture not built here: {', '.join(not_built)}", file=out)
    print(f"SASS contracts of {', '.join(sorted(by_stage))}: {rows_checked} rows held against "
          f"{pairs_checked} (kernel, architecture) pairs; {len(violations)} violations", file=out)
    return len(violations), rows_checked


def report(objects: list, tools: Tools, out):
    """Per kernel: instructions, the ones the contracts talk about, and the FFMA/HMMA/HGMMA loop."""
    notable = ("LDGSTS", "LDSM", "HMMA", "HGMMA", "UTMALDG", "UTMASTG", "LDG.E.128", "STG.E.128",
               "LDS.128", "FFMA", "LDL", "STL")
    for obj in objects:
        for kernel in obj.kernels(tools):
            counts = " ".join(f"{w}={n}" for w in notable
                              if (n := count(kernel.instructions, w)))
            loops = []
            for key in ("FFMA", "HMMA", "HGMMA"):
                body = hot_loop(kernel, key)
                if body:
                    loops.append(f"{key} loop {count(body, key)}/{len(body)} = "
                                 f"{count(body, key) / len(body):.3f}")
            print(f"{obj.name} [{kernel.arch}] {kernel.name}\n    {kernel.mangled}\n"
                  f"    {len(kernel.instructions)} instructions: {counts or '-'}"
                  f"{' | ' + ', '.join(loops) if loops else ''}", file=out)


def _shown_path(path: str) -> str:
    """The table's path as a learner finds it: relative to the repository root if inside it."""
    root = Path(__file__).resolve().parents[2]
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = Path(__file__).resolve().parent
    parser.add_argument("--contracts", default=str(here / "contracts.md"))
    parser.add_argument("--objects", action="append", default=[], metavar="STAGE=LIST_FILE",
                        help="a file listing a stage's object files, one a line")
    parser.add_argument("--sass", action="append", default=[], metavar="NAME=SASS_FILE",
                        help="saved `cuobjdump --dump-sass` text standing in for object NAME")
    parser.add_argument("--cuobjdump", default=os.environ.get("KC_CUOBJDUMP"))
    parser.add_argument("--nvdisasm", default=os.environ.get("KC_NVDISASM"))
    parser.add_argument("--archs", help="CMAKE_CUDA_ARCHITECTURES of the build, e.g. '80;90a'")
    parser.add_argument("--report", action="store_true", help="print per-kernel statistics")
    args = parser.parse_args(argv)

    required = os.environ.get("KC_REQUIRE_SASS", "") not in ("", "0")
    try:
        contracts = ([] if args.report else
                     parse_contracts(Path(args.contracts).read_text(), _shown_path(args.contracts)))
        objects = []
        for spec in args.objects:
            stage, _, list_file = spec.partition("=")
            objects += read_object_list(stage, list_file)
        for spec in args.sass:
            name, _, sass_file = spec.partition("=")
            objects.append(ObjectFile(name, sass_file, is_text=True))
        if not objects:
            raise ValueError("no objects: pass --objects STAGE=LIST_FILE or --sass NAME=FILE")
        tools = Tools(args.cuobjdump, args.nvdisasm)
        if not all(o.is_text for o in objects):
            tools.resolve()
        if args.report:
            report(objects, tools, sys.stdout)
            return EXIT_OK
        violations, rows_checked = run_checks(contracts, objects, tools, built_archs(args.archs),
                                              sys.stdout)
    except SkipError as skip:
        print(f"SKIPPED: {skip}")
        if required:
            print("KC_REQUIRE_SASS is set, so a SASS check that cannot run is a failure")
            return EXIT_VIOLATION
        return EXIT_SKIP
    except (ValueError, OSError, RuntimeError) as error:
        print(f"ERROR: {error}")
        return EXIT_USAGE
    if violations:
        return EXIT_VIOLATION
    if rows_checked == 0:
        print("SKIPPED: no contract row applies to the architectures built here")
        return EXIT_VIOLATION if required else EXIT_SKIP
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

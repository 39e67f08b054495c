#!/usr/bin/env python3
"""Summarize a kc-trace timeline (bench/trace/kc_trace.cpp): where a CUDA graph's time goes.

A decode step replayed as a CUDA graph is a chain of kernels that overlap at their boundaries
(programmatic dependent launches). For the graph replayed most often (or --graph ID) this prints,
over its replays after the first --skip:

  * the step: median span (first kernel's start to last kernel's end), the sum of the kernels'
    durations, the time inside the span when no kernel ran, and the gap from one replay's end to
    the next one's start (the host's part);
  * each node in launch order: median duration; median start relative to the end of the node
    before it (negative: it started while that one was still running, as a programmatic dependent
    does, and its duration includes its wait); and its advance, how far its end moved the
    replay's last end — the time the step spent on it, which adds up to the span;
  * with --by-name, the same nodes added up by kernel name and grid (count a replay, durations and
    advances a replay, the advances' share of the span).

Kernels outside graphs (eager launches) are summed by name with --eager. With --against OTHER.csv
the most replayed graph of each file is added up by kernel name and grid and the two set side by
side (an A/B of one change: which kernels' advances moved, and by how much).

    python3 scripts/trace_summary.py trace.csv [--graph ID] [--skip N] [--by-name] [--eager]
        [--against OTHER.csv] [--markdown]

Times in microseconds. The figures are medians over replays, so the per-node medians need not add
up to the span's median.
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import statistics
import sys
from dataclasses import dataclass
from typing import Iterable, NamedTuple


@dataclass(frozen=True)
class Activity:
    kind: str
    name: str
    start: int
    end: int
    stream: int
    correlation: int
    graph: int
    node: int
    grid: tuple
    block: tuple
    registers: int

    @property
    def duration(self) -> int:
        return self.end - self.start


REQUIRED = ("kind", "name", "start_ns", "end_ns", "stream", "correlation", "graph", "graph_node",
            "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers")


def read_trace(lines: Iterable[str]) -> list[Activity]:
    reader = csv.DictReader(lines)
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"not a kc-trace CSV: no column {', '.join(missing)}")
    out = []
    for row_number, row in enumerate(reader, start=2):
        try:
            out.append(Activity(
                kind=row["kind"], name=row["name"], start=int(row["start_ns"]), end=int(row["end_ns"]),
                stream=int(row["stream"]), correlation=int(row["correlation"]), graph=int(row["graph"]),
                node=int(row["graph_node"]),
                grid=(int(row["grid_x"]), int(row["grid_y"]), int(row["grid_z"])),
                block=(int(row["block_x"]), int(row["block_y"]), int(row["block_z"])),
                registers=int(row["registers"])))
        except (TypeError, ValueError) as error:
            raise ValueError(f"line {row_number}: {error}") from None
    return out


def _split_top_level(text: str, separator: str) -> list[str]:
    """Split at `separator` outside <...> and (...)."""
    parts, depth, current, i = [], 0, "", 0
    while i < len(text):
        c = text[i]
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        if depth == 0 and text.startswith(separator, i):
            parts.append(current)
            current = ""
            i += len(separator)
            continue
        current += c
        i += 1
    parts.append(current)
    return parts


def short_name(name: str, width: int = 70) -> str:
    """`void kc::x::(anonymous namespace)::k<1, true>(Args)` -> `k<1, true>`, at most `width` chars."""
    text = name.strip()
    if text.endswith(")"):  # drop the parameter list: the last balanced (...) at the end
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            if text[i] == ")":
                depth += 1
            elif text[i] == "(":
                depth -= 1
                if depth == 0:
                    text = text[:i]
                    break
    words = _split_top_level(text, " ")
    text = words[-1] if words else text  # drop the return type
    text = _split_top_level(text, "::")[-1]
    return text if len(text) <= width else text[: width - 1] + "…"


def kernel_label(name: str, grid: tuple, width: int = 70) -> str:
    """`k<1, true> 512x1x1`: a kernel's short name and its grid, how kernels are told apart."""
    return f"{short_name(name, width)} {grid[0]}x{grid[1]}x{grid[2]}"


def replay_span(replay: list[Activity]) -> int:
    """From the replay's first start to its last end."""
    return max(a.end for a in replay) - min(a.start for a in replay)


def replays_by_graph(activities: list[Activity]) -> dict[int, list[list[Activity]]]:
    """Kernels of each graph, one list a replay (a replay's nodes share the launch's correlation id)."""
    launches: dict[tuple[int, int], list[Activity]] = collections.defaultdict(list)
    for a in activities:
        if a.graph != 0 and a.kind in ("kernel", "memcpy", "memset"):
            launches[(a.graph, a.correlation)].append(a)
    graphs: dict[int, list[list[Activity]]] = collections.defaultdict(list)
    for (graph, _), nodes in sorted(launches.items(), key=lambda item: min(a.start for a in item[1])):
        graphs[graph].append(sorted(nodes, key=lambda a: (a.start, a.end)))
    return graphs


def busy_time(nodes: list[Activity]) -> int:
    """The time inside the replay's span when at least one of its nodes ran."""
    total, current_start, current_end = 0, None, None
    for a in sorted(nodes, key=lambda a: a.start):
        if current_end is None or a.start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = a.start, a.end
        else:
            current_end = max(current_end, a.end)
    if current_end is not None:
        total += current_end - current_start
    return total


class NodeRow(NamedTuple):
    """One node of a graph, medians over its replays."""
    position: int
    name: str  # the kernel's full name, or "memcpy" / "memset"
    grid: tuple
    block: tuple
    registers: int
    duration_us: float
    after_previous_us: float | None  # start against the previous node's end; None for the first
    advance_us: float  # how far its end moved the replay's last end


@dataclass
class GraphSummary:
    graph: int
    replays: int
    nodes: int
    span_us: float
    kernel_sum_us: float
    idle_us: float
    between_us: float | None
    rows: list[NodeRow]


def summarize_graph(graph: int, replays: list[list[Activity]], skip: int) -> GraphSummary:
    used = replays[skip:] if len(replays) > skip else replays[-1:]
    shape = len(used[0])
    consistent = [r for r in used if len(r) == shape and [a.node for a in r] == [a.node for a in used[0]]]
    if not consistent:
        raise ValueError(f"graph {graph}: no two replays launch the same nodes in the same order")
    spans = [replay_span(r) for r in consistent]
    sums = [sum(a.duration for a in r) for r in consistent]
    idles = [span - busy_time(r) for span, r in zip(spans, consistent)]
    between = [b[0].start - max(a.end for a in a_) for a_, b in zip(used, used[1:])]
    # How far each node moved its replay's last end: its end against the latest end before it (the
    # first node: its duration). These add up to the span.
    advances = []
    for r in consistent:
        latest, advance = r[0].end, [r[0].duration]
        for a in r[1:]:
            advance.append(max(0, a.end - latest))
            latest = max(latest, a.end)
        advances.append(advance)
    rows = []
    for position in range(shape):
        first = consistent[0][position]
        after = [r[position].start - r[position - 1].end for r in consistent] if position else None
        rows.append(NodeRow(position, first.name if first.kind == "kernel" else first.kind, first.grid, first.block,
                            first.registers, statistics.median(r[position].duration for r in consistent) / 1e3,
                            statistics.median(after) / 1e3 if after else None,
                            statistics.median(a[position] for a in advances) / 1e3))
    return GraphSummary(graph=graph, replays=len(consistent), nodes=shape,
                        span_us=statistics.median(spans) / 1e3, kernel_sum_us=statistics.median(sums) / 1e3,
                        idle_us=statistics.median(idles) / 1e3,
                        between_us=statistics.median(between) / 1e3 if between else None, rows=rows)


def by_name(rows: list) -> list:
    """(name and grid, count a replay, median µs each, total µs a replay, total advance µs a replay)
    from a summary's rows, largest advance first."""
    groups: dict[tuple, list[tuple[float, float]]] = collections.defaultdict(list)
    for row in rows:
        groups[(row.name, row.grid, row.block)].append((row.duration_us, row.advance_us))
    out = [(kernel_label(name, grid), len(d), statistics.median(x for x, _ in d), sum(x for x, _ in d),
            sum(y for _, y in d)) for (name, grid, block), d in groups.items()]
    return sorted(out, key=lambda row: -row[4])


def eager_summary(activities: list[Activity]) -> list:
    groups: dict[str, list[int]] = collections.defaultdict(list)
    for a in activities:
        if a.graph == 0 and a.kind == "kernel":
            groups[short_name(a.name)].append(a.duration)
    out = [(name, len(d), statistics.median(d) / 1e3, sum(d) / 1e3) for name, d in groups.items()]
    return sorted(out, key=lambda row: -row[3])


def _table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    fmt = lambda row: "  ".join(str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt(header)] + [fmt(row) for row in rows])


def render(summary: GraphSummary, names: bool, markdown: bool) -> str:
    out = [f"graph {summary.graph}: {summary.replays} replays of {summary.nodes} nodes; median span "
           f"{summary.span_us:.1f} us, kernels' durations add up to {summary.kernel_sum_us:.1f} us, "
           f"no kernel running for {summary.idle_us:.1f} us of the span"
           + (f"; {summary.between_us:.1f} us from one replay's end to the next one's start"
              if summary.between_us is not None else ""), ""]
    if names:
        rows = [[name, str(count), f"{each:.2f}", f"{total:.1f}", f"{advance:.1f}",
                 f"{100 * advance / summary.span_us:.1f}%"]
                for name, count, each, total, advance in by_name(summary.rows)]
        out.append(_table(["kernel, grid", "a replay", "us each", "us a replay", "advance a replay", "of the span"],
                          rows, markdown))
    else:
        rows = [[str(n.position), short_name(n.name), "x".join(map(str, n.grid)), "x".join(map(str, n.block)),
                 str(n.registers), f"{n.duration_us:.2f}",
                 "" if n.after_previous_us is None else f"{n.after_previous_us:+.2f}", f"{n.advance_us:.2f}"]
                for n in summary.rows]
        out.append(_table(["#", "kernel", "grid", "block", "regs", "us", "start - previous end", "advance"], rows,
                          markdown))
    return "\n".join(out)


def against(summary: GraphSummary, other: GraphSummary) -> list:
    """(name and grid, count a replay, advance a replay here, there, difference) over the kernels of
    either summary, largest difference first; a kernel missing from one side counts 0 there."""
    here = {name: (count, advance) for name, count, _, _, advance in by_name(summary.rows)}
    there = {name: (count, advance) for name, count, _, _, advance in by_name(other.rows)}
    rows = []
    for name in sorted(set(here) | set(there)):
        count = here.get(name, there.get(name))[0]
        a, b = here.get(name, (0, 0.0))[1], there.get(name, (0, 0.0))[1]
        rows.append((name, count, a, b, a - b))
    return sorted(rows, key=lambda row: -abs(row[4]))


def render_against(summary: GraphSummary, other: GraphSummary, markdown: bool) -> str:
    out = [f"span {summary.span_us:.1f} us here, {other.span_us:.1f} us there "
           f"({summary.span_us - other.span_us:+.1f} us, {100 * (summary.span_us / other.span_us - 1):+.1f}%); "
           f"{summary.replays} and {other.replays} replays", ""]
    rows = [[name, str(count), f"{a:.1f}", f"{b:.1f}", f"{d:+.1f}"] for name, count, a, b, d in against(summary, other)]
    out.append(_table(["kernel, grid", "a replay", "advance here", "there", "difference"], rows, markdown))
    return "\n".join(out)


def read_trace_file(path: str) -> list[Activity]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        return read_trace(f)


def graph_summary(activities: list[Activity], graph: int | None, skip: int) -> GraphSummary:
    """The summary of graph `graph` (default: the most replayed); ValueError says why not."""
    graphs = replays_by_graph(activities)
    if not graphs:
        raise ValueError("no kernel ran inside a CUDA graph (try --eager)")
    chosen = graph if graph is not None else max(graphs, key=lambda g: len(graphs[g]))
    if chosen not in graphs:
        raise ValueError(f"no graph {chosen}; graphs: "
                         + ", ".join(f"{g} ({len(r)} replays)" for g, r in sorted(graphs.items())))
    return summarize_graph(chosen, graphs[chosen], skip)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="the CSV kc-trace wrote (KC_TRACE_OUT), or it gzipped (.gz)")
    parser.add_argument("--graph", type=int, help="the graph id to summarize (default: the most replayed)")
    parser.add_argument("--skip", type=int, default=2, help="replays to leave out at the start (warm-up)")
    parser.add_argument("--by-name", action="store_true", help="nodes added up by kernel name and grid")
    parser.add_argument("--eager", action="store_true", help="kernels launched outside graphs, by name")
    parser.add_argument("--against", metavar="OTHER", help="a second trace: the two graphs side by side, by name")
    parser.add_argument("--markdown", action="store_true", help="tables in Markdown")
    args = parser.parse_args(argv)
    path = args.trace
    try:
        activities = read_trace_file(path)
        if args.eager:
            rows = [[name, str(count), f"{each:.2f}", f"{total:.1f}"]
                    for name, count, each, total in eager_summary(activities)]
            print(_table(["kernel", "launches", "us each (median)", "us in all"], rows, args.markdown))
            return 0
        here = graph_summary(activities, args.graph, args.skip)
        if not args.against:
            print(render(here, args.by_name, args.markdown))
            return 0
        path = args.against
        there = graph_summary(read_trace_file(path), None, args.skip)
        print(render_against(here, there, args.markdown))
    except (OSError, ValueError) as error:
        print(f"trace_summary: {path}: {error}", file=sys.stderr)
        return 2
    return 0

if __name__ == "__main__":
    sys.exit(main())

"""The Markdown tables ``compare.py`` prints (metric keys: ``measure.py``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from tests.benchmarks.measure import Sizes

Results = Mapping[str, Mapping[str, float]]  # server key → metric → median

TASK_ROWS = (
    ("task_p50", "task call → result p50 (ms), {latency} sequential"),
    ("task_p90", "task call → result p90 (ms)"),
    ("tasks_per_s", "{tasks} tasks, {in_flight} in flight (tasks/s)"),
    ("polls_per_task", "  tasks/get requests per task in that run"),
    ("cpu_per_task", "server CPU per task (ms), HTTP + workers"),
    ("http_cpu_per_task", "  HTTP process (ms)"),
    ("worker_cpu_per_task", "  worker processes, with their forked children (ms)"),
    ("children_cpu_per_task", "    of which forked children (ms)"),
    ("redis_cpu_per_task", "Redis CPU per task (ms)"),
    ("client_cpu_per_task", "client CPU per task (ms), this driver"),
    ("question_p50", "question round trip in a task p50 (ms), {questions} sequential"),
    ("get_p50", "tasks/get p50 on a completed task (ms)"),
)
PLAIN_ROWS = (
    ("plain_per_s", "plain tools/call add, {in_flight} in flight (calls/s)"),
    ("plain_p50", "plain tools/call add p50 (ms), sequential"),
    ("plain_cpu", "server CPU per plain call (ms), HTTP process"),
    ("client_cpu_per_call", "client CPU per plain call (ms), this driver"),
)
IDLE_ROW = ("idle_cpu", "idle server CPU (ms per s), all processes")
MISSING = "—"


def number(value: float | None) -> str:
    if value is None or math.isnan(value):
        return MISSING
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or math.isnan(ours) or math.isnan(theirs) or not theirs:
        return MISSING
    return f"{ours / theirs:.2f}x"


def render(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table, columns padded (the first left-aligned, the others right)."""
    widths = [max(len(row[i]) for row in [columns, *rows]) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * widths[0], *("-" * (width - 1) + ":" for width in widths[1:])]
    return [line(columns), line(rule), *(line(row) for row in rows)]


def side_by_side(
    results: Results, sizes: Sizes, rows: Sequence[tuple[str, str]], theirs: str, title: str
) -> list[str]:
    """``theirs`` beside mcp_tasks, with the ratio mcp_tasks / theirs."""
    mine, other = results.get("ours", {}), results.get(theirs, {})
    table = [
        [
            label.format(**asdict(sizes)),
            number(other.get(key)),
            number(mine.get(key)),
            ratio(mine.get(key), other.get(key)),
        ]
        for key, label in rows
    ]
    return render(["metric", title, "mcp_tasks", "ratio"], table)


def task_table(results: Results, sizes: Sizes) -> list[str]:
    rows = (*TASK_ROWS, *PLAIN_ROWS, IDLE_ROW)
    return [
        *side_by_side(results, sizes, rows, "peer", "fastmcp-tasks"),
        "ratio = mcp_tasks / fastmcp-tasks (for times and CPU lower is better, "
        "for rates higher is better)",
    ]


def observed_table(results: Results, sizes: Sizes) -> list[str]:
    """The cost of ``TRACING`` and ``METRICS``: mcp_tasks with them on (``--observe``: both,
    or one; the setup line says) beside both off."""
    off, on = results.get("ours", {}), results.get("observed", {})
    rows = [
        [
            label.format(**asdict(sizes)),
            number(off.get(key)),
            number(on.get(key)),
            ratio(on.get(key), off.get(key)),
        ]
        for key, label in (*TASK_ROWS, *PLAIN_ROWS, IDLE_ROW)
        if key in off or key in on
    ]
    return [
        *render(["metric", "mcp_tasks", "observed", "on / off"], rows),
        "on / off = mcp_tasks observed (TRACING and/or METRICS on, as the setup line says) "
        "/ both off: the cost of observing",
    ]


def sdk_table(results: Results, sizes: Sizes) -> list[str]:
    return [
        *side_by_side(results, sizes, (*PLAIN_ROWS, IDLE_ROW), "sdk", "SDK MCPServer"),
        "ratio = mcp_tasks / SDK MCPServer",
    ]


def single_table(values: Mapping[str, float], sizes: Sizes, title: str) -> list[str]:
    rows = [
        [label.format(**asdict(sizes)), number(values[key])]
        for key, label in (*TASK_ROWS, *PLAIN_ROWS, IDLE_ROW)
        if not math.isnan(values.get(key, math.nan))
    ]
    return render(["metric", title], rows)

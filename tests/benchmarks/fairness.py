"""``compare.py fairness``: does one caller's backlog delay another caller's tasks?

Principal A (``Bearer valid-flood``) floods the server with ``bench_sleep`` tasks (0.5 s
each); principal B (``Bearer valid-victim``) starts a few trivial tasks at once
(``bench_sleep(0)``, which returns the time it ran), alone first, then again as soon as
every one of A's tasks is created (the flood's backlog still waiting for the workers). Each
of B's tasks is timed from its ``tools/call`` to its result, on the poll schedule of
``bench_client.py``, and that time is split where the tool ran: before, the call, the queue
and a worker's intake; after, the result's way back and the client's polling. mcp_tasks queues task jobs per principal and
gives free worker slots to the principals in turn (``FAIR_SHARE``), so B should wait for a
slot, not for A's backlog; the peer (fastmcp-tasks) has one queue, first in first out, and
no authentication (it ignores the tokens).

No task is stopped to make room: B's first task starts when one of A's ends (a slot frees),
and as A's tasks all last the same and start in bursts, the slots tend to free in waves
0.5 s apart, so B's wait under the flood depends on when in that cycle it arrives. The
report shows when the first of A's tasks ended after B started.

After B's last task: how many of A's tasks had finished by then (each ``bench_sleep``
returns the time it woke; A's tasks are read in the order they were created until a stretch
of them has none). The flood is not drained: ``compare.py`` stops the stack (and its private
Redis) after each run. With a shared ``--redis-url``, A's tasks still queued on mcp_tasks are
cancelled first, so the next run does not inherit them; the peer's queue is its own (a fresh
Docket name per start, its keys deleted afterwards).

One principal's 3,000 tasks are past mcp_tasks' default quota (``MAX_ACTIVE_TASKS``, 1,000
per principal), so its stack runs without the quota here (:data:`OURS_ENV`; the setup line
shows it); every other setting keeps its default.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tests.benchmarks.bench_client import (
    TERMINAL,
    BenchClient,
    BenchError,
    concurrent,
    is_completed,
    percentile,
    text_of,
)
from tests.benchmarks.measure import warm_up
from tests.benchmarks.raw_http import Response
from tests.benchmarks.report import MISSING, number, ratio, render
from tests.benchmarks.stacks import Stack

FLOOD_TOKEN = "valid-flood"  # principal A: client:client-flood:flood
VICTIM_TOKEN = "valid-victim"  # principal B: client:client-victim:victim
#: The settings of the mcp_tasks stack: no quota on the flood (the module docstring).
OURS_ENV = {"MCP_TASKS_TEST_MAX_ACTIVE_TASKS": "none"}
#: A's tasks looked at per request batch when counting the finished ones.
SCAN_CHUNK = 200

Progress = Callable[[str], None]
Results = Mapping[str, Mapping[str, float]]  # server key → metric → median of the rounds


@dataclass(frozen=True)
class Flood:
    """What one run does (the issue's numbers; :meth:`quick` for CI)."""

    tasks: int = 3000  # A's bench_sleep tasks
    seconds: float = 0.5  # each one's sleep
    in_flight: int = 50  # A's submissions at once
    victims: int = 10  # B's trivial tasks, started at once

    @classmethod
    def quick(cls) -> Flood:
        return cls(tasks=200, victims=5)


class PrincipalClient(BenchClient):
    """A :class:`BenchClient` calling as one principal: a bearer token on every request."""

    def __init__(self, mcp_url: str, token: str, *, in_flight: int) -> None:
        super().__init__(mcp_url, in_flight=in_flight)
        self.authorization = f"Bearer {token}"

    async def post(self, body: dict[str, Any], headers: dict[str, str]) -> Response:
        return await super().post(body, {**headers, "Authorization": self.authorization})


# -- one run -----------------------------------------------------------------------------------


async def measure_fairness(
    stack: Stack, flood: Flood, progress: Progress, *, cancel_rest: bool = False
) -> dict[str, float]:
    """B alone, A's flood, B under it, on one freshly started stack; the metrics (ms, s,
    counts). The flood is left running (``cancel_rest``: A's unfinished tasks cancelled)."""
    victim = PrincipalClient(stack.mcp_url, VICTIM_TOKEN, in_flight=flood.victims)
    flooder = PrincipalClient(stack.mcp_url, FLOOD_TOKEN, in_flight=flood.in_flight)
    try:
        await warm_up(stack, victim)
        for _ in range(3):
            await flooder.poll(await flooder.start("bench_sleep", {"seconds": 0}), is_completed)
        await victim_batch(victim, flood.victims)  # every connection of B's pool, unmeasured
        alone, _ = await victim_batch(victim, flood.victims)
        progress(f"  B alone: p50 {percentile(alone.took, 0.5) * 1000:.1f} ms")
        flood_started = time.time()
        task_ids, submitting = await submit_flood(flooder, flood)
        progress(f"  A's {flood.tasks:,} tasks created in {submitting:.1f} s")
        victims_started = time.time()
        flooded, last_done = await victim_batch(victim, flood.victims)
        progress(f"  B under the flood: p50 {percentile(flooded.took, 0.5) * 1000:.1f} ms")
        woke = await woken_by(flooder, task_ids, last_done)
        stack.check_alive()
        if cancel_rest:
            await cancel_unfinished(flooder, task_ids, flood.in_flight)
    finally:
        await victim.aclose()
        await flooder.aclose()
    finished = [moment for moment in woke if moment <= last_done]
    freed = [moment - victims_started for moment in finished if moment >= victims_started]
    return {
        **alone.metrics("alone"),
        **flooded.metrics("flood"),
        "first_freed": min(freed) * 1000 if freed else math.nan,
        "submit_s": submitting,
        "finished": len(finished),
        "finished_per_s": len(finished) / (last_done - flood_started),
    }


@dataclass
class VictimTimes:
    """Seconds each of B's tasks took: call → result seen (``took``), split where the tool
    ran into call → the tool ran (``ran``) and the tool ran → its result seen (``seen``)."""

    took: list[float]
    ran: list[float]
    seen: list[float]

    def metrics(self, prefix: str) -> dict[str, float]:
        """p50 and p95 of ``took`` and the p50 of its two parts, in ms."""
        return {
            f"{prefix}_p50": percentile(self.took, 0.5) * 1000,
            f"{prefix}_p95": percentile(self.took, 0.95) * 1000,
            f"{prefix}_ran_p50": percentile(self.ran, 0.5) * 1000,
            f"{prefix}_seen_p50": percentile(self.seen, 0.5) * 1000,
        }


async def victim_batch(client: BenchClient, count: int) -> tuple[VictimTimes, float]:
    """``count`` of B's trivial tasks started at once: their times, and the wall-clock time
    the last one finished."""

    async def one(n: int) -> tuple[float, float, float]:
        called_at, started = time.time(), time.perf_counter()
        task = await client.poll(await client.start("bench_sleep", {"seconds": 0}), is_completed)
        took, seen_at = time.perf_counter() - started, time.time()
        ran_at = woke_at(task)
        return took, ran_at - called_at, seen_at - ran_at

    samples = await asyncio.gather(*(one(n) for n in range(count)))
    took, ran, seen = (list(column) for column in zip(*samples, strict=True))
    return VictimTimes(took, ran, seen), time.time()


async def submit_flood(client: BenchClient, flood: Flood) -> tuple[list[str], float]:
    """Create A's tasks, ``flood.in_flight`` at once; their ids (in the order they were
    sent) and the seconds it took until the last one was created."""
    task_ids = [""] * flood.tasks

    async def one(i: int) -> None:
        created = await client.start("bench_sleep", {"seconds": flood.seconds})
        task_ids[i] = str(created["taskId"])

    seconds = await concurrent(one, flood.tasks, flood.in_flight)
    return task_ids, seconds


async def woken_by(client: BenchClient, task_ids: Sequence[str], moment: float) -> list[float]:
    """When each of ``task_ids`` that has completed woke (``bench_sleep`` returns it), read
    :data:`SCAN_CHUNK` at a time in the order they were created until a chunk has none that
    woke by ``moment`` (``time.time()``): the workers take one principal's tasks first in
    first out. ``lastUpdatedAt`` would not do: fastmcp-tasks answers the time of the
    ``tasks/get`` there."""
    woke: list[float] = []
    for start in range(0, len(task_ids), SCAN_CHUNK):
        tasks = await asyncio.gather(*(client.get(i) for i in task_ids[start : start + SCAN_CHUNK]))
        chunk = [woke_at(task) for task in tasks if is_completed(task)]
        woke += chunk
        if not any(at <= moment for at in chunk):
            break
    return woke


def woke_at(task: Mapping[str, Any]) -> float:
    """The result of a completed ``bench_sleep`` task: the ``time.time()`` it woke."""
    try:
        return float(text_of(task["result"]))
    except (KeyError, ValueError) as exc:
        raise BenchError(f"unexpected bench_sleep task {task}") from exc


async def cancel_unfinished(client: BenchClient, task_ids: Sequence[str], in_flight: int) -> None:
    """``tasks/cancel`` each of ``task_ids`` that has not ended (a shared Redis keeps no
    backlog for the next run)."""

    async def one(i: int) -> None:
        task_id = task_ids[i]
        if (await client.get(task_id))["status"] not in TERMINAL:
            await client.request("tasks/cancel", {"taskId": task_id}, task_id)

    await concurrent(one, len(task_ids), in_flight)


def round_summary(values: Mapping[str, float]) -> str:
    """One run's headline figures, for the progress lines."""
    return (
        f"B p50 {values['alone_p50']:.1f} ms alone, {values['flood_p50']:.1f} ms under the "
        f"flood (p95 {values['flood_p95']:.1f}; call -> ran {values['flood_ran_p50']:.1f}, "
        f"ran -> seen {values['flood_seen_p50']:.1f}); a slot freed {values['first_freed']:.0f} ms "
        f"after B started; {values['finished']:.0f} of A's done by then"
    )


def medians(samples: Mapping[str, Sequence[Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """Per server, the median of each metric over its runs (runs without it left out)."""
    return {
        key: {metric: median_of([run[metric] for run in runs]) for metric in runs[0]}
        for key, runs in samples.items()
        if runs
    }


def median_of(values: Sequence[float]) -> float:
    present = [value for value in values if not math.isnan(value)]
    return statistics.median(present) if present else math.nan


# -- the report --------------------------------------------------------------------------------


#: The table's rows: metric key, label (formatted with the :class:`Flood`'s fields).
ROWS = (
    ("alone_p50", "B's {victims} trivial tasks at once, alone: p50 (ms)"),
    ("alone_p95", "  p95 (ms)"),
    ("alone_ran_p50", "  call -> the tool ran (create, queue, intake): p50 (ms)"),
    ("alone_seen_p50", "  the tool ran -> its result seen (result, polling): p50 (ms)"),
    ("flood_p50", "B's {victims} trivial tasks at once, under A's flood: p50 (ms)"),
    ("flood_p95", "  p95 (ms)"),
    ("flood_ran_p50", "  call -> the tool ran (create, queue, intake): p50 (ms)"),
    ("flood_seen_p50", "  the tool ran -> its result seen (result, polling): p50 (ms)"),
    ("slowdown_p50", "  p50 under the flood / p50 alone (x)"),
    ("first_freed", "  first of A's tasks to end after B started, after (ms): a slot frees"),
    (
        "submit_s",
        "A's flood: {tasks:,} x bench_sleep({seconds:g}), {in_flight} in flight, all created in (s)",
    ),
    ("finished", "  A's tasks completed when B's last one completed"),
    ("finished_per_s", "  A's tasks completed per second until then"),
    ("slots", "worker task slots (workers x concurrency)"),
)

COUNTS = {"finished", "slots"}


@dataclass(frozen=True)
class Target:
    """The issue's targets for B under the flood, from B's p50 alone (ms)."""

    p50: float
    p95: float

    @classmethod
    def of(cls, alone_p50: float) -> Target:
        return cls(max(3 * alone_p50, alone_p50 + 250), alone_p50 + 1000)


def report(results: Results, flood: Flood) -> list[str]:
    """The side-by-side table (:data:`ROWS`), then the targets of each server."""
    mine, theirs = results.get("ours", {}), results.get("peer", {})
    table = [
        [
            label.format(**asdict(flood)),
            shown(key, theirs.get(key)),
            shown(key, mine.get(key)),
            ratio(mine.get(key), theirs.get(key)),
        ]
        for key, label in ROWS
    ]
    lines = [
        *render(["metric", "fastmcp-tasks", "mcp_tasks", "ratio"], table),
        "ratio = mcp_tasks / fastmcp-tasks (lower is better for times; A's completed tasks "
        "show the workers were busy with the flood meanwhile)",
        "",
    ]
    titles = {"ours": "mcp_tasks", "peer": "fastmcp-tasks (no fair share; for comparison)"}
    for key in ("ours", "peer"):
        if key in results:
            lines += target_lines(titles[key], results[key])
    return lines


def shown(key: str, value: float | None) -> str:
    """A table cell: counts as integers, the rest as :func:`report.number` shows them."""
    if key in COUNTS and value is not None and not math.isnan(value):
        return f"{value:,.0f}"
    return number(value)


def target_lines(title: str, values: Mapping[str, float]) -> list[str]:
    """``B p50 under the flood ≤ max(3 x p50 alone, p50 alone + 250 ms)`` and
    ``B p95 under the flood ≤ p50 alone + 1 s``, each with PASS or FAIL."""
    alone = values["alone_p50"]
    target = Target.of(alone)
    p50, p95 = values["flood_p50"], values["flood_p95"]
    return [
        f"target, {title}: B p50 under the flood {number(p50)} ms ≤ max(3 x {number(alone)}, "
        f"{number(alone)} + 250) = {number(target.p50)} ms: {verdict(p50, target.p50)}",
        f"target, {title}: B p95 under the flood {number(p95)} ms ≤ {number(alone)} + 1000 = "
        f"{number(target.p95)} ms: {verdict(p95, target.p95)}",
    ]


def verdict(value: float, limit: float) -> str:
    if math.isnan(value):
        return MISSING
    return "PASS" if value <= limit else "FAIL"


def with_derived(values: Mapping[str, float], slots: int) -> dict[str, float]:
    """``values`` plus the slowdown ratio and the stack's slot count."""
    return {
        **values,
        "slowdown_p50": values["flood_p50"] / values["alone_p50"],
        "slots": float(slots),
    }

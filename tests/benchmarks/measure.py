"""One round of measurements of one server (``compare.py`` runs several, interleaved).

Metrics (keys of the dict :func:`measure_stack` returns; times in ms):

- ``task_p50``/``task_p90``: ``trivial_task`` call → result, sequential;
- ``tasks_per_s``: ``sizes.tasks`` trivial tasks with ``sizes.in_flight`` in flight;
- ``polls_per_task``: ``tasks/get`` requests per task in that run (the schedule and the
  server's ``pollIntervalMs`` decide it);
- ``cpu_per_task``: CPU of the HTTP and worker processes over that run, per task
  (``/proc/<pid>/stat``, with the children the workers reaped: a forking worker's
  work-horses); its parts ``http_cpu_per_task``, ``worker_cpu_per_task`` and, of the latter,
  ``children_cpu_per_task``; ``redis_cpu_per_task``: the private Redis's;
  ``client_cpu_per_task``: this driver's;
- ``question_p50``: ``bench_ask`` call → ``input_required`` → ``tasks/update`` → result;
- ``get_p50``: ``tasks/get`` of a completed task;
- ``plain_per_s``/``plain_cpu``: plain ``add`` calls with ``sizes.in_flight`` in flight, and
  the HTTP process's CPU per call (``client_cpu_per_call``: the driver's);
  ``plain_p50``: sequential;
- ``idle_cpu``: CPU of all the server's processes per second of doing nothing.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path

from tests.benchmarks.bench_client import (
    BenchClient,
    BenchError,
    concurrent,
    percentile,
    sequential,
)
from tests.benchmarks.stacks import Stack, cpu_seconds


@dataclass(frozen=True)
class Sizes:
    """How much each measurement does (the long mode; :meth:`quick` for CI)."""

    latency: int = 100  # sequential trivial tasks
    questions: int = 30  # sequential question round trips
    gets: int = 200  # sequential tasks/get
    plain: int = 200  # sequential plain calls
    tasks: int = 200  # trivial tasks for the throughput
    calls: int = 1000  # plain calls for the throughput
    in_flight: int = 100
    idle: float = 2.0  # seconds of idling for idle_cpu
    parked: int = 1000
    scaling: tuple[int, ...] = (1_000, 100_000, 1_000_000)

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            latency=10,
            questions=5,
            gets=20,
            plain=20,
            tasks=40,
            calls=100,
            in_flight=20,
            idle=0.3,
            parked=20,
            scaling=(1_000, 10_000),
        )


async def warm_up(stack: Stack, client: BenchClient) -> None:
    """A few of each request (imports, connections, caches), and, for the peer, proof
    that its HTTP process runs no tasks."""
    await sequential(client.add, 10)
    if not stack.serves_tasks:
        return
    await sequential(client.trivial_task, 3)
    await client.question_round_trip()
    if stack.key == "peer":
        pid = await client.task_pid()
        if pid not in stack.pids()[1:]:
            raise BenchError(f"a peer task ran in process {pid}, not in a worker {stack.pids()}")


async def measure_stack(
    stack: Stack, client: BenchClient, sizes: Sizes, redis_pid: int | None
) -> dict[str, float]:
    results: dict[str, float] = {}
    if stack.serves_tasks:
        results |= await measure_tasks(stack, client, sizes, redis_pid)
    results |= await measure_plain(stack, client, sizes)
    results["idle_cpu"] = await idle_cpu(stack, sizes.idle)
    stack.check_alive()
    return results


async def measure_tasks(
    stack: Stack, client: BenchClient, sizes: Sizes, redis_pid: int | None
) -> dict[str, float]:
    latencies = await sequential(client.trivial_task, sizes.latency)
    polls = client.sent["tasks/get"]
    cpu, seconds = await metered(
        stack, redis_pid, concurrent(client.trivial_task, sizes.tasks, sizes.in_flight)
    )
    polls = client.sent["tasks/get"] - polls
    questions = await sequential(client.question_round_trip, sizes.questions)
    task_id = await client.completed_task()
    get_latencies = await sequential(lambda _: client.get(task_id), sizes.gets)
    if not stack.workers:  # embedded: the HTTP process runs the tasks
        del cpu["worker"], cpu["children"]
    per_task = {f"{part}_cpu_per_task": used * 1000 / sizes.tasks for part, used in cpu.items()}
    return per_task | {
        "task_p50": percentile(latencies, 0.5) * 1000,
        "task_p90": percentile(latencies, 0.9) * 1000,
        "tasks_per_s": sizes.tasks / seconds,
        "polls_per_task": polls / sizes.tasks,
        "cpu_per_task": (cpu["http"] + cpu.get("worker", 0)) * 1000 / sizes.tasks,
        "question_p50": percentile(questions, 0.5) * 1000,
        "get_p50": percentile(get_latencies, 0.5) * 1000,
    }


async def measure_plain(stack: Stack, client: BenchClient, sizes: Sizes) -> dict[str, float]:
    latencies = await sequential(client.add, sizes.plain)
    cpu, seconds = await metered(stack, None, concurrent(client.add, sizes.calls, sizes.in_flight))
    return {
        "plain_p50": percentile(latencies, 0.5) * 1000,
        "plain_per_s": sizes.calls / seconds,
        "plain_cpu": cpu["http"] * 1000 / sizes.calls,
        "client_cpu_per_call": cpu["client"] * 1000 / sizes.calls,
    }


def cpu_sample(stack: Stack, redis_pid: int | None) -> dict[str, float]:
    """CPU seconds so far: of the HTTP process, of the workers (with the children they
    reaped), of those children alone, of the private Redis, of this client."""
    return {
        "http": cpu_seconds(stack.pids()[0]),
        "worker": sum(cpu_seconds(pid) for pid in stack.pids()[1:]),
        "children": sum(cpu_seconds(pid, reaped_only=True) for pid in stack.pids()[1:]),
        "redis": redis_cpu(redis_pid),
        "client": time.process_time(),
    }


async def metered(
    stack: Stack, redis_pid: int | None, run: Awaitable[float]
) -> tuple[dict[str, float], float]:
    """The CPU seconds :func:`cpu_sample` counts that ``run`` used, and what it returned."""
    before = cpu_sample(stack, redis_pid)
    result = await run
    after = cpu_sample(stack, redis_pid)
    return {part: after[part] - before[part] for part in before}, result


async def idle_cpu(stack: Stack, seconds: float) -> float:
    """Milliseconds of CPU per second the server's processes use while nobody calls."""
    before = stack.cpu_seconds()
    await asyncio.sleep(seconds)
    return (stack.cpu_seconds() - before) / seconds * 1000


def redis_cpu(pid: int | None) -> float:
    """A private Redis's CPU seconds (NaN for a Redis we did not start)."""
    if pid is None or not Path(f"/proc/{pid}").exists():
        return math.nan
    return cpu_seconds(pid)

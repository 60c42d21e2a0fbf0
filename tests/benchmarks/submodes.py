"""The sub-modes of ``compare.py`` the engine work needs (mcp_tasks only).

- ``tasks-get-scaling``: ``tasks/get`` p50 of one completed task while the task table holds
  1k, 100k and 1M rows. The filler rows are copies of that task's row with other ids and
  other principals, bulk-inserted by one ``INSERT … SELECT … generate_series`` each (every
  column is copied as it is, so the filler follows the schema);
- ``parked``: N tasks waiting on a question (the server's ``INPUT_HOLD_WINDOW`` is short, so
  the workers let go of them); the workers' memory (RSS, PSS) before and after, and the
  latency of an unrelated trivial task with them parked against without: right after
  parking (with ``--hold-window`` longer than the parking, while every one of them waits in
  its hold window) and once the workers let go of them;
- ``handles``: a trivial task called by a client with the tasks extension (create, then
  ``tasks/get`` on the schedule) and by one without it (one call that waits for the task):
  latency, requests, Redis commands and CPU per task, side by side. The window's wait is
  the same watch ``tasks/get`` uses; it should add no Redis command and no worker CPU;
- ``questions``: where a question round trip's time goes (``bench_ask``: call →
  ``input_required`` → ``tasks/update`` → result), and a trivial task's (the task p50 of
  ``compare``), phase by phase, from the client's clock and the timestamps the task's rows
  keep (created, claimed, question recorded, answered, finished; one machine, one clock).
  PostgreSQL only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tests.benchmarks.bench_client import (
    ANSWER,
    BenchClient,
    BenchError,
    concurrent,
    is_asking,
    is_completed,
    percentile,
    sequential,
    text_of,
)
from tests.benchmarks.measure import Sizes, warm_up
from tests.benchmarks.report import number, render
from tests.benchmarks.stacks import Stack, memory_bytes
from tests.support.worker_fixtures import db_execute, db_rows, job_ids

TASK_TABLE = "mcp_tasks_task"
#: Columns the filler rows do not copy from the template row.
FILLER_COLUMNS = {
    "id": "'bench-filler-' || g",
    "principal_scope": "'bench-filler-principal-' || mod(g, 1000)",
}
MB = 1024 * 1024


# -- tasks-get-scaling ---------------------------------------------------------------------------


def fill_tasks(database_url: str, template_id: str, total: int) -> None:
    """Copy task ``template_id`` until the task table holds ``total`` rows; ANALYZE."""
    count = int(db_rows(database_url, f"SELECT COUNT(*) FROM {TASK_TABLE}")[0][0])
    if count < total:
        columns = task_columns(database_url)
        values = ", ".join(FILLER_COLUMNS.get(column, f't."{column}"') for column in columns)
        names = ", ".join(f'"{column}"' for column in columns)
        db_execute(
            database_url,
            f"INSERT INTO {TASK_TABLE} ({names}) SELECT {values} FROM {TASK_TABLE} t "
            "CROSS JOIN generate_series(%s::bigint, %s::bigint) AS g WHERE t.id = %s",
            (count + 1, total, template_id),
        )
    db_execute(database_url, f"ANALYZE {TASK_TABLE}")


def task_columns(database_url: str) -> list[str]:
    rows = db_rows(
        database_url,
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
        (TASK_TABLE,),
    )
    columns = [str(row[0]) for row in rows]
    if missing := set(FILLER_COLUMNS) - set(columns):
        raise BenchError(f"{TASK_TABLE} has no column {missing}: update FILLER_COLUMNS")
    return columns


async def run_scaling(stack: Stack, sizes: Sizes, database_url: str) -> list[str]:
    client = BenchClient(stack.mcp_url, in_flight=sizes.in_flight)
    rows: list[list[str]] = []
    p50s: list[float] = []
    try:
        await warm_up(stack, client)
        task_id = await client.completed_task()
        await sequential(lambda _: client.get(task_id), 20)  # warm, not measured
        for total in sizes.scaling:
            started = time.monotonic()
            await asyncio.to_thread(fill_tasks, database_url, task_id, total)
            filled = time.monotonic() - started
            samples = await sequential(lambda _: client.get(task_id), sizes.gets)
            p50s.append(percentile(samples, 0.5) * 1000)
            p90 = percentile(samples, 0.9) * 1000
            rows.append([f"{total:,}", number(p50s[-1]), number(p90), f"{filled:.0f}"])
    finally:
        await client.aclose()
    stack.check_alive()
    return [
        *render(["task rows", "tasks/get p50 (ms)", "p90 (ms)", "filled in (s)"], rows),
        f"max/min p50 ratio: {max(p50s) / min(p50s):.2f}x ({sizes.gets} sequential "
        "tasks/get of one completed task per size; filler rows belong to 1000 other principals)",
    ]


# -- parked --------------------------------------------------------------------------------------


MEMORY_ROWS = (
    "worker RSS (MB), workers and their children",
    "worker PSS (MB), workers and their children",
    "HTTP process RSS (MB)",
)


def memory(stack: Stack) -> list[float]:
    """The :data:`MEMORY_ROWS` of ``stack``."""
    workers = stack.pids()[1:]
    return [
        sum(memory_bytes(pid) for pid in workers) / MB,
        sum(memory_bytes(pid, "Pss") for pid in workers) / MB,
        memory_bytes(stack.pids()[0]) / MB,
    ]


async def settled_memory(stack: Stack) -> list[float]:
    """:func:`memory` once the last job's work-horse (if any) is gone."""
    await asyncio.sleep(1.0)
    return memory(stack)


async def wait_released(redis_url: str, hold_window: float, timeout: float = 600) -> None:
    """Until the hold window has passed and no job is queued (the workers let go)."""
    await asyncio.sleep(hold_window + 1.0)
    deadline = time.monotonic() + timeout
    while await asyncio.to_thread(job_ids, redis_url):
        if time.monotonic() > deadline:
            raise BenchError("jobs still queued after the parked tasks asked their questions")
        await asyncio.sleep(0.2)


async def park_all(client: BenchClient, sizes: Sizes) -> list[str]:
    task_ids: list[str] = []

    async def park(_: int) -> None:
        task_ids.append(await client.park())

    await concurrent(park, sizes.parked, sizes.in_flight)
    return task_ids


async def run_parked(stack: Stack, sizes: Sizes, redis_url: str, hold_window: float) -> list[str]:
    client = BenchClient(stack.mcp_url, in_flight=sizes.in_flight)
    try:
        await warm_up(stack, client)
        unloaded = await sequential(client.trivial_task, sizes.latency)
        before = await settled_memory(stack)
        started = time.monotonic()
        task_ids = await park_all(client, sizes)
        parking = time.monotonic() - started
        # While the last of them may still be in their hold window (a long window: all).
        held = await sequential(client.trivial_task, sizes.latency)
        await wait_released(redis_url, hold_window)
        after = await settled_memory(stack)
        loaded = await sequential(client.trivial_task, sizes.latency)
        still = [(await client.get(task_id))["status"] for task_id in task_ids[:20]]
    finally:
        await client.aclose()
    stack.check_alive()
    if set(still) != {"input_required"}:
        raise BenchError(f"parked tasks did not stay input_required: {still}")
    unloaded_p50, held_p50, loaded_p50 = (
        percentile(samples, 0.5) * 1000 for samples in (unloaded, held, loaded)
    )
    rows = [
        *(
            [label, number(b), number(a)]
            for label, b, a in zip(MEMORY_ROWS, before, after, strict=True)
        ),
        [
            f"trivial task call → result p50 (ms), {sizes.latency} sequential",
            number(unloaded_p50),
            number(loaded_p50),
        ],
        [
            "  the same, right after parking (in their hold window)",
            number(unloaded_p50),
            number(held_p50),
        ],
    ]
    return [
        *render(["metric", "nothing parked", f"{len(task_ids):,} parked"], rows),
        f"parking {len(task_ids):,} tasks ({sizes.in_flight} in flight) took {parking:.0f}s; "
        f"INPUT_HOLD_WINDOW {hold_window:g}s",
    ]


# -- handles ---------------------------------------------------------------------------------------


def redis_commands(redis_url: str) -> int:
    """Commands the Redis has processed since it started."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.info("stats")["total_commands_processed"])
    finally:
        client.close()


async def run_handles(stack: Stack, sizes: Sizes, redis_url: str) -> list[str]:
    client = BenchClient(stack.mcp_url, in_flight=sizes.in_flight)
    columns: list[list[str]] = []
    try:
        await warm_up(stack, client)
        await sequential(client.plain_trivial_task, 5)  # warm, not measured
        ways: list[tuple[str, Callable[[int], Awaitable[None]]]] = [
            ("tasks extension", client.trivial_task),
            ("no tasks extension", client.plain_trivial_task),
        ]
        for _, way in ways:
            sent = sum(client.sent.values())
            commands = await asyncio.to_thread(redis_commands, redis_url)
            http_cpu, worker_cpu = stack_cpu(stack)
            samples = await sequential(way, sizes.latency)
            count = len(samples)
            commands = await asyncio.to_thread(redis_commands, redis_url) - commands
            http_after, worker_after = stack_cpu(stack)
            columns.append(
                [
                    number(percentile(samples, 0.5) * 1000),
                    number((sum(client.sent.values()) - sent) / count),
                    number(commands / count),
                    number((http_after - http_cpu) * 1000 / count),
                    number((worker_after - worker_cpu) * 1000 / count),
                ]
            )
    finally:
        await client.aclose()
    stack.check_alive()
    labels = [
        "task call → result p50 (ms), sequential",
        "HTTP requests per task",
        "Redis commands per task (all processes)",
        "HTTP process CPU per task (ms)",
        "worker CPU per task (ms)",
    ]
    rows = [[label, *(column[i] for column in columns)] for i, label in enumerate(labels)]
    return [
        *render(["trivial task", *(name for name, _ in ways)], rows),
        f"{sizes.latency} sequential trivial tasks each way, on one server and worker",
    ]


def stack_cpu(stack: Stack) -> tuple[float, float]:
    """CPU seconds of the HTTP process, and of the workers with their children."""
    from tests.benchmarks.stacks import cpu_seconds

    http, *workers = stack.pids()
    return cpu_seconds(http), sum(cpu_seconds(pid) for pid in workers)


# -- questions -----------------------------------------------------------------------------------

#: The phases of a question round trip, in the order they happen: label, the two moments.
PHASES = (
    ("call → tools/call answered (task created)", "called", "created_seen"),
    ("task row created → a worker claimed it", "created", "started"),
    ("claimed → the question recorded (tool ran, asked)", "started", "asked"),
    ("question recorded → the client saw input_required", "asked", "asked_seen"),
    ("the client saw it → the answer recorded (tasks/update)", "asked_seen", "answered"),
    ("answer recorded → the task finished (worker woke, tool resumed)", "answered", "finished"),
    ("finished → the client saw the result", "finished", "finished_seen"),
    ("total: call → result seen", "called", "finished_seen"),
)
#: A trivial task's: its row's INSERT and job's queueing, the worker's take and claim (a
#: statement), the tool and its result (a statement), the wake-up of the held ``tasks/get``.
TRIVIAL_PHASES = (
    ("call → the task row's created_at (request read, dispatched)", "called", "created"),
    ("created_at → tools/call answered (INSERT, job queued)", "created", "created_seen"),
    ("created_at → a worker's claim (queued, taken, handed over)", "created", "started"),
    ("claim → finished_at (the claim's statement, the tool)", "started", "finished"),
    ("finished_at → the client saw the result (UPDATE, wake-up)", "finished", "finished_seen"),
    ("total: call → result seen", "called", "finished_seen"),
)


async def run_questions(stack: Stack, sizes: Sizes, database_url: str) -> list[str]:
    client = BenchClient(stack.mcp_url, in_flight=1)
    questions: list[tuple[str, dict[str, float]]] = []
    trivial: list[tuple[str, dict[str, float]]] = []
    try:
        await warm_up(stack, client)
        for n in range(sizes.latency):
            questions.append(await timed_question(client))
            trivial.append(await timed_trivial_task(client, n))
    finally:
        await client.aclose()
    stack.check_alive()
    tables = []
    for title, timed, phases in (
        ("question round trip (bench_ask)", questions, PHASES),
        ("trivial task (the task p50 of compare)", trivial, TRIVIAL_PHASES),
    ):
        moments = [
            seen | await asyncio.to_thread(row_moments, database_url, task_id)
            for task_id, seen in timed
        ]
        rows = []
        for label, start, end in phases:
            spans = [(seen[end] - seen[start]) * 1000 for seen in moments]
            rows.append([label, number(percentile(spans, 0.5)), number(percentile(spans, 0.9))])
        tables += [*render([title, "p50 (ms)", "p90 (ms)"], rows), ""]
    return [
        *tables,
        f"{sizes.latency} sequential round trips and trivial tasks, in turn, on one server and "
        "worker; each phase's p50 apart (they need not add up to the total's)",
    ]


async def timed_trivial_task(client: BenchClient, n: int) -> tuple[str, dict[str, float]]:
    """One trivial task: its id and the client's moments (``time.time()``)."""
    called = time.time()
    created = await client.start("trivial_task", {"n": n})
    created_seen = time.time()
    task = await client.poll(created, is_completed)
    finished_seen = time.time()
    if text_of(task["result"]) != str(n):
        raise BenchError(f"unexpected trivial_task result {task}")
    return str(task["taskId"]), {
        "called": called,
        "created_seen": created_seen,
        "finished_seen": finished_seen,
    }


async def timed_question(client: BenchClient) -> tuple[str, dict[str, float]]:
    """One round trip: its task id and the client's moments (``time.time()``)."""
    called = time.time()
    created = await client.start("bench_ask", {})
    created_seen = time.time()
    task = await client.poll(created, is_asking)
    asked_seen = time.time()
    answers = {
        key: {"action": "accept", "content": {"value": ANSWER}} for key in task["inputRequests"]
    }
    await client.request(
        "tasks/update", {"taskId": task["taskId"], "inputResponses": answers}, task["taskId"]
    )
    task = await client.poll(task, is_completed)
    finished_seen = time.time()
    if text_of(task["result"]) != ANSWER:
        raise BenchError(f"unexpected bench_ask result {task}")
    return str(task["taskId"]), {
        "called": called,
        "created_seen": created_seen,
        "asked_seen": asked_seen,
        "finished_seen": finished_seen,
    }


def row_moments(database_url: str, task_id: str) -> dict[str, float]:
    """When the task's rows say it was created, claimed, finished, and (if it asked) asked
    and answered."""
    ((created, started, finished, asked, answered),) = db_rows(
        database_url,
        "SELECT extract(epoch FROM t.created_at), extract(epoch FROM t.started_at), "
        "extract(epoch FROM t.finished_at), extract(epoch FROM q.created_at), "
        "extract(epoch FROM q.answered_at) FROM mcp_tasks_task t "
        "LEFT JOIN mcp_tasks_inputrequest q ON q.task_id = t.id WHERE t.id = %s",
        (task_id,),
    )
    moments = {"created": created, "started": started, "finished": finished}
    moments |= {"asked": asked, "answered": answered} if asked is not None else {}
    return {name: float(value) for name, value in moments.items()}

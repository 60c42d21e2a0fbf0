"""Benchmark: background tasks against plain tool calls, over real HTTP with real Redis and
N real rq workers. A script, not a test::

    python tests/benchmarks/bench_tasks.py --workers 2
    python tests/benchmarks/bench_tasks.py --workers 4 --worker-class simple --calls 200 --concurrent 500

It starts a private ``redis-server`` (or uses ``--redis-url``), a migrated SQLite database
(or ``--database-url``, e.g. PostgreSQL), one daphne server with ``tests.task_settings`` and
N ``manage.py rqworker mcp_tasks`` processes, then measures with the tool ``trivial_task``
(which returns its argument at once):

- plain call latency: ``tools/call`` without the tasks extension (runs inline), sequential;
- task latency: ``tools/call`` with the extension → ``CreateTaskResult``, then ``tasks/get``
  every ``--poll-ms`` until ``completed`` (call → result), sequential;
- plain throughput: ``--concurrent`` calls at once;
- task throughput: ``--concurrent`` tasks created at once, until all are completed (watched
  with ``tasks/get`` polls, at most ``--in-flight`` requests at a time).

It prints a table with the plain call (the baseline) beside the task and their ratio.
Everything runs on this machine; it stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from tests.conftest import _run_manage, _server_env, launch_server  # noqa: E402
from tests.worker_fixtures import (  # noqa: E402
    RedisProcess,
    RqWorker,
    envelope,
    free_port,
    headers_for,
    parse_messages,
    start_rq_worker,
)

TASK_CAPS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


class Bench:
    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self.mcp_url = f"{url}/mcp"
        self.args = args
        limits = httpx.Limits(
            max_connections=args.in_flight, max_keepalive_connections=args.in_flight
        )
        self.http = httpx.AsyncClient(timeout=120, limits=limits)
        self.gate = asyncio.Semaphore(args.in_flight)

    async def post(
        self, method: str, params: dict[str, Any], name: str | None, caps: dict[str, Any]
    ) -> dict[str, Any]:
        body = envelope(method, params, caps=caps)
        async with self.gate:
            response = await self.http.post(
                self.mcp_url, json=body, headers=headers_for(method, name)
            )
        messages = parse_messages(response)
        if not messages or "result" not in messages[-1]:
            raise RuntimeError(
                f"{method} failed: HTTP {response.status_code} {response.text[:500]}"
            )
        result: dict[str, Any] = messages[-1]["result"]
        return result

    async def plain_call(self, n: int) -> None:
        result = await self.post(
            "tools/call", {"name": "trivial_task", "arguments": {"n": n}}, "trivial_task", {}
        )
        if result.get("structuredContent") != {"result": n}:
            raise RuntimeError(f"unexpected plain result {result}")

    async def task_call(self, n: int) -> None:
        created = await self.post(
            "tools/call", {"name": "trivial_task", "arguments": {"n": n}}, "trivial_task", TASK_CAPS
        )
        if created.get("resultType") != "task":
            raise RuntimeError(f"not a task: {created}")
        task_id = created["taskId"]
        deadline = time.monotonic() + self.args.task_timeout
        while True:
            task = await self.post("tasks/get", {"taskId": task_id}, task_id, TASK_CAPS)
            if task["status"] == "completed":
                if task["result"].get("structuredContent") != {"result": n}:
                    raise RuntimeError(f"unexpected task result {task}")
                return
            if task["status"] in ("failed", "cancelled"):
                raise RuntimeError(f"task ended {task['status']}: {task}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"task {task_id} not done after {self.args.task_timeout}s: {task}"
                )
            await asyncio.sleep(self.args.poll_ms / 1000)

    async def latency(self, call: Callable[[int], Awaitable[None]], count: int) -> list[float]:
        samples = []
        for i in range(count):
            started = time.perf_counter()
            await call(i)
            samples.append(time.perf_counter() - started)
        return samples

    async def throughput(self, call: Callable[[int], Awaitable[None]], count: int) -> float:
        started = time.perf_counter()
        await asyncio.gather(*(call(i) for i in range(count)))
        return count / (time.perf_counter() - started)


def start_stack(
    args: argparse.Namespace, tmp: Path
) -> tuple[Any, list[RqWorker], RedisProcess | None, str]:
    redis_process = None
    if args.redis_url:
        redis_url = args.redis_url
    else:
        if shutil.which("redis-server") is None:
            sys.exit("redis-server is not installed; pass --redis-url")
        redis_process = RedisProcess(port=free_port(), log_path=tmp / "redis.log")
        redis_process.start()
        redis_url = redis_process.url
    database_url = args.database_url or f"sqlite:///{tmp / 'bench.sqlite3'}"
    env = {
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "tests.task_settings",
        "REDIS_URL": redis_url,
        "REDIS_PREFIX": f"mcp_tasks_bench_{uuid.uuid4().hex[:8]}",
        "MCP_TASKS_LOG_LEVEL": "WARNING",
        "DJANGO_DEBUG": "0",
    }
    _run_manage(_server_env(env), "migrate", "--noinput")
    server = launch_server(env, tmp / "server.log", label="bench server")
    workers = [
        start_rq_worker(
            server.env,
            tmp / f"worker-{i}.log",
            simple=args.worker_class == "simple",
            label=f"worker {i}",
        )
        for i in range(args.workers)
    ]
    for worker in workers:
        worker.wait_ready(redis_url)
    return server, workers, redis_process, redis_url


def row(label: str, plain: str, task: str, ratio: str) -> str:
    return f"| {label:<34} | {plain:>14} | {task:>14} | {ratio:>9} |"


async def measure(url: str, args: argparse.Namespace) -> list[str]:
    bench = Bench(url, args)
    try:
        await bench.latency(bench.plain_call, 10)  # warm up both paths
        await bench.latency(bench.task_call, min(3, args.calls))
        plain_lat = await bench.latency(bench.plain_call, args.calls)
        task_lat = await bench.latency(bench.task_call, args.calls)
        plain_tp = await bench.throughput(bench.plain_call, args.concurrent)
        task_tp = await bench.throughput(bench.task_call, args.concurrent)
    finally:
        await bench.http.aclose()
    lines = [
        row("metric", "plain call", "task", "task/plain"),
        row("-" * 34, "-" * 14, "-" * 14, "-" * 9),
    ]
    for name, fraction in (("p50", 0.5), ("p90", 0.9)):
        p, t = percentile(plain_lat, fraction) * 1000, percentile(task_lat, fraction) * 1000
        lines.append(
            row(
                f"latency {name} (ms), {args.calls} sequential",
                f"{p:.1f}",
                f"{t:.1f}",
                f"{t / p:.1f}x",
            )
        )
    p, t = statistics.mean(plain_lat) * 1000, statistics.mean(task_lat) * 1000
    lines.append(row("latency mean (ms)", f"{p:.1f}", f"{t:.1f}", f"{t / p:.1f}x"))
    lines.append(
        row(
            f"throughput (/s), {args.concurrent} concurrent",
            f"{plain_tp:.1f}",
            f"{task_tp:.1f}",
            f"{task_tp / plain_tp:.2f}x",
        )
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="rq worker processes (default 2)")
    parser.add_argument(
        "--worker-class",
        choices=["task", "simple"],
        default="task",
        help="task: TaskWorker (forking, the default); simple: rq SimpleWorker",
    )
    parser.add_argument(
        "--calls",
        type=int,
        default=200,
        help="sequential calls for the latency figures (default 200)",
    )
    parser.add_argument(
        "--concurrent",
        type=int,
        default=500,
        help="calls/tasks started at once for throughput (default 500)",
    )
    parser.add_argument(
        "--in-flight",
        type=int,
        default=64,
        help="most HTTP requests in flight at once (default 64)",
    )
    parser.add_argument(
        "--poll-ms", type=float, default=10, help="tasks/get interval while waiting (default 10 ms)"
    )
    parser.add_argument(
        "--task-timeout", type=float, default=600, help="give up on a task after this many seconds"
    )
    parser.add_argument("--redis-url", help="use this Redis instead of a private redis-server")
    parser.add_argument(
        "--database-url",
        help="an empty database to migrate and use (default: a temporary SQLite file)",
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-tasks-"))
    server = workers = redis_process = None
    try:
        server, workers, redis_process, redis_url = start_stack(args, tmp)
        started = time.monotonic()
        lines = asyncio.run(measure(server.url, args))
        elapsed = time.monotonic() - started
    except BaseException:
        for log in sorted(tmp.glob("*.log")):
            print(f"--- {log.name} (last lines)", file=sys.stderr)
            print("\n".join(log.read_text(errors="replace").splitlines()[-30:]), file=sys.stderr)
        raise
    finally:
        for worker in workers or []:
            worker.stop()
        if server is not None:
            server.stop()
        if redis_process is not None:
            redis_process.stop()
    kind = "TaskWorker (forking)" if args.worker_class == "task" else "SimpleWorker (in process)"
    database = "PostgreSQL" if (args.database_url or "").startswith("postgres") else "SQLite"
    print(
        f"\nmcp_tasks background tasks vs plain calls — {os.cpu_count()} cores, 1 daphne server, "
        f"{args.workers} x {kind}, {database}, Redis {'private' if redis_process else redis_url}, "
        f"tasks/get poll {args.poll_ms:g} ms, tool trivial_task ({elapsed:.0f}s of measuring)\n"
    )
    print("\n".join(lines))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

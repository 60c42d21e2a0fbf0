"""The benchmark's client: raw modern-era MCP (2026-07-28, tasks extension), the same for
every server, with one poll schedule.

Transport: ``raw`` (the default) sends each request on a pool of keep-alive connections on
asyncio streams (``raw_http.py``), about a quarter of httpx's CPU per request, so that the
driver, which shares the machine's cores with the servers, takes less of them; ``httpx``
spreads them over ``httpx.AsyncClient`` objects (``compare.py --client httpx``).

Poll schedule (what fastmcp-tasks' own client does): the first ``tasks/get`` right after the
``CreateTaskResult``, then after 20 ms, 40 ms, 80 ms…, each wait capped by the task's
``pollIntervalMs`` (0.5 s when the server gives none).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from tests.benchmarks.raw_http import CONNECTION_ERRORS, Connection, Response
from tests.support.worker_fixtures import TASKS_EXTENSION, envelope, headers_for

#: What the client declares in every request: the tasks extension and form elicitation.
CAPABILITIES: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}}
#: A host without the tasks extension (README "Clients without tasks").
PLAIN_CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}}
FIRST_POLL_DELAY = 0.020
DEFAULT_POLL_CAP = 0.5
TERMINAL = ("completed", "failed", "cancelled")
SHARD = 10  # connections per httpx.AsyncClient
#: Idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them: a
#: request sent on a connection the server is closing fails.
KEEPALIVE_EXPIRY = 2.0
ANSWER = "bench"

Task = dict[str, Any]


class BenchError(RuntimeError):
    """A server answered something other than what the benchmark expects."""


Transport = Literal["raw", "httpx"]
TRANSPORTS: tuple[Transport, ...] = ("raw", "httpx")


class RawPool:
    """Keep-alive connections to one URL on asyncio streams: a request takes an idle one
    (the most recently used) or opens one; as many open as requests are in flight."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None, url
        self.host, self.port, self.path = parts.hostname, parts.port, parts.path or "/"
        self.idle: list[tuple[float, Connection]] = []

    async def post(self, body: bytes, headers: dict[str, str]) -> Response:
        connection = await self._take()
        try:
            response = await connection.request("POST", self.path, headers, body)
        except CONNECTION_ERRORS:
            await connection.close()
            raise
        if connection.writer is not None:
            self.idle.append((time.monotonic(), connection))
        return response

    async def _take(self) -> Connection:
        while self.idle:
            since, connection = self.idle.pop()
            if time.monotonic() - since < KEEPALIVE_EXPIRY:
                return connection
            await connection.close()
        return Connection(self.host, self.port)

    async def aclose(self) -> None:
        for _, connection in self.idle:
            await connection.close()
        self.idle.clear()


class HttpxShards:
    """``in_flight`` connections spread over several ``httpx.AsyncClient`` objects of
    :data:`SHARD` connections each, each request on the least busy one: httpcore's pool
    looks at every one of its connections for every request, so one client with 100
    connections spends milliseconds of CPU per request on that alone."""

    def __init__(self, url: str, in_flight: int) -> None:
        self.url = url
        size = min(SHARD, in_flight)
        limits = httpx.Limits(
            max_connections=size, max_keepalive_connections=size, keepalive_expiry=KEEPALIVE_EXPIRY
        )
        self.shards = [
            httpx.AsyncClient(timeout=120, limits=limits) for _ in range(-(-in_flight // size))
        ]
        self.busy = [0] * len(self.shards)

    async def post(self, body: bytes, headers: dict[str, str]) -> Response:
        index = min(range(len(self.shards)), key=self.busy.__getitem__)
        self.busy[index] += 1
        try:
            answer = await self.shards[index].post(self.url, content=body, headers=headers)
        finally:
            self.busy[index] -= 1
        return Response(answer.status_code, dict(answer.headers), answer.content)

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()


class BenchClient:
    """Drives one server's ``/mcp`` with up to ``in_flight`` requests at once, over the
    ``transport`` (the module's docstring)."""

    def __init__(
        self,
        mcp_url: str,
        *,
        in_flight: int = 100,
        task_timeout: float = 300,
        transport: Transport = "raw",
    ) -> None:
        self.mcp_url = mcp_url
        self.task_timeout = task_timeout
        self.pool: RawPool | HttpxShards = (
            RawPool(mcp_url) if transport == "raw" else HttpxShards(mcp_url, in_flight)
        )
        self.sent: Counter[str] = Counter()  # requests sent, by method

    async def aclose(self) -> None:
        await self.pool.aclose()

    async def post(self, body: dict[str, Any], headers: dict[str, str]) -> Response:
        return await self.pool.post(json.dumps(body, separators=(",", ":")).encode(), headers)

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        name: str | None,
        caps: dict[str, Any] = CAPABILITIES,
    ) -> Task:
        """POST one request; its ``result`` (a JSON-RPC error raises :class:`BenchError`)."""
        body = envelope(method, params, caps=caps)
        self.sent[method] += 1
        response = await self.post(body, headers_for(method, name))
        messages = response.messages()
        if not messages or "result" not in messages[-1]:
            text = response.body[:500].decode(errors="replace")
            raise BenchError(f"{method}: HTTP {response.status} {text}")
        result: Task = messages[-1]["result"]
        return result

    async def call(self, tool: str, arguments: dict[str, Any]) -> Task:
        return await self.request("tools/call", {"name": tool, "arguments": arguments}, tool)

    async def start(self, tool: str, arguments: dict[str, Any]) -> Task:
        """``tools/call`` that must create a task; the ``CreateTaskResult``."""
        created = await self.call(tool, arguments)
        if created.get("resultType") != "task":
            raise BenchError(f"{tool} did not create a task: {created}")
        return created

    async def get(self, task_id: str) -> Task:
        return await self.request("tasks/get", {"taskId": task_id}, task_id)

    async def poll(self, task: Task, done: Callable[[Task], bool]) -> Task:
        """``tasks/get`` on the schedule until ``done(task)``; a terminal state that is not
        ``done`` or the timeout raises."""
        task_id = task["taskId"]
        delay = FIRST_POLL_DELAY
        deadline = time.monotonic() + self.task_timeout
        while True:
            task = await self.get(task_id)
            if done(task):
                return task
            if task["status"] in TERMINAL:
                raise BenchError(f"task {task_id} ended {task['status']}: {task}")
            if time.monotonic() > deadline:
                raise BenchError(f"task {task_id} not done after {self.task_timeout:g}s: {task}")
            cap = task.get("pollIntervalMs")
            await asyncio.sleep(min(delay, cap / 1000 if cap else DEFAULT_POLL_CAP))
            delay *= 2

    async def trivial_task(self, n: int) -> None:
        """``trivial_task(n)`` from the call to its result."""
        task = await self.poll(await self.start("trivial_task", {"n": n}), is_completed)
        if text_of(task["result"]) != str(n):
            raise BenchError(f"unexpected trivial_task result {task}")

    async def plain_trivial_task(self, n: int) -> None:
        """``trivial_task(n)`` called by a client without the tasks extension: a task all
        the same, whose result the call answers within its window."""
        params = {"name": "trivial_task", "arguments": {"n": n}}
        result = await self.request("tools/call", params, "trivial_task", PLAIN_CAPABILITIES)
        if text_of(result) != str(n):
            raise BenchError(f"unexpected trivial_task result {result}")

    async def question_round_trip(self, _: int = 0) -> None:
        """``bench_ask``: call → ``input_required`` → ``tasks/update`` → ``completed``."""
        task = await self.poll(await self.start("bench_ask", {}), is_asking)
        answers = {
            key: {"action": "accept", "content": {"value": ANSWER}} for key in task["inputRequests"]
        }
        await self.request(
            "tasks/update", {"taskId": task["taskId"], "inputResponses": answers}, task["taskId"]
        )
        task = await self.poll(task, is_completed)
        if text_of(task["result"]) != ANSWER:
            raise BenchError(f"unexpected bench_ask result {task}")

    async def park(self, _: int = 0) -> str:
        """Start ``bench_ask`` and wait until it asks; its task id (left unanswered)."""
        task = await self.poll(await self.start("bench_ask", {}), is_asking)
        return str(task["taskId"])

    async def completed_task(self) -> str:
        """The id of a completed ``trivial_task``."""
        task = await self.poll(await self.start("trivial_task", {"n": 1}), is_completed)
        return str(task["taskId"])

    async def add(self, n: int) -> None:
        """The plain tool ``add``."""
        result = await self.call("add", {"a": n, "b": 1})
        if text_of(result) != str(n + 1):
            raise BenchError(f"unexpected add result {result}")

    async def task_pid(self) -> int:
        """The pid of the process that ran a ``bench_pid`` task (peer only)."""
        task = await self.poll(await self.start("bench_pid", {}), is_completed)
        return int(text_of(task["result"]))


def is_completed(task: Task) -> bool:
    return bool(task["status"] == "completed")


def is_asking(task: Task) -> bool:
    return bool(task["status"] == "input_required" and task.get("inputRequests"))


def text_of(result: Task) -> str:
    """The first text content of a ``CallToolResult``."""
    if result.get("isError"):
        raise BenchError(f"the tool failed: {result}")
    return str(result["content"][0]["text"])


# -- measuring -----------------------------------------------------------------------------


async def sequential(operation: Callable[[int], Awaitable[object]], count: int) -> list[float]:
    """Seconds each of ``count`` runs of ``operation`` took, one after the other."""
    samples = []
    for i in range(count):
        started = time.perf_counter()
        await operation(i)
        samples.append(time.perf_counter() - started)
    return samples


async def concurrent(
    operation: Callable[[int], Awaitable[object]], count: int, in_flight: int
) -> float:
    """Seconds ``count`` runs of ``operation`` took with at most ``in_flight`` at once."""
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with gate:
            await operation(i)

    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    return time.perf_counter() - started


def percentile(samples: list[float], fraction: float) -> float:
    """The ``fraction`` percentile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]

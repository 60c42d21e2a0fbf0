"""A small modern-era (2026-07-28) tasks client over httpx, and an "admin shell".

:class:`TaskDriver` is what a real client of the ``io.modelcontextprotocol/tasks`` extension
does: ``tools/call`` → ``CreateTaskResult``, then poll ``tasks/get``; when the task shows
``inputRequests`` it answers them with ``tasks/update`` through handlers keyed by method
(``elicitation/create``, ``sampling/createMessage``, ``roots/list``).

:func:`django_shell` runs Python in a fresh process with a live server's environment
(settings, database, Redis), the way an operator's ``manage.py shell`` — or the Django admin —
reaches the same task service the web processes use. Its last statement's ``result`` comes back
as JSON. :func:`wait_released` uses it to wait until tasks parked on a question are held by no
worker.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from tests.conftest import ROOT, LiveServer
from tests.support.live import final_message, modern_headers, modern_request

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")

#: ``(params) -> result`` for one kind of input request; None leaves it unanswered.
Answerer = Callable[[dict[str, Any]], Any]


class RpcError(AssertionError):
    """The server answered a JSON-RPC error where a result was expected."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        super().__init__(f"{method} failed: {error}")
        self.error = error


def task_capabilities(*kinds: str, extensions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Client capabilities declaring the tasks extension and ``kinds`` (``elicitation``…)."""
    capabilities: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}, **(extensions or {})}}
    for kind in kinds:
        capabilities[kind] = {"form": {}} if kind == "elicitation" else {}
    return capabilities


class TaskDriver:
    """One principal (``token``) speaking the modern tasks extension to ``url``."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        *,
        capabilities: Mapping[str, Any] | None = None,
        token: str | None = None,
    ) -> None:
        self.http = http
        self.url = url
        self.capabilities = dict(capabilities if capabilities is not None else task_capabilities())
        self.token = token
        self._ids = 0

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    async def rpc(
        self,
        method: str,
        params: dict[str, Any],
        *,
        name: str | None = None,
        request_id: int | str | None = None,
    ) -> dict[str, Any]:
        """Send one request; return the JSON-RPC response message (result or error)."""
        extra = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        body = modern_request(
            method,
            params,
            request_id=self._next_id() if request_id is None else request_id,
            capabilities=self.capabilities,
        )
        response = await self.http.post(
            self.url, json=body, headers=modern_headers(method, name, **extra)
        )
        message = final_message(response)
        assert "result" in message or "error" in message, message
        return message

    async def result_of(self, method: str, params: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        message = await self.rpc(method, params, **kwargs)
        if "error" in message:
            raise RpcError(method, message["error"])
        result: dict[str, Any] = message["result"]
        return result

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        request_id: int | str | None = None,
    ) -> str:
        """``tools/call`` answered with a task; returns its id."""
        result = await self.result_of(
            "tools/call",
            {"name": tool, "arguments": arguments or {}},
            name=tool,
            request_id=request_id,
        )
        assert result.get("resultType") == "task", result
        task_id: str = result["taskId"]
        return task_id

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.result_of("tasks/get", {"taskId": task_id}, name=task_id)

    async def update(self, task_id: str, responses: Mapping[str, Any]) -> dict[str, Any]:
        return await self.result_of(
            "tasks/update", {"taskId": task_id, "inputResponses": dict(responses)}, name=task_id
        )

    async def wait_for(
        self,
        task_id: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 60.0,
        interval: float = 0.05,
    ) -> dict[str, Any]:
        """Poll ``tasks/get`` until ``predicate(task)``; the task as last seen."""
        deadline = time.monotonic() + timeout
        while True:
            task = await self.get(task_id)
            if predicate(task):
                return task
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"task {task_id} did not get there within {timeout:g}s; last seen: {task}"
                )
            await asyncio.sleep(interval)

    async def wait_for_input(self, task_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        """Until the task shows outstanding ``inputRequests``; returns the task."""
        return await self.wait_for(
            task_id,
            lambda task: task["status"] == "input_required" and bool(task.get("inputRequests")),
            timeout=timeout,
        )

    async def run(
        self,
        task_id: str,
        answerers: Mapping[str, Answerer] | None = None,
        *,
        timeout: float = 60.0,
        asked: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Drive the task to a terminal state, answering its questions with ``answerers``
        (by method). Every input request seen is appended to ``asked``. Returns the final
        detailed task (with ``result`` or ``error``)."""
        answered: set[str] = set()
        deadline = time.monotonic() + timeout
        while True:
            task = await self.get(task_id)
            if task["status"] in TERMINAL:
                return task
            responses: dict[str, Any] = {}
            for key, request in (task.get("inputRequests") or {}).items():
                if key in answered:
                    continue
                if asked is not None:
                    asked.append({"key": key, **request})
                answer = (answerers or {}).get(request["method"])
                if answer is None:
                    continue
                response = answer(request.get("params") or {})
                if response is not None:
                    responses[key] = response
                    answered.add(key)
            if responses:
                await self.update(task_id, responses)
                continue
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"task {task_id} did not finish within {timeout:g}s; last seen: {task}"
                )
            await asyncio.sleep(min(0.05, (task.get("pollIntervalMs") or 50) / 1000))


def structured_of(task: dict[str, Any]) -> Any:
    assert task["status"] == "completed", task
    assert not task["result"].get("isError"), task["result"]
    return task["result"]["structuredContent"]


# -- the admin shell ------------------------------------------------------------------------

_BOOT = """
import json, sys
import django
django.setup()
variables = json.loads(sys.argv[2])
namespace = dict(variables)
exec(compile(sys.argv[1], "<django_shell>", "exec"), namespace)
print("@@result@@" + json.dumps(namespace.get("result"), default=str))
"""


async def django_shell(
    server: LiveServer, code: str, timeout: float = 120.0, **variables: Any
) -> Any:
    """Run ``code`` (with ``variables`` as globals) in a new process with ``server``'s
    environment; returns the JSON-decoded ``result`` it set."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _BOOT,
        textwrap.dedent(code),
        json.dumps(variables),
        cwd=ROOT,
        env=server.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    out = stdout.decode(errors="replace")
    if process.returncode != 0 or "@@result@@" not in out:
        raise AssertionError(
            f"django_shell failed ({process.returncode}):\n{out}\n{stderr.decode(errors='replace')}"
        )
    return json.loads(out.rsplit("@@result@@", 1)[1].strip())


async def wait_released(server: LiveServer, task_ids: list[str], timeout: float = 120.0) -> None:
    """Until every task waits for input with no worker holding it (its job has ended)."""
    await django_shell(
        server,
        """
        import time
        from mcp_tasks.models import Task
        deadline = time.monotonic() + limit
        while True:
            parked = Task.objects.filter(pk__in=task_ids, status="input_required", waiting_worker="").count()
            if parked == len(task_ids):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"only {parked} of {len(task_ids)} tasks were released")
            time.sleep(0.1)
        result = parked
        """,
        timeout=timeout + 60,
        task_ids=task_ids,
        limit=timeout,
    )


async def gather_limited(limit: int, factories: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run the coroutine factories with at most ``limit`` in flight; results in order."""
    semaphore = asyncio.Semaphore(limit)

    async def one(factory: Callable[[], Awaitable[Any]]) -> Any:
        async with semaphore:
            return await factory()

    return list(await asyncio.gather(*(one(factory) for factory in factories)))

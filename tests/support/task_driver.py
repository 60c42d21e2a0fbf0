"""A small modern-era (2026-07-28) tasks client over httpx, and an "admin shell".

:class:`TaskDriver` is what a real client of the ``io.modelcontextprotocol/tasks`` extension
does: ``tools/call`` → ``CreateTaskResult``, then poll ``tasks/get``; when the task shows
``inputRequests`` it answers them with ``tasks/update`` through handlers keyed by method
(``elicitation/create``, ``sampling/createMessage``, ``roots/list``).

:func:`django_shell` runs Python in another process with a live server's environment
(settings, database, Redis), the way an operator's ``manage.py shell`` — or the Django admin —
reaches the same task service the web processes use: the server's :class:`AdminShell`, started
at its first use. Its last statement's ``result`` comes back as JSON. :func:`wait_released` uses it to wait until tasks parked on a question are held by no
worker.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
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

#: The admin shell's loop: one JSON request per line in (code and variables), one reply per
#: line out (the ``result`` the code set, or the traceback it raised). What the code prints
#: goes to the shell's log, not into the replies.
_SERVE = """
import json, sys, traceback
import django
django.setup()
from django.db import connections
replies, sys.stdout = sys.stdout, sys.stderr
for line in sys.stdin:
    request = json.loads(line)
    namespace = dict(request["variables"])
    try:
        exec(compile(request["code"], "<django_shell>", "exec"), namespace)
        reply = json.dumps({"result": namespace.get("result")}, default=str)
    except BaseException:
        reply = json.dumps({"error": traceback.format_exc()})
    finally:
        connections.close_all()
    replies.write(reply + "\\n")
    replies.flush()
"""


class AdminShell:
    """A Django process with a live server's environment that runs the code it is sent, one
    snippet at a time, as a long-running admin process would. :meth:`of` starts one per
    server, at its first use; it stops with the server."""

    def __init__(self, server: LiveServer) -> None:
        self.log_path = server.log_path.with_name(f"{server.log_path.stem}-admin-shell.log")
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVE],
            cwd=ROOT,
            env=server.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._lock = threading.Lock()

    @classmethod
    def of(cls, server: LiveServer) -> AdminShell:
        for companion in server.companions:
            if isinstance(companion, cls) and companion.process.poll() is None:
                return companion
        shell = cls(server)
        server.companions.append(shell)
        return shell

    def run(self, code: str, variables: Mapping[str, Any], timeout: float) -> Any:
        """The ``result`` ``code`` set; AssertionError with the traceback when it raised, or
        when the shell died or ``timeout`` seconds passed (the shell is then killed)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        with self._lock:
            self.process.stdin.write(json.dumps({"code": code, "variables": variables}) + "\n")
            self.process.stdin.flush()
            killed = threading.Event()

            def kill() -> None:
                killed.set()
                self.process.kill()

            watchdog = threading.Timer(timeout, kill)
            watchdog.start()
            try:
                line = self.process.stdout.readline()
            finally:
                watchdog.cancel()
        if not line:
            self.process.wait()
            why = f"killed after {timeout:g} s" if killed.is_set() else "it ended"
            raise AssertionError(
                f"django_shell: no reply ({why}, exit code {self.process.returncode}):\n"
                f"{self.output()}"
            )
        reply = json.loads(line)
        if "error" in reply:
            raise AssertionError(f"django_shell failed:\n{reply['error']}\n{self.output()}")
        return reply["result"]

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self._log):
            if stream is not None:
                stream.close()


async def django_shell(
    server: LiveServer, code: str, timeout: float = 120.0, **variables: Any
) -> Any:
    """Run ``code`` (with ``variables`` as globals) in ``server``'s :class:`AdminShell`;
    returns the JSON-decoded ``result`` it set. Calls on one server run one at a time."""
    shell = AdminShell.of(server)
    return await asyncio.to_thread(shell.run, textwrap.dedent(code), variables, timeout)


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

"""The client: :class:`McpClient` and the :class:`TaskRun` of a task it started."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .. import __version__
from ..conf import get_config
from ..protocol.constants import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    TASKS_EXTENSION,
)
from .results import (
    TERMINAL,
    Answer,
    McpClientError,
    McpError,
    Message,
    OnProgress,
    Question,
    questions_in,
    resolved,
    response_to,
    text_of,
)
from .steps import Callback, Done, Request, Steps, T, advance, calling, listing, started, waiting
from .wire import InProcess, Live, Reply, Transport, allowed_host


class McpClient:
    """A modern-era MCP client of one endpoint, for one caller (``token``).

    Every method has an async twin (``a…``; ``TaskRun.await_done`` for ``wait``), whose
    callbacks may be async. In-process, the sync methods run the application on an event
    loop of their own, so they cannot be called from async code."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float | None = 60.0,
        _transport: Transport | None = None,
    ) -> None:
        self.url = url
        self.transport = _transport or Live(url, timeout)
        self.headers = dict(headers or {})
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        #: Declared on every request (the tasks extension is added for tasks).
        self.capabilities = dict(
            {"elicitation": {"form": {}}} if capabilities is None else capabilities
        )
        self._ids = itertools.count(1)

    @classmethod
    def in_process(
        cls,
        application: Any = None,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float | None = 60.0,
        path: str | None = None,
        host: str | None = None,
    ) -> McpClient:
        """A client of ``application`` (default: ``settings.ASGI_APPLICATION``) in this
        process, through ``httpx.ASGITransport``: no server. Task tools need a worker
        (``MCP_TASKS["EMBEDDED_WORKER"]``)."""
        if application is None and not getattr(settings, "ASGI_APPLICATION", None):
            raise ImproperlyConfigured("McpClient.in_process() needs settings.ASGI_APPLICATION")
        app = application if application is not None else import_string(settings.ASGI_APPLICATION)
        url = f"http://{host or allowed_host()}{path or get_config().PATH}"
        transport = InProcess(app, url, timeout)
        return cls(
            url, token=token, headers=headers, capabilities=capabilities, _transport=transport
        )

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Close its connections (``with McpClient(...) as client`` does it)."""
        self.transport.close()

    async def aclose(self) -> None:
        """:meth:`close`, for ``async with``."""
        await self.transport.aclose()

    def _run(self, steps: Steps[T]) -> T:
        value = None
        while not isinstance(step := advance(steps, value), Done):
            if isinstance(step, Request):
                value = self.request(step.method, step.params, tasks=step.tasks, heard=step.heard)
            elif isinstance(step, Callback):
                value = step.fn(step.argument)
            else:
                time.sleep(step.seconds)
        return step.value

    async def _arun(self, steps: Steps[T]) -> T:
        value = None
        while not isinstance(step := advance(steps, value), Done):
            if isinstance(step, Request):
                value = await self.arequest(
                    step.method, step.params, tasks=step.tasks, heard=step.heard
                )
            elif isinstance(step, Callback):
                value = await resolved(step.fn(step.argument))
            else:
                await asyncio.sleep(step.seconds)
        return step.value

    def _envelope(
        self, method: str, params: Mapping[str, Any] | None, tasks: bool
    ) -> tuple[Message, dict[str, str]]:
        params = dict(params or {})
        capabilities = dict(self.capabilities)
        if tasks:
            extensions = dict(capabilities.get("extensions") or {})
            capabilities["extensions"] = {**extensions, TASKS_EXTENSION: {}}
        params["_meta"] = {
            **(params.get("_meta") or {}),
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_CAPABILITIES: capabilities,
            META_CLIENT_INFO: {"name": "mcp_tasks.testing", "version": __version__},
        }
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        headers = {
            **self.headers,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": MODERN_VERSION,
            "Mcp-Method": method,
        }
        name = params.get("name", params.get("uri", params.get("taskId")))
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        return body, headers

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        tasks: bool = False,
        heard: Callable[[Message], Any] | None = None,
    ) -> Message:
        """One request; its ``result`` (:class:`McpError` for an error). ``tasks``: declare
        the tasks extension; ``heard`` gets each notification that comes before it."""
        body, headers = self._envelope(method, params, tasks)
        return _result(self.transport.post(body, headers, heard))

    async def arequest(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        tasks: bool = False,
        heard: Callable[[Message], Any] | None = None,
    ) -> Message:
        """:meth:`request`, async."""
        body, headers = self._envelope(method, params, tasks)
        return _result(await self.transport.apost(body, headers, heard))

    def list_tools(self) -> list[Message]:
        """``tools/list``, every page: the tools this caller may use."""
        return self._run(listing())

    async def alist_tools(self) -> list[Message]:
        """:meth:`list_tools`, async."""
        return await self._arun(listing())

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answer: Answer | None = None,
        on_progress: OnProgress | None = None,
    ) -> Message:
        """``tools/call``, run inline: the ``CallToolResult`` (a tool error is one, with
        ``isError``). Its questions (MRTR) go to ``answer``, else :class:`InputRequiredError`;
        ``on_progress`` gets its progress notifications."""
        return self._run(calling(name, arguments, answer, on_progress, False))

    async def acall(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answer: Answer | None = None,
        on_progress: OnProgress | None = None,
    ) -> Message:
        """:meth:`call`, async (``answer`` and ``on_progress`` may be async)."""
        return await self._arun(calling(name, arguments, answer, on_progress, False))

    def start(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, answer: Answer | None = None
    ) -> TaskRun:
        """``tools/call`` as a task: its :class:`TaskRun`. ``answer`` gets the questions
        asked before the task exists (``TaskConfig.prepare``); a tool the server runs at
        once raises :class:`NotATaskError`."""
        result = self._run(calling(name, arguments, answer, None, True))
        return TaskRun(self, name, started(name, result))

    async def astart(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, answer: Answer | None = None
    ) -> TaskRun:
        """:meth:`start`, async."""
        result = await self._arun(calling(name, arguments, answer, None, True))
        return TaskRun(self, name, started(name, result))


def _result(reply: Reply) -> Message:
    message = reply.message
    if isinstance(error := message.get("error"), dict):
        raise _error(error, reply.status)
    if not isinstance(message.get("result"), dict):
        raise McpClientError(f"HTTP {reply.status}: not a JSON-RPC response: {message!r:.300}")
    return dict(message["result"])


def _error(error: Mapping[str, Any], status: int | None = None) -> McpError:
    code, message = int(error.get("code", 0)), str(error.get("message", ""))
    return McpError(code, message, error.get("data"), status=status)


class TaskRun:
    """A task started by :meth:`McpClient.start`. ``task`` is its last state seen (the
    ``tasks/get`` result), ``tool`` the tool's name, ``client`` the :class:`McpClient`."""

    def __init__(self, client: McpClient, tool: str, task: Message) -> None:
        self.client, self.tool, self.task = client, tool, task

    def __repr__(self) -> str:
        return f"<TaskRun {self.tool} {self.task_id} {self.status}>"

    @property
    def task_id(self) -> str:
        """The task's id."""
        return str(self.task["taskId"])

    @property
    def status(self) -> str:
        """``working``, ``input_required``, ``completed``, ``failed`` or ``cancelled``."""
        return str(self.task.get("status"))

    @property
    def questions(self) -> list[Question]:
        """What it waits for (``input_required``)."""
        return questions_in(self.task) if self.status == "input_required" else []

    @property
    def result(self) -> Message:
        """The ``CallToolResult`` of the completed task (:class:`McpError` if it failed)."""
        if self.status == "completed":
            return dict(self.task.get("result") or {})
        if self.status == "failed":
            raise _error(self.task.get("error") or {})
        raise McpClientError(f"task {self.task_id} is {self.status}, not completed")

    @property
    def structured(self) -> Any:
        """The result's ``structuredContent``."""
        return self.result.get("structuredContent")

    @property
    def text(self) -> str:
        """The result's text blocks, one per line."""
        return text_of(self.result)

    def params(self, **extra: Any) -> Message:
        """The params of a ``tasks/*`` request about this task, with ``extra``."""
        return {"taskId": self.task_id, **extra}

    def get(self) -> Message:
        """``tasks/get``: the task now."""
        self.task = self.client.request("tasks/get", self.params(), tasks=True)
        return self.task

    async def aget(self) -> Message:
        """:meth:`get`, async."""
        self.task = await self.client.arequest("tasks/get", self.params(), tasks=True)
        return self.task

    def answer(self, key: str, response: Any) -> None:
        """``tasks/update``: answer the question ``key`` (the shorthands of
        :func:`response_to` apply to a question of the last state seen)."""
        self.client.request("tasks/update", self._update(key, response), tasks=True)

    async def aanswer(self, key: str, response: Any) -> None:
        """:meth:`answer`, async."""
        await self.client.arequest("tasks/update", self._update(key, response), tasks=True)

    def _update(self, key: str, response: Any) -> Message:
        asked = {question.key: question for question in self.questions}
        value = response_to(asked[key], response) if key in asked else response
        return self.params(inputResponses={key: value})

    def cancel(self) -> None:
        """``tasks/cancel``."""
        self.client.request("tasks/cancel", self.params(), tasks=True)

    async def acancel(self) -> None:
        """:meth:`cancel`, async."""
        await self.client.arequest("tasks/cancel", self.params(), tasks=True)

    def wait(
        self,
        *,
        answer: Answer | None = None,
        on_progress: OnProgress | None = None,
        timeout: float | None = 60.0,
    ) -> Message:
        """Poll until the task ends (``pollIntervalMs`` apart): its last state. Its
        questions go to ``answer`` (else :class:`InputRequiredError`) and the answers to
        ``tasks/update``; ``on_progress`` gets each change of status or message;
        ``TimeoutError`` after ``timeout`` seconds; :class:`McpClientError` at once when no
        worker can run it (in-process, embedded mode, no worker thread)."""
        self._check_served()
        return self.client._run(waiting(self, answer, on_progress, timeout))

    async def await_done(
        self,
        *,
        answer: Answer | None = None,
        on_progress: OnProgress | None = None,
        timeout: float | None = 60.0,
    ) -> Message:
        """:meth:`wait`, async (``answer`` and ``on_progress`` may be async)."""
        self._check_served()
        return await self.client._arun(waiting(self, answer, on_progress, timeout))

    def _check_served(self) -> None:
        why = self.client.transport.unserved()
        if why is not None and self.status not in TERMINAL:
            raise McpClientError(f"task {self.task_id} ({self.tool}): {why}")

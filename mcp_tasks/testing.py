"""Call MCP tools from Python: in tests, in-process like Django's test client, or against a
live server; plainly or as background tasks, with their questions answered::

    from mcp_tasks.testing import McpClient

    with McpClient.in_process() as client:  # or McpClient("https://example.com/mcp")
        assert client.call("add", {"a": 1, "b": 2})["structuredContent"] == {"result": 3}
        run = client.start("long_report", {"quarter": "Q3"})
        run.wait(answer={"Include draft figures?": True})
        assert run.text == "Report for Q3: 3 sections with drafts."

It speaks the 2026-07-28 era: stateless, the ``_meta`` envelope on every request, the tasks
extension (``io.modelcontextprotocol/tasks``) for :meth:`McpClient.start`. Needs httpx
(``pip install "django-mcp-tasks[testing]"``).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http.request import validate_host
from django.utils.module_loading import import_string

from . import __version__
from .conf import get_config
from .core.background import drain
from .protocol.constants import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN_VERSION,
    TASKS_EXTENSION,
)
from .tasks.loop_database import LoopDatabase

if TYPE_CHECKING:
    import httpx

__all__ = [
    "InputRequiredError",
    "McpClient",
    "McpClientError",
    "McpError",
    "NotATaskError",
    "Progress",
    "Question",
    "TaskRun",
    "text_of",
]

#: Task statuses that never change again.
TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: Most ``input_required`` rounds one call may take.
MAX_ROUNDS = 20
#: Seconds between polls when a task names no ``pollIntervalMs``.
DEFAULT_POLL = 0.5

Message = dict[str, Any]
#: How questions are answered: a callable given each :class:`Question` (it may be async in
#: the async API), or a mapping from a question's key, message or form field to the answer.
Answer = Callable[["Question"], Any] | Mapping[str, Any]
OnProgress = Callable[["Progress"], Any]


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise ImportError(
            'mcp_tasks.testing needs httpx: pip install "django-mcp-tasks[testing]"'
        ) from exc
    return httpx


# -- what the client reports ------------------------------------------------------------------


class McpClientError(Exception):
    """The call did not give what was asked of it."""


class McpError(McpClientError):
    """The server answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None, *, status: int | None = None):
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code, self.message, self.data, self.status = code, message, data, status


class InputRequiredError(McpClientError):
    """The server asked questions that no ``answer`` was given for."""

    def __init__(self, questions: list[Question], task_id: str | None = None) -> None:
        asked = "; ".join(repr(question.message) for question in questions)
        where = f"task {task_id}" if task_id else "the call"
        super().__init__(f"{where} asks {asked}: pass answer= (a callable or a mapping)")
        self.questions, self.task_id = questions, task_id


class NotATaskError(McpClientError):
    """:meth:`McpClient.start` of a tool that the server ran at once (``.result``)."""

    def __init__(self, tool: str, result: Message) -> None:
        super().__init__(f"{tool} does not run as a task (its result came at once): use call()")
        self.result = result


@dataclass(frozen=True)
class Question:
    """One entry of ``inputRequests``: ``method`` is ``elicitation/create``,
    ``sampling/createMessage`` or ``roots/list``."""

    key: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def message(self) -> str:
        return str(self.params.get("message") or self.method)

    @property
    def fields(self) -> dict[str, dict[str, Any]]:
        """The elicitation form's fields (name → JSON schema)."""
        schema = self.params.get("requestedSchema") or {}
        return dict(schema.get("properties") or {})

    @property
    def required(self) -> list[str]:
        return list((self.params.get("requestedSchema") or {}).get("required") or [])


@dataclass(frozen=True)
class Progress:
    """Progress of a call (``notifications/progress``) or a task (its ``statusMessage``;
    numbers only when the tool reported them without a message, as ``"2/3"``)."""

    status: str
    message: str | None = None
    progress: float | None = None
    total: float | None = None


def text_of(result: Message) -> str:
    """The text blocks of a ``CallToolResult``, one per line."""
    blocks = result.get("content") or []
    return "\n".join(block["text"] for block in blocks if block.get("type") == "text")


# -- answers ----------------------------------------------------------------------------------


def lookup(answers: Mapping[str, Any], question: Question) -> Any:
    """The answer ``answers`` gives ``question``: under its key or its message, or (a form)
    under its fields' names, all required ones given; ``KeyError`` when none fits."""
    for name in (question.key, question.message):
        if name in answers:
            return answers[name]
    given = {name: answers[name] for name in question.fields if name in answers}
    if given and all(name in given for name in question.required):
        return {"action": "accept", "content": given}
    raise KeyError(question.key)


def response_to(question: Question, value: Any) -> Any:
    """The wire response for an answer. For an elicitation: a dict with ``action`` as it is,
    another dict is the accepted form, and any other value fills a one-field form."""
    if question.method != "elicitation/create" or (isinstance(value, dict) and "action" in value):
        return value
    if isinstance(value, dict):
        return {"action": "accept", "content": value}
    if len(question.fields) != 1:
        raise McpClientError(f"answer {question.message!r} with a dict of its fields")
    return {"action": "accept", "content": {next(iter(question.fields)): value}}


def questions_in(result: Mapping[str, Any]) -> list[Question]:
    requests = result.get("inputRequests") or {}
    return [
        Question(str(key), entry.get("method", ""), entry.get("params") or {})
        for key, entry in requests.items()
    ]


def _progress_of(task: Message) -> Progress:
    message = task.get("statusMessage")
    found = re.fullmatch(r"(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)", message or "")
    numbers = (float(found[1]), float(found[2])) if found else (None, None)
    return Progress(task.get("status", ""), message, *numbers)


def _listener(on_progress: OnProgress | None) -> Callable[[Message], Any] | None:
    """``notifications/progress`` messages as :class:`Progress` to ``on_progress``."""
    if on_progress is None:
        return None

    def heard(message: Message) -> Any:
        if message.get("method") != "notifications/progress":
            return None
        params = message.get("params") or {}
        return on_progress(
            Progress("working", params.get("message"), params.get("progress"), params.get("total"))
        )

    return heard


async def _resolved(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


# -- the wire ---------------------------------------------------------------------------------


class _Reader:
    """A response body, JSON or SSE, line by line: its notifications as they come, then
    the response."""

    def __init__(self, status: int, content_type: str) -> None:
        self.status = status
        self.sse = content_type.startswith("text/event-stream")
        self.lines: list[str] = []
        self.response: Message | None = None

    def feed(self, line: str) -> Message | None:
        """The notification this line completes, if any."""
        if not self.sse:
            self.lines.append(line)
        elif line.startswith("data:"):
            self.lines.append(line[5:].lstrip())
        elif not line and self.lines:
            return self._message()
        return None

    def _message(self) -> Message | None:
        text, self.lines = "\n".join(self.lines).strip(), []
        if not text:
            return None
        try:
            message = dict(json.loads(text))
        except ValueError:
            raise McpClientError(f"HTTP {self.status}, not JSON-RPC: {text[:300]!r}") from None
        if "result" in message or "error" in message:
            self.response = message
            return None
        return message

    def reply(self) -> _Reply:
        self._message()  # a JSON body, or an event the stream did not end
        if self.response is None:
            raise McpClientError(f"HTTP {self.status} without a JSON-RPC response")
        return _Reply(self.status, self.response)


@dataclass
class _Reply:
    status: int
    message: Message


def _read(reader: _Reader, lines: Iterable[str], heard: Any) -> _Reply:
    for line in lines:
        if (notification := reader.feed(line)) is not None and heard is not None:
            heard(notification)
    return reader.reply()


async def _aread(reader: _Reader, lines: AsyncIterator[str], heard: Any) -> _Reply:
    async for line in lines:
        if (notification := reader.feed(line)) is not None and heard is not None:
            await _resolved(heard(notification))
    return reader.reply()


class _Transport:
    """POSTs one JSON-RPC request and reads the reply (notifications go to ``heard``)."""

    def __init__(self, url: str, timeout: float | None) -> None:
        self.url, self.timeout = url, timeout

    def _client(self) -> httpx.AsyncClient:
        return _httpx().AsyncClient(timeout=self.timeout)  # type: ignore[no-any-return]

    async def apost(self, body: Message, headers: dict[str, str], heard: Any) -> _Reply:
        async with (
            self._client() as http,
            http.stream("POST", self.url, json=body, headers=headers) as response,
        ):
            reader = _Reader(response.status_code, response.headers.get("content-type", ""))
            return await _aread(reader, response.aiter_lines(), heard)

    def post(self, body: Message, headers: dict[str, str], heard: Any) -> _Reply:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None

    def close(self) -> None:
        return None


class _Live(_Transport):
    """A server over the network."""

    _http: httpx.Client | None = None

    def post(self, body: Message, headers: dict[str, str], heard: Any) -> _Reply:
        if self._http is None:
            self._http = _httpx().Client(timeout=self.timeout)
        with self._http.stream("POST", self.url, json=body, headers=headers) as response:
            reader = _Reader(response.status_code, response.headers.get("content-type", ""))
            return _read(reader, response.iter_lines(), heard)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None


class _InProcess(_Transport):
    """The project's ASGI application, called through ``httpx.ASGITransport``: responses
    arrive whole (a call's notifications come with its result)."""

    def __init__(self, application: Any, url: str, timeout: float | None) -> None:
        super().__init__(url, timeout)
        self.application = application

    def _client(self) -> httpx.AsyncClient:
        httpx = _httpx()
        transport = httpx.ASGITransport(app=self.application)
        return httpx.AsyncClient(transport=transport, timeout=self.timeout)  # type: ignore[no-any-return]

    def post(self, body: Message, headers: dict[str, str], heard: Any) -> _Reply:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise McpClientError(
                "McpClient's sync methods cannot run inside an event loop: await acall(), "
                "astart(), run.await_done() in async code"
            )
        heard_now: list[Message] = []
        reply: _Reply = async_to_sync(self._post_in_new_loop)(body, headers, heard_now.append)
        for message in heard_now if heard is not None else ():
            heard(message)
        return reply

    async def _post_in_new_loop(self, body: Message, headers: dict[str, str], heard: Any) -> _Reply:
        try:
            return await self.apost(body, headers, heard)
        finally:  # the loop ends with this call: what the request left running goes first
            await drain()
            await self.aclose()

    async def aclose(self) -> None:
        database = LoopDatabase.of_running_loop()  # PostgreSQL: the loop's own connection
        if database is not None:
            await database.close()


def _test_host() -> str:
    """A Host the site allows (``testserver`` under Django's test runner)."""
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    candidates = ["testserver", "localhost", "127.0.0.1", *(h.lstrip(".") for h in allowed)]
    return next((host for host in candidates if validate_host(host, allowed)), "testserver")


# -- what the client does, step by step -------------------------------------------------------
#
# Each operation is a generator of steps, run by a sync driver (McpClient._run) or an async
# one (McpClient._arun): one protocol, two APIs.


@dataclass
class _Request:
    method: str
    params: Message
    tasks: bool = False
    heard: Callable[[Message], Any] | None = None


@dataclass
class _Callback:
    fn: Callable[[Any], Any]
    argument: Any


@dataclass
class _Sleep:
    seconds: float


_Step = _Request | _Callback | _Sleep
T = TypeVar("T")
#: An operation: the steps it takes, then what it returns.
Steps = Generator[_Step, Any, T]


def _answers(
    questions: list[Question], answer: Answer | None, task_id: str | None
) -> Steps[Message]:
    """The responses to ``questions``, keyed as asked."""
    responses = {}
    for question in questions:
        if isinstance(answer, Mapping):
            try:
                value = lookup(answer, question)
            except KeyError:
                raise InputRequiredError([question], task_id) from None
        elif answer is None:
            raise InputRequiredError(questions, task_id)
        else:
            value = yield _Callback(answer, question)
        responses[question.key] = response_to(question, value)
    return responses


def _calling(
    name: str,
    arguments: Mapping[str, Any] | None,
    answer: Answer | None,
    on_progress: OnProgress | None,
    tasks: bool,
) -> Steps[Message]:
    """``tools/call`` and its MRTR rounds; the final result."""
    params: Message = {"name": name, "arguments": dict(arguments or {})}
    if on_progress is not None:
        params["_meta"] = {"progressToken": uuid.uuid4().hex}
    for _ in range(MAX_ROUNDS):
        result: Message = yield _Request("tools/call", params, tasks, _listener(on_progress))
        if result.get("resultType") != "input_required":
            return result
        responses = yield from _answers(questions_in(result), answer, None)
        params = {**params, "inputResponses": responses}
        params.pop("requestState", None)
        if "requestState" in result:  # echoed as it came
            params["requestState"] = result["requestState"]
    raise McpClientError(f"{name} asked more than {MAX_ROUNDS} rounds of questions")


def _listing() -> Steps[list[Message]]:
    tools: list[Message] = []
    cursor = None
    while True:
        page = yield _Request("tools/list", {"cursor": cursor} if cursor else {})
        tools += page.get("tools") or []
        if not (cursor := page.get("nextCursor")):
            return tools


def _waiting(
    run: TaskRun, answer: Answer | None, on_progress: OnProgress | None, timeout: float | None
) -> Steps[Message]:
    """Poll the task until it ends, answering its questions; its last state."""
    deadline = None if timeout is None else time.monotonic() + timeout
    answered: set[str] = set()
    seen = None
    while True:
        run.task = yield _Request("tasks/get", {"taskId": run.task_id}, tasks=True)
        status = run.status
        if on_progress is not None and (progress := _progress_of(run.task)) != seen:
            yield _Callback(on_progress, progress)
            seen = progress
        if status in TERMINAL:
            return run.task
        questions = run.questions
        if refused := [q.message for q in questions if q.key in answered]:
            raise McpClientError(f"task {run.task_id} did not take the answer to {refused}")
        if questions:
            responses = yield from _answers(questions, answer, run.task_id)
            yield _Request("tasks/update", run.params(inputResponses=responses), tasks=True)
            answered.update(responses)
            continue
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"task {run.task_id} is still {status}")
        interval = run.task.get("pollIntervalMs")
        yield _Sleep(interval / 1000 if isinstance(interval, int | float) else DEFAULT_POLL)


def _started(name: str, result: Message) -> Message:
    if result.get("resultType") != "task":
        raise NotATaskError(name, result)
    return result


# -- the client -------------------------------------------------------------------------------


class McpClient:
    """A modern-era MCP client of one endpoint, for one caller (``token``).

    Every method has an async twin (``a…``; ``TaskRun.await_done`` for ``wait``), whose
    callbacks may be async. In-process, the sync methods run the application on an event
    loop of their own, so they cannot be called from async code.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float | None = 60.0,
        _transport: _Transport | None = None,
    ) -> None:
        self.url = url
        self.transport = _transport or _Live(url, timeout)
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
        url = f"http://{host or _test_host()}{path or get_config()['PATH']}"
        transport = _InProcess(app, url, timeout)
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
        self.transport.close()

    async def aclose(self) -> None:
        await self.transport.aclose()

    # -- the drivers ----------------------------------------------------------------------

    def _run(self, steps: Steps[T]) -> T:
        value = None
        while True:
            try:
                step = steps.send(value)
            except StopIteration as done:
                returned: T = done.value
                return returned
            if isinstance(step, _Request):
                value = self.request(step.method, step.params, tasks=step.tasks, heard=step.heard)
            elif isinstance(step, _Callback):
                value = step.fn(step.argument)
            else:
                time.sleep(step.seconds)

    async def _arun(self, steps: Steps[T]) -> T:
        value = None
        while True:
            try:
                step = steps.send(value)
            except StopIteration as done:
                returned: T = done.value
                return returned
            if isinstance(step, _Request):
                value = await self.arequest(
                    step.method, step.params, tasks=step.tasks, heard=step.heard
                )
            elif isinstance(step, _Callback):
                value = await _resolved(step.fn(step.argument))
            else:
                await asyncio.sleep(step.seconds)

    # -- requests -------------------------------------------------------------------------

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
        body, headers = self._envelope(method, params, tasks)
        return _result(await self.transport.apost(body, headers, heard))

    # -- tools ----------------------------------------------------------------------------

    def list_tools(self) -> list[Message]:
        return self._run(_listing())

    async def alist_tools(self) -> list[Message]:
        return await self._arun(_listing())

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
        return self._run(_calling(name, arguments, answer, on_progress, False))

    async def acall(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answer: Answer | None = None,
        on_progress: OnProgress | None = None,
    ) -> Message:
        return await self._arun(_calling(name, arguments, answer, on_progress, False))

    def start(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, answer: Answer | None = None
    ) -> TaskRun:
        """``tools/call`` as a task: its :class:`TaskRun`. ``answer`` gets the questions
        asked before the task exists (``TaskConfig.prepare``); a tool the server runs at
        once raises :class:`NotATaskError`."""
        result = self._run(_calling(name, arguments, answer, None, True))
        return TaskRun(self, name, _started(name, result))

    async def astart(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, answer: Answer | None = None
    ) -> TaskRun:
        result = await self._arun(_calling(name, arguments, answer, None, True))
        return TaskRun(self, name, _started(name, result))


def _result(reply: _Reply) -> Message:
    message = reply.message
    if isinstance(error := message.get("error"), dict):
        raise _error(error, reply.status)
    if not isinstance(message.get("result"), dict):
        raise McpClientError(f"HTTP {reply.status}: not a JSON-RPC response: {message!r:.300}")
    return dict(message["result"])


def _error(error: Mapping[str, Any], status: int | None = None) -> McpError:
    code, message = int(error.get("code", 0)), str(error.get("message", ""))
    return McpError(code, message, error.get("data"), status=status)


# -- tasks ------------------------------------------------------------------------------------


class TaskRun:
    """A task started by :meth:`McpClient.start`; :attr:`task` is its last state seen."""

    def __init__(self, client: McpClient, tool: str, task: Message) -> None:
        self.client, self.tool, self.task = client, tool, task

    def __repr__(self) -> str:
        return f"<TaskRun {self.tool} {self.task_id} {self.status}>"

    @property
    def task_id(self) -> str:
        return str(self.task["taskId"])

    @property
    def status(self) -> str:
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
        return self.result.get("structuredContent")

    @property
    def text(self) -> str:
        return text_of(self.result)

    def params(self, **extra: Any) -> Message:
        return {"taskId": self.task_id, **extra}

    def get(self) -> Message:
        """``tasks/get``: the task now."""
        self.task = self.client.request("tasks/get", self.params(), tasks=True)
        return self.task

    async def aget(self) -> Message:
        self.task = await self.client.arequest("tasks/get", self.params(), tasks=True)
        return self.task

    def answer(self, key: str, response: Any) -> None:
        """``tasks/update``: answer the question ``key`` (the shorthands of
        :func:`response_to` apply to a question of the last state seen)."""
        self.client.request("tasks/update", self._update(key, response), tasks=True)

    async def aanswer(self, key: str, response: Any) -> None:
        await self.client.arequest("tasks/update", self._update(key, response), tasks=True)

    def _update(self, key: str, response: Any) -> Message:
        asked = {question.key: question for question in self.questions}
        value = response_to(asked[key], response) if key in asked else response
        return self.params(inputResponses={key: value})

    def cancel(self) -> None:
        """``tasks/cancel``."""
        self.client.request("tasks/cancel", self.params(), tasks=True)

    async def acancel(self) -> None:
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
        ``TimeoutError`` after ``timeout`` seconds."""
        return self.client._run(_waiting(self, answer, on_progress, timeout))

    async def await_done(
        self,
        *,
        answer: Answer | None = None,
        on_progress: OnProgress | None = None,
        timeout: float | None = 60.0,
    ) -> Message:
        return await self.client._arun(_waiting(self, answer, on_progress, timeout))

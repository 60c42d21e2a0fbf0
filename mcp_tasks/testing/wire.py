"""The wire of :class:`~mcp_tasks.testing.McpClient`: a POST of one JSON-RPC request and
its reply (JSON, or SSE with notifications first), over HTTP or in-process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.http.request import validate_host

from ..conf import get_config
from ..core.background import drain
from ..tasks.queues import embedded
from ..tasks.state.loop_database import LoopDatabase
from ..transport.http import allowed_hosts
from .results import McpClientError, Message, resolved

if TYPE_CHECKING:
    import httpx


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise ImportError(
            'mcp_tasks.testing needs httpx: pip install "django-mcp-tasks[testing]"'
        ) from exc
    return httpx


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

    def reply(self) -> Reply:
        self._message()  # a JSON body, or an event the stream did not end
        if self.response is None:
            raise McpClientError(f"HTTP {self.status} without a JSON-RPC response")
        return Reply(self.status, self.response)


@dataclass
class Reply:
    status: int
    message: Message


def _read(reader: _Reader, lines: Iterable[str], heard: Any) -> Reply:
    for line in lines:
        if (notification := reader.feed(line)) is not None and heard is not None:
            heard(notification)
    return reader.reply()


async def _aread(reader: _Reader, lines: AsyncIterator[str], heard: Any) -> Reply:
    async for line in lines:
        if (notification := reader.feed(line)) is not None and heard is not None:
            await resolved(heard(notification))
    return reader.reply()


class Transport:
    """POSTs one JSON-RPC request and reads the reply (notifications go to ``heard``)."""

    def __init__(self, url: str, timeout: float | None) -> None:
        self.url, self.timeout = url, timeout

    def _client(self) -> httpx.AsyncClient:
        return _httpx().AsyncClient(timeout=self.timeout)  # type: ignore[no-any-return]

    async def apost(self, body: Message, headers: dict[str, str], heard: Any) -> Reply:
        async with (
            self._client() as http,
            http.stream("POST", self.url, json=body, headers=headers) as response,
        ):
            reader = _Reader(response.status_code, response.headers.get("content-type", ""))
            return await _aread(reader, response.aiter_lines(), heard)

    def post(self, body: Message, headers: dict[str, str], heard: Any) -> Reply:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None

    def close(self) -> None:
        return None

    def unserved(self) -> str | None:
        """Why no task of this endpoint can run, when that is known (else None)."""
        return None


class Live(Transport):
    """A server over the network."""

    _http: httpx.Client | None = None

    def post(self, body: Message, headers: dict[str, str], heard: Any) -> Reply:
        if self._http is None:
            self._http = _httpx().Client(timeout=self.timeout)
        with self._http.stream("POST", self.url, json=body, headers=headers) as response:
            reader = _Reader(response.status_code, response.headers.get("content-type", ""))
            return _read(reader, response.iter_lines(), heard)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None


class InProcess(Transport):
    """The project's ASGI application, called through ``httpx.ASGITransport``: responses
    arrive whole (a call's notifications come with its result)."""

    def __init__(self, application: Any, url: str, timeout: float | None) -> None:
        super().__init__(url, timeout)
        self.application = application

    def _client(self) -> httpx.AsyncClient:
        httpx = _httpx()
        transport = httpx.ASGITransport(app=self.application)
        return httpx.AsyncClient(transport=transport, timeout=self.timeout)  # type: ignore[no-any-return]

    def post(self, body: Message, headers: dict[str, str], heard: Any) -> Reply:
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
        reply: Reply = async_to_sync(self._post_in_new_loop)(body, headers, heard_now.append)
        for message in heard_now if heard is not None else ():
            heard(message)
        return reply

    async def _post_in_new_loop(self, body: Message, headers: dict[str, str], heard: Any) -> Reply:
        try:
            return await self.apost(body, headers, heard)
        finally:  # the loop ends with this call: what the request left running goes first
            await drain()
            await self.aclose()

    async def aclose(self) -> None:
        database = LoopDatabase.of_running_loop()  # PostgreSQL: the loop's own connection
        if database is not None:
            await database.close()

    def unserved(self) -> str | None:
        """Embedded mode runs tasks only on a worker thread of this process."""
        if not get_config().EMBEDDED_WORKER or embedded.workers_running():
            return None
        return (
            "no task worker runs in this process (embedded mode), so the task never starts: "
            "under pytest, add the `mcp_tasks_worker` fixture to the test; in a "
            "TransactionTestCase, run it inside `with mcp_tasks.testing.task_worker():`"
        )


def allowed_host() -> str:
    """A Host the site allows (``testserver`` under Django's test runner)."""
    allowed = list(allowed_hosts())
    candidates = ["testserver", "localhost", "127.0.0.1", *(h.lstrip(".") for h in allowed)]
    return next((host for host in candidates if validate_host(host, allowed)), "testserver")

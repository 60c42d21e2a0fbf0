"""One HTTP response that starts as nothing and becomes JSON or an SSE stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from .. import jsontext

Send = Callable[[dict[str, Any]], Awaitable[None]]
Spill = Callable[[int, dict[str, Any]], Awaitable[None]]

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


def encode_json(message: dict[str, Any]) -> bytes:
    """A JSON-RPC message as UTF-8 JSON text; a lone surrogate or NaN/±inf the server made is
    repaired with a warning (:func:`mcp_tasks.jsontext.sendable`)."""
    try:
        return _dumps(message)
    except (UnicodeEncodeError, ValueError):
        return _dumps(jsontext.sendable(message, "a response"))


def _dumps(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode()


def sse_event(
    data: bytes | None, event_id: str | None = None, retry_ms: int | None = None
) -> bytes:
    """One SSE event carrying encoded JSON ``data``; None is a priming event (an id, empty data)."""
    head = "" if event_id is None else f"id: {event_id}\r\n"
    if retry_ms is not None:
        head += f"retry: {retry_ms}\r\n"
    if data is None:
        return f"{head}data: \r\n\r\n".encode()
    return f"{head}event: message\r\ndata: ".encode() + data + b"\r\n\r\n"


class ResponseStream:
    """Answers JSON when nothing streams; switches to SSE on the first event. A resumable
    stream (``resumable_id``) numbers its events, and once the connection is gone sends
    them to ``spill`` for a resume; other writes after the end are dropped."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.headers: list[tuple[bytes, bytes]] = []
        self._lock = asyncio.Lock()
        self.started = False
        self.streaming = False
        self.closed = False
        self.resumable_id: str | None = None
        self.retry_ms = 1000
        self.spill: Spill | None = None
        self.sequence = 0

    async def _start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        await self._send(
            {"type": "http.response.start", "status": status, "headers": [*self.headers, *headers]}
        )

    async def _body(self, body: bytes, more: bool) -> None:
        await self._send({"type": "http.response.body", "body": body, "more_body": more})

    def _next_id(self) -> str | None:
        if self.resumable_id is None:
            return None
        self.sequence += 1
        return f"{self.resumable_id}:{self.sequence}"

    async def open_sse(self) -> None:
        """Start the event stream now (for streams that begin before any event)."""
        async with self._lock:
            await self._open_sse_locked()

    async def _open_sse_locked(self) -> None:
        if self.closed or self.streaming:
            return
        await self._start(200, SSE_HEADERS)
        self.streaming = True
        if self.resumable_id is not None:
            await self._body(sse_event(None, f"{self.resumable_id}:0", self.retry_ms), True)
        else:
            await self._body(b"", True)

    async def _spilled(self, message: dict[str, Any]) -> bool:
        """After the connection ended: keep the event for a resume (True), or drop it."""
        if not self.closed:
            return False
        if self.spill is not None and self.streaming and self.resumable_id is not None:
            self.sequence += 1
            await self.spill(self.sequence, message)
        return True

    async def event(self, message: dict[str, Any]) -> None:
        """Send one JSON-RPC message as an SSE event (opening the stream if needed)."""
        async with self._lock:
            if await self._spilled(message):
                return
            data = encode_json(message)  # first: a failure leaves the stream as it was
            await self._open_sse_locked()
            await self._body(sse_event(data, self._next_id()), True)

    async def replay(self, message: dict[str, Any], event_id: str) -> None:
        """Send a stored event of another stream under its own id (a resume)."""
        async with self._lock:
            if self.closed:
                return
            data = encode_json(message)
            await self._open_sse_locked()
            await self._body(sse_event(data, event_id), True)

    async def ping(self) -> None:
        """A keep-alive comment; opens the stream if the answer is taking long."""
        async with self._lock:
            if self.closed:
                return
            await self._open_sse_locked()
            await self._body(b": ping\r\n\r\n", True)

    async def finish(
        self,
        message: dict[str, Any] | None,
        status: int = 200,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """End the response: the final message as an event or a JSON body; ``None`` → ``202``
        (or just close the stream). Encoded before closing, so a failure leaves the stream
        open for the error response."""
        async with self._lock:
            if message is not None and await self._spilled(message):
                return
            if self.closed:
                return
            data = None if message is None else encode_json(message)
            self.closed = True
            if self.streaming:
                await self._body(b"" if data is None else sse_event(data, self._next_id()), False)
            elif data is None:
                await self._start(status if status != 200 else 202, [(b"content-length", b"0")])
                await self._body(b"", False)
            else:
                length = str(len(data)).encode()
                json_headers = [(b"content-type", b"application/json"), (b"content-length", length)]
                await self._start(status, [*json_headers, *(headers or ())])
                await self._body(data, False)

    async def detach(self) -> None:
        """Close the connection now; later events are spilled for a resume."""
        async with self._lock:
            if self.closed:
                return
            await self._open_sse_locked()
            self.closed = True
            await self._body(b"", False)

    async def plain(self, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        """A non-MCP answer (an HTTP error before any processing)."""
        async with self._lock:
            if self.closed or self.started:
                return
            self.closed = True
            await self._start(status, [*headers, (b"content-length", str(len(body)).encode())])
            await self._body(body, False)

    def disconnected(self) -> None:
        self.closed = True

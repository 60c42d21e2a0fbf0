"""One HTTP response that starts as nothing and becomes JSON or an SSE stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

Send = Callable[[dict[str, Any]], Awaitable[None]]

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


def encode_event(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    return b"event: message\r\ndata: " + data.encode() + b"\r\n\r\n"


class ResponseStream:
    """Answers JSON when nothing streams; switches to SSE on the first event.

    Writes are serialised; after the client disconnects every write is a no-op.
    """

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        self._send = send
        self.headers = list(headers or [])
        self._lock = asyncio.Lock()
        self.started = False
        self.streaming = False
        self.closed = False

    async def _start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        await self._send({"type": "http.response.start", "status": status, "headers": self.headers + headers})

    async def _body(self, body: bytes, more: bool) -> None:
        await self._send({"type": "http.response.body", "body": body, "more_body": more})

    async def open_sse(self) -> None:
        """Start the event stream now (for streams that begin before any event)."""
        async with self._lock:
            await self._open_sse_locked()

    async def _open_sse_locked(self) -> None:
        if self.closed or self.streaming:
            return
        await self._start(200, SSE_HEADERS)
        self.streaming = True
        await self._body(b"", True)

    async def event(self, message: dict[str, Any]) -> None:
        """Send one JSON-RPC message as an SSE event (opening the stream if needed)."""
        async with self._lock:
            if self.closed:
                return
            await self._open_sse_locked()
            await self._body(encode_event(message), True)

    async def ping(self) -> None:
        """A keep-alive comment; opens the stream if the answer is taking long."""
        async with self._lock:
            if self.closed:
                return
            await self._open_sse_locked()
            await self._body(b": ping\r\n\r\n", True)

    async def finish(self, message: dict[str, Any] | None, status: int = 200) -> None:
        """End the response: the final message as an event or as a JSON body;
        ``None`` → ``202 Accepted`` with no body (or just close the stream)."""
        async with self._lock:
            if self.closed:
                return
            self.closed = True
            if self.streaming:
                await self._body(encode_event(message) if message is not None else b"", False)
                return
            if message is None:
                await self._start(status if status != 200 else 202, [(b"content-length", b"0")])
                await self._body(b"", False)
                return
            body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
            await self._start(status, [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())])
            await self._body(body, False)

    async def plain(self, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        """A non-MCP answer (an HTTP error before any processing)."""
        async with self._lock:
            if self.closed or self.started:
                return
            self.closed = True
            await self._start(status, headers + [(b"content-length", str(len(body)).encode())])
            await self._body(body, False)

    def disconnected(self) -> None:
        self.closed = True

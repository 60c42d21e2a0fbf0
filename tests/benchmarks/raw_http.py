"""A minimal HTTP/1.1 client on asyncio streams, for the load script (``legacy_load.py``) and
the drivers of ``compare.py`` (``bench_client.RawPool``).

httpx spends about a millisecond of CPU per request; at hundreds of requests per second
that is the core the server needs. This client does only what the scripts ask:
keep-alive requests with a JSON body, ``Content-Length`` or chunked answers, and a long
``GET`` whose events are just drained.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

#: Exceptions that mean the connection failed (reset, refused, closed early).
CONNECTION_ERRORS = (ConnectionError, asyncio.IncompleteReadError, OSError)


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages of the body (JSON or SSE)."""
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            found = []
            for line in self.body.split(b"\n"):
                if line.startswith(b"data:") and line[5:].strip():
                    found.append(json.loads(line[5:]))
            return found
        return [json.loads(self.body)] if self.body else []


def request_bytes(method: str, path: str, host: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class Connection:
    """One keep-alive connection; :meth:`request` sends one request and reads its answer."""

    host: str
    port: int
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    requests: int = field(default=0)

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except CONNECTION_ERRORS:
                pass
        self.reader = self.writer = None

    async def send(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        if self.writer is None:
            await self.open()
        assert self.writer is not None
        self.writer.write(request_bytes(method, path, f"{self.host}:{self.port}", headers, body))
        self.requests += 1

    async def head(self) -> tuple[int, dict[str, str]]:
        """The status line and headers of the next response."""
        assert self.reader is not None
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        return int(status_line.split()[1]), headers

    async def body(self, headers: dict[str, str]) -> bytes:
        assert self.reader is not None
        if "content-length" in headers:
            return await self.reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    return b"".join(chunks)
                chunks.append(chunk[:-2])
        return await self.reader.read()

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes = b""
    ) -> Response:
        await self.send(method, path, headers, body)
        status, response_headers = await self.head()
        data = await self.body(response_headers)
        if response_headers.get("connection", "").lower() == "close":
            await self.close()
        return Response(status, response_headers, data)

    async def drain(self) -> int:
        """Read a streamed body until the server ends it; the bytes read."""
        assert self.reader is not None
        total = 0
        while chunk := await self.reader.read(65536):
            total += len(chunk)
        return total

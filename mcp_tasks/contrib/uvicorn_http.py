"""uvicorn HTTP protocols that refuse a connection which waited too long to be accepted.

An overloaded process never sees the excess: it waits in the kernel's accept queue (uvloop
accepts one connection per loop iteration). On accepting one, these protocols read how long
ago the kernel last heard from it (``TCP_INFO``'s ``tcpi_last_data_recv``); past
``MAX_ACCEPT_WAIT`` they answer it and the queue's other late connections with the 503 of
:mod:`mcp_tasks.transport.admission`, without running the application, so the process
catches up. Linux only (elsewhere every connection is served)::

    uvicorn project.asgi:application --http mcp_tasks.contrib.uvicorn_http:HttpToolsProtocol

(``H11Protocol`` for uvicorn's pure-Python parser.)"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import struct
from typing import Any, cast

from uvicorn.protocols.http.h11_impl import H11Protocol as _H11Protocol

from ..conf import get_config
from ..core.background import in_background
from ..transport.admission import admission

#: Byte offset of ``tcpi_last_data_recv`` (ms, u32) in Linux's ``struct tcp_info``: eight
#: one-byte fields, then 11 u32 fields (rto … last_ack_sent).
_LAST_DATA_RECV_OFFSET = 8 + 11 * 4
_TCP_INFO = getattr(socket, "TCP_INFO", None)
#: Seconds a refused connection is kept open to read what the client still sends (closing a
#: socket with unread data sends a reset, which can destroy the 503 before it is read).
LINGER = 2.0
#: Connections one late connection may take from the accept queue (to refuse them).
DRAIN_AT_MOST = 256


def accept_wait(sock: Any) -> float | None:
    """Seconds since the kernel last received data (or the handshake) on this accepted
    socket; ``None`` when it cannot be told (not TCP, not Linux)."""
    if _TCP_INFO is None or sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _LAST_DATA_RECV_OFFSET + 4)
    except OSError:
        return None
    if len(info) < _LAST_DATA_RECV_OFFSET + 4:
        return None
    (milliseconds,) = struct.unpack_from("I", info, _LAST_DATA_RECV_OFFSET)
    return float(milliseconds) / 1000.0


def refusal_response(waited: float, limit: float) -> bytes:
    """The raw HTTP/1.1 503 sent to a connection that waited ``waited`` s (> ``limit``)."""
    refusal = admission.refusal(
        f"the connection waited {waited:.1f}s to be accepted (MAX_ACCEPT_WAIT {limit:g}s)",
        "accept_wait",
    )
    body = refusal.payload()
    head = [
        f"HTTP/1.1 {refusal.status} Service Unavailable",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{name.decode()}: {value.decode()}" for name, value in refusal.headers),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def answer_and_close(transport: asyncio.Transport, response: bytes) -> None:
    """Send ``response``, then close once the client has closed its side (or after
    ``LINGER`` s): what it still sends is read and dropped meanwhile."""
    transport.write(response)
    if transport.can_write_eof():
        transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER, transport.close)
    else:
        transport.close()


class Refused(asyncio.Protocol):
    """A connection taken from the accept queue only to be refused (at the client's EOF,
    ``Protocol.eof_received`` lets the transport close)."""

    def __init__(self, response: bytes) -> None:
        self.response = response

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        answer_and_close(transport, self.response)  # type: ignore[arg-type]


#: The descriptor of the listening socket behind each local (family, port), found once.
_listener_fds: dict[tuple[int, int], int] = {}


def listener_of(sock: Any) -> socket.socket | None:
    """A duplicate of this process's listening socket that accepted ``sock``, or ``None``
    (the caller closes it, else the port keeps listening at shutdown)."""
    host, port = sock.getsockname()[:2]
    key = (sock.family, port)
    known = _listener_fds.get(key)
    if known is not None and (found := _listening(known, sock.family, host, port)) is not None:
        return found
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return None
    for fd in fds:
        if (found := _listening(fd, sock.family, host, port)) is not None:
            _listener_fds[key] = fd
            return found
    return None


def _listening(fd: int, family: int, host: str, port: int) -> socket.socket | None:
    """A non-blocking duplicate of ``fd`` if it is a socket listening on ``host:port``."""
    try:
        if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
            return None
        candidate = socket.socket(fileno=os.dup(fd))
    except OSError:
        return None
    try:
        bound = candidate.getsockname()
        if (
            candidate.family == family
            and candidate.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            and bound[1] == port
            and bound[0] in (host, "0.0.0.0", "::")
        ):
            candidate.setblocking(False)
            return candidate
    except OSError:
        pass
    candidate.close()
    return None


class RefuseLateConnections:
    """Mixin for a uvicorn HTTP protocol: answer 503 to a connection accepted too late, then
    empty the backed-up queue itself up to the first connection that waited less."""

    transport: asyncio.Transport
    config: Any
    server_state: Any
    app_state: Any
    _refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's, not an asyncio subclass
        super().connection_made(transport)  # type: ignore[misc]
        limit = get_config().MAX_ACCEPT_WAIT
        if limit is None:
            return
        sock = transport.get_extra_info("socket")
        waited = accept_wait(sock)
        if waited is None or waited <= limit:
            return
        self._refused = True
        answer_and_close(transport, refusal_response(waited, limit))
        listener = listener_of(sock)
        if listener is not None:
            with listener:
                self._refuse_queue(listener, limit)

    def _refuse_queue(self, listener: socket.socket, limit: float) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(DRAIN_AT_MOST):
            try:
                accepted, _ = listener.accept()
            except OSError:  # empty (EAGAIN), or out of descriptors: uvloop takes it from here
                return
            accepted.setblocking(False)
            waited = accept_wait(accepted)
            if waited is not None and waited > limit:
                refused = functools.partial(Refused, refusal_response(waited, limit))
                in_background(loop.connect_accepted_socket(refused, accepted))
                continue
            protocol: Any = type(self)  # built as uvicorn's own factory builds it
            served = functools.partial(
                protocol,
                config=self.config,
                server_state=self.server_state,
                app_state=self.app_state,
            )
            # A connection the client dropped meanwhile is forgotten.
            in_background(loop.connect_accepted_socket(served, accepted))
            return  # the connections behind it waited less

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)  # type: ignore[misc]

    def eof_received(self) -> Any:
        if self._refused:
            return None  # the client has read the answer: the transport closes
        return super().eof_received()  # type: ignore[misc]


class H11Protocol(RefuseLateConnections, _H11Protocol):
    """uvicorn's h11 protocol, refusing connections accepted after ``MAX_ACCEPT_WAIT``."""


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _HttpToolsProtocol
except ImportError:  # httptools not installed: only H11Protocol
    pass
else:

    class HttpToolsProtocol(RefuseLateConnections, _HttpToolsProtocol):
        """uvicorn's httptools protocol, refusing connections accepted after
        ``MAX_ACCEPT_WAIT``."""

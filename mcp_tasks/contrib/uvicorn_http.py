"""uvicorn HTTP protocols that refuse a connection which waited too long to be accepted.

A process given more CPU-bound requests than it can serve does not see the excess: uvicorn
with uvloop takes new connections from the kernel about as fast as it serves them (libuv
accepts one per event-loop iteration), so the rest waits in the listening socket's accept
queue, unseen by the application, for up to ``--backlog`` ÷ the process's rate. These
protocols read, when a connection is accepted, how long ago the kernel last heard from it
(``TCP_INFO``'s ``tcpi_last_data_recv``: the moment its request arrived, or its handshake
completed if it has sent nothing yet). Past ``MAX_ACCEPT_WAIT`` seconds the connection is
answered at once with HTTP 503, ``Retry-After`` and a JSON-RPC error (``-32000``, the same
refusal as :mod:`.admission`'s), without running the application, and the other late
connections of the queue with it. Refusing costs a small part of serving, so the process
catches up with its queue and a served request has waited at most about
``MAX_ACCEPT_WAIT``. Use it with ``--http``::

    uvicorn project.asgi:application --http mcp_tasks.contrib.uvicorn_http:HttpToolsProtocol

(``H11Protocol`` for uvicorn's pure-Python parser). Linux only: elsewhere the wait cannot be
read and every connection is served.
"""

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

#: Byte offset of ``tcpi_last_data_recv`` (milliseconds, u32) in Linux's ``struct tcp_info``:
#: eight one-byte fields, then rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans,
#: fackets, last_data_sent, last_ack_sent (u32 each).
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
    """A connection taken from the accept queue only to be refused."""

    def __init__(self, response: bytes) -> None:
        self.response = response

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        answer_and_close(transport, self.response)  # type: ignore[arg-type]

    def eof_received(self) -> None:
        return None  # the client has read the answer: the transport closes


#: The descriptor of the listening socket behind each local (family, port), found once.
_listener_fds: dict[tuple[int, int], int] = {}


def listener_of(sock: Any) -> socket.socket | None:
    """A duplicate of the listening socket of this process that accepted ``sock`` (the
    caller closes it: a duplicate kept open would keep the port listening while uvicorn
    shuts down), or ``None``."""
    host, port = sock.getsockname()[:2]
    key = (sock.family, port)
    fd = _listener_fds.get(key)
    if fd is not None:
        found = _listening(fd, sock.family, host, port)
        if found is not None:
            return found
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return None
    for fd in fds:
        found = _listening(fd, sock.family, host, port)
        if found is not None:
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
    """Mixin for a uvicorn HTTP protocol: answer 503 to a connection accepted too late.

    A late connection means the accept queue is backed up, and uvloop takes one connection
    from it per event-loop iteration: so the protocol then empties the queue itself, refusing
    every connection that waited too long, up to the first that did not, which it hands to
    uvicorn like any other.
    """

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

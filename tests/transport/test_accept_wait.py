"""Connections that waited too long in the kernel's accept queue get 503 (issue 10 §3).

``mcp_tasks.contrib.uvicorn_http``'s protocols read how long a new connection waited before
uvicorn accepted it and refuse it past ``MAX_ACCEPT_WAIT``. The live tests make a real
uvicorn (uvloop) fall behind the only way that needs no timing: they stop the process
(``SIGSTOP``) while clients connect and send their calls, then let it run again. What waited
in the accept queue meanwhile is refused at once with 503 + ``Retry-After``; a connection
opened before the stop and a new one after are served.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from mcp_tasks.contrib.uvicorn_http import accept_wait, listener_of, refusal_response
from tests.conftest import AsgiServerFactory, LiveServer
from tests.support.live import final_message, modern_headers, modern_request
from tests.transport.refusals import assert_refused

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="TCP_INFO's last_data_recv is read on Linux only"
)

#: How long the live tests keep the server stopped, and its MAX_ACCEPT_WAIT.
STOPPED = 1.5
LIMIT = 0.3


@contextlib.contextmanager
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    with sock:
        yield sock


async def measured_wait(server_sock: socket.socket) -> float | None:
    """Accept one connection as asyncio would and read its wait."""
    accepted, _ = server_sock.accept()
    transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
        asyncio.Protocol, accepted
    )
    try:
        return accept_wait(transport.get_extra_info("socket"))
    finally:
        transport.close()


@linux_only
async def test_accept_wait_is_how_long_the_connection_sat_in_the_accept_queue() -> None:
    with listener() as server_sock, socket.create_connection(server_sock.getsockname()) as early:
        early.sendall(b"GET / HTTP/1.1\r\n\r\n")
        time.sleep(0.4)  # nobody accepts meanwhile: the connection waits in the kernel
        waited = await measured_wait(server_sock)
        with socket.create_connection(server_sock.getsockname()) as prompt:
            prompt.sendall(b"GET / HTTP/1.1\r\n\r\n")
            waited_not = await measured_wait(server_sock)
    assert waited is not None and waited_not is not None
    assert waited >= 0.39  # the kernel counts in jiffies (1 to 10 ms)
    assert waited_not < waited


@linux_only
@pytest.mark.parametrize("bound_to", ["127.0.0.1", "0.0.0.0"])
def test_the_listening_socket_behind_an_accepted_connection_is_found(bound_to: str) -> None:
    with contextlib.ExitStack() as stack:
        decoy = stack.enter_context(socket.socket())  # another listener of the process
        decoy.bind(("127.0.0.1", 0))
        decoy.listen(1)
        server_sock = stack.enter_context(socket.socket())
        server_sock.bind((bound_to, 0))
        server_sock.listen(8)
        port = server_sock.getsockname()[1]
        stack.enter_context(socket.create_connection(("127.0.0.1", port)))
        accepted = stack.enter_context(server_sock.accept()[0])
        for _ in range(2):  # the second time from what the first remembered
            found = listener_of(accepted)
            assert found is not None and found.fileno() != server_sock.fileno()
            with found:
                assert found.getsockname() == server_sock.getsockname()
                assert found.gettimeout() == 0.0  # non-blocking: draining never blocks
        second = stack.enter_context(socket.create_connection(("127.0.0.1", port)))
        assert second.getpeername()  # closing the duplicates left the port listening
        assert stack.enter_context(server_sock.accept()[0])


async def test_accept_wait_is_unknown_where_there_is_no_tcp_socket() -> None:
    reader_sock, writer_sock = socket.socketpair()
    transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
        asyncio.Protocol, reader_sock
    )
    try:
        assert (
            accept_wait(transport.get_extra_info("socket")) is None
        )  # a Unix socket: served, never refused
    finally:
        transport.close()
        writer_sock.close()


def test_the_refusal_is_a_complete_http_response_with_a_json_rpc_error() -> None:
    raw = refusal_response(2.5, 1.0)
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 503 Service Unavailable"
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert int(headers["content-length"]) == len(body)
    assert headers["connection"] == "close" and int(headers["retry-after"]) >= 1
    response = httpx.Response(503, headers=headers, content=body)
    assert_refused(response)
    assert "2.5s" in response.json()["error"]["message"]
    assert "MAX_ACCEPT_WAIT 1s" in response.json()["error"]["message"]


# -- a real uvicorn --------------------------------------------------------------------------

PROTOCOLS = ["HttpToolsProtocol", "H11Protocol"]


def start(asgi_server: AsgiServerFactory, protocol: str, limit: str) -> LiveServer:
    return asgi_server(
        {
            "DJANGO_SETTINGS_MODULE": "tests.support.live_settings",
            "UVICORN_HTTP": f"mcp_tasks.contrib.uvicorn_http:{protocol}",
            "MCP_TASKS_TEST_MAX_ACCEPT_WAIT": limit,
        },
        server="uvicorn",
    )


@contextlib.asynccontextmanager
async def stopped(server: LiveServer) -> AsyncIterator[None]:
    """The server process is stopped inside the block, and for ``STOPPED`` s at least."""
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        yield
        await asyncio.sleep(max(0.0, STOPPED - (time.monotonic() - started)))
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


async def add(client: httpx.AsyncClient, server: LiveServer, n: int) -> httpx.Response:
    body = modern_request("tools/call", {"name": "add", "arguments": {"a": n, "b": 1}})
    return await client.post(server.mcp_url, json=body, headers=modern_headers("tools/call", "add"))


def assert_served(response: httpx.Response, n: int) -> None:
    assert response.status_code == 200, response.text
    assert final_message(response)["result"]["structuredContent"] == {"result": n + 1}


async def calls_sent_while_stopped(
    client: httpx.AsyncClient, server: LiveServer, count: int
) -> list[httpx.Response]:
    async with stopped(server):
        pending = [asyncio.ensure_future(add(client, server, n)) for n in range(count)]
        await asyncio.sleep(0.2)
    return list(await asyncio.gather(*pending))


@linux_only
@pytest.mark.live
@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_connections_left_in_the_accept_queue_past_the_limit_get_503_at_once(
    asgi_server: AsgiServerFactory, protocol: str
) -> None:
    server = start(asgi_server, protocol, str(LIMIT))
    async with httpx.AsyncClient(timeout=30) as kept, httpx.AsyncClient(timeout=30) as fresh:
        assert_served(await add(kept, server, 0), 0)  # a connection accepted before the stop
        async with stopped(server):
            on_kept = asyncio.ensure_future(add(kept, server, 1))
            late = [asyncio.ensure_future(add(fresh, server, n)) for n in range(5)]
            await asyncio.sleep(0.2)  # connected and sent: the kernel completes handshakes alone
        assert_served(await on_kept, 1)  # its call waited in its socket, not the accept queue
        for response in await asyncio.gather(*late):
            assert_refused(response)
            assert "MAX_ACCEPT_WAIT" in response.json()["error"]["message"]
            assert response.headers["connection"] == "close"
    async with httpx.AsyncClient(timeout=30) as after:
        assert_served(await add(after, server, 7), 7)  # and the process serves again
    assert "refused 1 request(s) with 503: the connection waited" in server.output()


@linux_only
@pytest.mark.live
async def test_with_no_limit_every_late_connection_is_served(
    asgi_server: AsgiServerFactory,
) -> None:
    server = start(asgi_server, "HttpToolsProtocol", "none")
    async with httpx.AsyncClient(timeout=30) as client:
        for n, response in enumerate(await calls_sent_while_stopped(client, server, 3)):
            assert_served(response, n)


# -- the drain, in process -------------------------------------------------------------------


async def hello_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


async def exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` on a new connection and read the answer to the end."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    try:
        return await reader.read()
    finally:
        writer.close()


@linux_only
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_one_late_connection_empties_the_queue_of_late_ones_and_serves_the_first_fresh(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody accepts for a while (the process is busy), then uvicorn's protocol takes one
    connection: it refuses it, and refuses the other late ones itself instead of one per
    event-loop turn; the connection behind them, which did not wait, reaches the app."""
    import uvloop
    from django.test import override_settings
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from mcp_tasks.contrib import uvicorn_http

    config = Config(hello_app, http=f"mcp_tasks.contrib.uvicorn_http:{protocol}", lifespan="off")
    config.load()
    state = ServerState()
    refused_by_the_drain: list[bytes] = []

    class Spy(uvicorn_http.Refused):
        def __init__(self, response: bytes) -> None:
            refused_by_the_drain.append(response)
            super().__init__(response)

    monkeypatch.setattr(uvicorn_http, "Refused", Spy)

    async def scenario() -> tuple[list[bytes], bytes]:
        loop = asyncio.get_running_loop()
        with listener() as server_sock, override_settings(MCP_TASKS={"MAX_ACCEPT_WAIT": 0.2}):
            port = server_sock.getsockname()[1]
            request = b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
            late = [asyncio.ensure_future(exchange(port, request)) for _ in range(3)]
            await asyncio.sleep(0.5)  # they wait in the accept queue
            fresh = asyncio.ensure_future(exchange(port, request))
            await asyncio.sleep(0.05)
            server = await loop.create_server(
                lambda: config.http_protocol_class(  # type: ignore[call-arg]
                    config=config, server_state=state, app_state={}
                ),
                sock=server_sock,
            )
            try:
                answers = await asyncio.wait_for(asyncio.gather(*late), 10)
                return answers, await asyncio.wait_for(fresh, 10)
            finally:
                server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        answers, fresh_answer = runner.run(scenario())
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), answer
        assert b"MAX_ACCEPT_WAIT" in answer
    assert len(refused_by_the_drain) == 2  # the first through uvicorn, the others drained
    assert fresh_answer.startswith(b"HTTP/1.1 200 OK"), fresh_answer
    assert b"\r\nhello\r\n" in fresh_answer

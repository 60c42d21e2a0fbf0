"""Admission control over real HTTP (issue 10 §3): past ``MAX_REQUESTS_IN_PROGRESS`` POSTs in
progress, a new POST gets HTTP 503 with ``Retry-After`` and a JSON-RPC error at once; streams
don't count; once the requests in progress end, all is normal again.

One live server (``tests.support.live_settings`` with ``MAX_REQUESTS_IN_PROGRESS`` = 3) for the
module; the requests are held by the ``wait_for_gate`` tool until the test writes the gate
file, and every test's requests have ended when it does. No timing is asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_tasks.transport import admission
from tests.conftest import LiveServer
from tests.support.live import (
    await_file,
    final_message,
    legacy_headers,
    legacy_initialize,
    modern_headers,
    modern_request,
)
from tests.transport.refusals import assert_refused

pytestmark = [pytest.mark.live]

LIMIT = 3


@pytest.fixture(scope="module")
def server_env() -> dict[str, str]:
    return {"MCP_TASKS_TEST_MAX_REQUESTS_IN_PROGRESS": str(LIMIT)}


async def call(
    http: httpx.AsyncClient, server: LiveServer, tool: str, **args: Any
) -> httpx.Response:
    body = modern_request("tools/call", {"name": tool, "arguments": args})
    return await http.post(server.mcp_url, json=body, headers=modern_headers("tools/call", tool))


@contextlib.asynccontextmanager
async def held(
    http: httpx.AsyncClient, server: LiveServer, gate_dir: Path, count: int
) -> AsyncIterator[list[asyncio.Task[httpx.Response]]]:
    """``count`` calls of ``wait_for_gate`` in progress until the block ends (then the gate
    opens and the calls finish)."""
    calls = [
        asyncio.ensure_future(
            call(http, server, "wait_for_gate", marker_dir=str(gate_dir), name=str(n))
        )
        for n in range(count)
    ]
    try:
        for n in range(count):
            assert await await_file(gate_dir / f"started-{n}"), f"held call {n} never started"
        yield calls
    finally:
        (gate_dir / "gate").write_text("open")
        await asyncio.gather(*calls, return_exceptions=True)


async def test_a_post_past_the_limit_is_refused_with_503_and_retry_after(
    http: httpx.AsyncClient, server: LiveServer, tmp_path: Path
) -> None:
    async with held(http, server, tmp_path, LIMIT):
        assert_refused(await call(http, server, "add", a=1, b=2))


async def test_a_legacy_post_past_the_limit_is_refused_too(
    http: httpx.AsyncClient, server: LiveServer, tmp_path: Path
) -> None:
    session_id = await legacy_initialize(http, server.mcp_url)
    async with held(http, server, tmp_path, LIMIT):
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        response = await http.post(server.mcp_url, json=ping, headers=legacy_headers(session_id))
        assert_refused(response)


async def test_the_held_requests_finish_and_new_ones_are_served_after_the_release(
    http: httpx.AsyncClient, server: LiveServer, tmp_path: Path
) -> None:
    async with held(http, server, tmp_path, LIMIT) as calls:
        assert_refused(await call(http, server, "add", a=1, b=2))
    for n, task in enumerate(calls):
        result = final_message(task.result())["result"]
        assert result["content"][0]["text"] == f"{n} passed the gate"
    response = await call(http, server, "add", a=1, b=2)
    assert response.status_code == 200
    assert final_message(response)["result"]["structuredContent"] == {"result": 3}


async def test_a_legacy_get_stream_is_not_a_request_in_progress(
    http: httpx.AsyncClient, server: LiveServer, tmp_path: Path
) -> None:
    session_id = await legacy_initialize(http, server.mcp_url)
    async with held(http, server, tmp_path, LIMIT):
        headers = legacy_headers(session_id, Accept="text/event-stream")
        async with http.stream("GET", server.mcp_url, headers=headers) as stream:
            assert stream.status_code == 200


async def test_acknowledged_listen_streams_do_not_count(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    async with contextlib.AsyncExitStack() as streams:
        for n in range(LIMIT + 1):
            body = modern_request(
                "subscriptions/listen",
                {"notifications": {"toolsListChanged": True}},
                request_id=f"listen-{n}",
            )
            stream = await streams.enter_async_context(
                http.stream(
                    "POST",
                    server.mcp_url,
                    json=body,
                    headers=modern_headers("subscriptions/listen"),
                )
            )
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                if "notifications/subscriptions/acknowledged" in line:
                    break
        response = await call(http, server, "add", a=2, b=2)
        assert response.status_code == 200, response.text


async def test_a_refusal_is_logged_as_a_warning(
    http: httpx.AsyncClient, server: LiveServer, tmp_path: Path
) -> None:
    # Refusals are logged at most once every WARN_EVERY seconds: the other tests' refusals
    # were all made before this test began, so after that long the next one is logged.
    quiet_until = time.monotonic() + admission.WARN_EVERY
    logged_before = server.log_path.stat().st_size
    while (left := quiet_until - time.monotonic()) > 0:
        await asyncio.sleep(left)
    async with held(http, server, tmp_path, LIMIT):
        assert_refused(await call(http, server, "add", a=1, b=2))
    with server.log_path.open("rb") as log:
        log.seek(logged_before)
        output = log.read().decode(errors="replace")
    assert "WARNING" in output and "MAX_REQUESTS_IN_PROGRESS" in output

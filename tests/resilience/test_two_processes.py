"""Two ASGI server processes sharing one database and one Redis channel layer: any process
serves any request of any legacy session (no sticky routing).

The module's tests share one pair of processes (``servers``); each test opens sessions of
its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from tests.conftest import LiveServer, launch_server
from tests.support.live import (
    attach_server_output,
    await_file,
    final_message,
    legacy_headers,
    legacy_initialize,
    live_env,
    messages_of,
    sse_messages,
)

pytestmark = [pytest.mark.live, pytest.mark.redis]

ELICITATION: dict[str, Any] = {"elicitation": {"form": {}}}


@contextlib.contextmanager
def serving(overrides: Mapping[str, str], log_path: Path, *, label: str) -> Iterator[LiveServer]:
    """A live server (:func:`tests.conftest.launch_server`), stopped when the block ends."""
    server = launch_server(overrides, log_path, label=label)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def module_servers(
    request: pytest.FixtureRequest, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Processes A and B: one database, one Redis channel layer (the run's Redis and key
    prefix, as ``asgi_server(redis=True)`` gives). A legacy call that streams nothing
    answers JSON, or opens its SSE stream at the first keep-alive: 1 s here, not 15, so the
    tests that hold a call open do not wait 15 s for its response headers."""
    log_dir = tmp_path_factory.mktemp("two-processes")
    env = {**live_env(), "REDIS_URL": redis_url, "REDIS_PREFIX": settings.REDIS_PREFIX}
    env["MCP_TASKS_TEST_SSE_KEEPALIVE"] = "1"
    env["DATABASE_URL"] = request.getfixturevalue("_live_databases").new()
    with contextlib.ExitStack() as started:
        a = started.enter_context(serving(env, log_dir / "a.log", label="process A"))
        b = started.enter_context(serving(env, log_dir / "b.log", label="process B"))
        yield a, b


@pytest.fixture
def servers(
    request: pytest.FixtureRequest, module_servers: tuple[LiveServer, LiveServer]
) -> tuple[LiveServer, LiveServer]:
    """The module's A and B; their output goes to the report of a failed test."""
    for server in module_servers:
        attach_server_output(request, server)
    return module_servers


def tools_call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def test_session_initialized_on_a_is_served_by_b(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer]
) -> None:
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url)
    response = await http.post(
        b.mcp_url,
        json=tools_call(1, "summarize", {"values": [1, 2]}),
        headers=legacy_headers(session_id),
    )
    assert response.status_code == 200
    assert final_message(response)["result"]["structuredContent"] == {"total": 3, "count": 2}


async def test_session_deleted_on_b_is_gone_on_a(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer]
) -> None:
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url)
    deleted = await http.delete(b.mcp_url, headers=legacy_headers(session_id))
    assert deleted.status_code in (200, 204)
    response = await http.post(
        a.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers=legacy_headers(session_id),
    )
    assert response.status_code == 404


async def test_list_changed_published_on_a_reaches_a_get_stream_on_b(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer]
) -> None:
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url)
    async with http.stream(
        "GET", b.mcp_url, headers=legacy_headers(session_id, Accept="text/event-stream")
    ) as stream:
        assert stream.status_code == 200
        messages = sse_messages(stream)
        await http.post(
            a.mcp_url,
            json=tools_call(3, "announce", {"kind": "resources"}),
            headers=legacy_headers(session_id),
        )
        notification = await anext(messages)
    assert notification["method"] == "notifications/resources/list_changed"


async def test_elicitation_reply_posted_to_b_reaches_the_tool_waiting_on_a(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer]
) -> None:
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url, capabilities=ELICITATION)
    call = tools_call(11, "elicit_kind", {"kind": "str"})
    async with http.stream(
        "POST", a.mcp_url, json=call, headers=legacy_headers(session_id)
    ) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        messages = sse_messages(stream)
        question = await anext(messages)
        assert question["method"] == "elicitation/create"
        assert question["params"]["requestedSchema"]["properties"]["value"]["type"] == "string"
        reply = {
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "accept", "content": {"value": "via B"}},
        }
        posted = await http.post(b.mcp_url, json=reply, headers=legacy_headers(session_id))
        assert posted.status_code == 202
        final = await anext(messages)
    assert final["id"] == 11
    assert final["result"]["structuredContent"] == {
        "action": "accept",
        "data": "via B",
        "type_name": "str",
    }


async def test_reply_from_another_session_does_not_answer_the_question(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer]
) -> None:
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url, capabilities=ELICITATION)
    intruder = await legacy_initialize(http, b.mcp_url, capabilities=ELICITATION)
    call = tools_call(12, "elicit_kind", {"kind": "str"})
    async with http.stream(
        "POST", a.mcp_url, json=call, headers=legacy_headers(session_id)
    ) as stream:
        messages = sse_messages(stream)
        question = await anext(messages)
        forged = {
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "accept", "content": {"value": "forged"}},
        }
        await http.post(b.mcp_url, json=forged, headers=legacy_headers(intruder))
        reply = {
            "jsonrpc": "2.0",
            "id": question["id"],
            "result": {"action": "accept", "content": {"value": "genuine"}},
        }
        await http.post(b.mcp_url, json=reply, headers=legacy_headers(session_id))
        final = await anext(messages)
    assert final["result"]["structuredContent"]["data"] == "genuine"


async def test_log_level_set_via_b_is_honoured_by_a_call_on_a(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer]
) -> None:
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url)
    set_level = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "logging/setLevel",
        "params": {"level": "critical"},
    }
    response = await http.post(b.mcp_url, json=set_level, headers=legacy_headers(session_id))
    assert final_message(response)["result"] == {}
    response = await http.post(
        a.mcp_url, json=tools_call(2, "log_every_level", {}), headers=legacy_headers(session_id)
    )
    messages = messages_of(response)
    levels = [m["params"]["level"] for m in messages if m.get("method") == "notifications/message"]
    assert levels == ["critical", "alert", "emergency"]
    assert messages[-1]["result"]["content"][0]["text"] == "logged"


@pytest.mark.cancel
async def test_notifications_cancelled_posted_to_b_cancels_the_call_on_a(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer], tmp_path: Path
) -> None:
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url)
    call = tools_call(21, "wait_for_cancel", {"marker_dir": str(tmp_path)})
    async with http.stream(
        "POST", a.mcp_url, json=call, headers=legacy_headers(session_id)
    ) as stream:
        assert await await_file(tmp_path / "started"), "the tool never started"
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 21, "reason": "user pressed stop"},
        }
        posted = await http.post(b.mcp_url, json=cancel, headers=legacy_headers(session_id))
        assert posted.status_code == 202
        assert await await_file(tmp_path / "cancelled"), "the tool on A was not cancelled"
        body = (await stream.aread()).decode()
    assert '"result"' not in body  # a cancelled request gets no response
    assert not (tmp_path / "finished").exists()


@pytest.mark.cancel
async def test_cancel_for_another_request_id_does_not_cancel_the_call(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer], tmp_path: Path
) -> None:
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url)
    call = tools_call(31, "wait_for_cancel", {"marker_dir": str(tmp_path), "seconds": 3.0})
    async with http.stream(
        "POST", a.mcp_url, json=call, headers=legacy_headers(session_id)
    ) as stream:
        assert await await_file(tmp_path / "started")
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 32},
        }
        await http.post(b.mcp_url, json=cancel, headers=legacy_headers(session_id))
        body = (await stream.aread()).decode()
    assert "finished without being cancelled" in body
    assert not (tmp_path / "cancelled").exists()


async def test_streams_ending_on_b_lose_no_notification_meant_for_another_stream_on_b(
    http: httpx.AsyncClient, servers: tuple[LiveServer, LiveServer]
) -> None:
    """A stream's consumer reads the channel layer; when the stream ends, its read must end
    without dropping a message meant for another consumer of its process (as cancelling
    the read that holds ``RedisChannelLayer``'s receive lock does: django/channels_redis#366,
    system check mcp_tasks.W004). Brief GET streams keep ending on B while A announces;
    B's long GET stream must get every announcement."""
    a, b = servers
    session_id = await legacy_initialize(http, a.mcp_url)
    announcements = 150
    received = 0
    async with http.stream(
        "GET", b.mcp_url, headers=legacy_headers(session_id, Accept="text/event-stream")
    ) as stream:
        assert stream.status_code == 200
        messages = sse_messages(stream)
        all_received = asyncio.Event()

        async def count() -> None:
            nonlocal received
            async for message in messages:
                if message.get("method") == "notifications/tools/list_changed":
                    received += 1
                    if received == announcements:
                        all_received.set()

        async def end_streams_on_b() -> None:
            headers = legacy_headers(session_id, Accept="text/event-stream")
            while not all_received.is_set():
                async with http.stream("GET", b.mcp_url, headers=headers) as brief:
                    assert brief.status_code == 200

        reader = asyncio.ensure_future(count())
        churn = [asyncio.ensure_future(end_streams_on_b()) for _ in range(6)]
        try:
            for n in range(announcements):
                response = await http.post(
                    a.mcp_url,
                    json=tools_call(100 + n, "announce", {"kind": "tools"}),
                    headers=legacy_headers(session_id),
                )
                assert response.status_code == 200
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_received.wait(), 15)
        finally:
            all_received.set()
            churned = await asyncio.gather(*churn, return_exceptions=True)
            reader.cancel()
    assert received == announcements
    assert [outcome for outcome in churned if outcome is not None] == []

"""The ``mcp`` 2.3 SDK client, legacy era (``Client(url, mode="legacy")``, 2025-11-25
sessions), against a live server running the test tools of ``tests.live_tools``: what only
this era does (sessions, ping, logging/setLevel, the GET stream, cancellation by
notification). What both eras do alike runs in ``test_sdk_client.py``, once per era."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from tests.support.live import (
    LEGACY,
    await_file,
    final_message,
    legacy_headers,
    legacy_initialize,
    sdk_client,
    sse_messages,
)
from tests.support.results import text_of

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]


def legacy(url: str, **kwargs: Any) -> Any:
    return sdk_client(url, mode="legacy", **kwargs)


# -- session, listing, calls ------------------------------------------------------------------


async def test_client_initializes_a_legacy_session(url: str) -> None:
    async with legacy(url) as client:
        assert client.protocol_version == LEGACY
        assert client.server_info is not None
        assert client.server_info.name == "mcp-tasks-demo"
        assert client.server_capabilities.logging is not None


async def test_ping_answers_in_a_legacy_session(url: str) -> None:
    async with legacy(url) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            result = await client.send_ping()
    assert isinstance(result, types.EmptyResult)


# -- prompts and resources --------------------------------------------------------------------


async def test_prompts_list_and_get(url: str) -> None:
    async with legacy(url) as client:
        names = {prompt.name for prompt in (await client.list_prompts()).prompts}
        result = await client.get_prompt("live_greeting", {"name": "Lin"})
    assert "live_greeting" in names
    content = result.messages[0].content
    assert isinstance(content, types.TextContent)
    assert content.text == "Write a plain greeting for Lin."


async def test_prompt_get_can_elicit_over_the_stream(url: str) -> None:
    async def no(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"value": False})

    async with legacy(url, elicitation_callback=no) as client:
        result = await client.get_prompt("confirm_examples", {"topic": "monads"})
    content = result.messages[0].content
    assert isinstance(content, types.TextContent)
    assert content.text == "Explain monads."


async def test_resources_and_templates_are_listed(url: str) -> None:
    async with legacy(url) as client:
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
    assert "live://static/info" in resources
    assert "live://items/{item_id}" in templates


async def test_resource_and_template_read(url: str) -> None:
    async with legacy(url) as client:
        fixed = await client.read_resource("live://static/info")
        templated = await client.read_resource("live://items/b2")
    assert isinstance(fixed.contents[0], types.TextResourceContents)
    assert fixed.contents[0].text == "live tools are here"
    assert isinstance(templated.contents[0], types.TextResourceContents)
    assert '"label": "item b2"' in templated.contents[0].text


async def test_unknown_resource_is_resource_not_found(url: str) -> None:
    async with legacy(url) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("live://nothing/here")
    assert caught.value.code == -32002


# -- notifications ----------------------------------------------------------------------------


async def test_set_logging_level_filters_log_notifications(url: str) -> None:
    received: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)

    async with legacy(url, logging_callback=on_log) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("error")
        await client.call_tool("log_every_level", {})
    assert [p.level for p in received] == ["error", "critical", "alert", "emergency"]
    assert received[0].data == "error message"
    assert received[0].logger == "live"


async def test_set_logging_level_applies_to_later_calls_of_the_session(url: str) -> None:
    received: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params.level)

    async with legacy(url, logging_callback=on_log) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("emergency")
        await client.call_tool("log_every_level", {})
        await client.call_tool("log_every_level", {})
    assert received == ["emergency", "emergency"]


async def test_logs_arrive_at_every_level_when_no_level_was_set(url: str) -> None:
    received: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params.level)

    async with legacy(url, logging_callback=on_log) as client:
        await client.call_tool("log_every_level", {})
    assert received == [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]


# -- elicitation ------------------------------------------------------------------------------


async def test_two_elicitations_in_one_call_are_asked_in_order(url: str) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        value: Any = "Lin" if params.message == "First name?" else 29
        return types.ElicitResult(action="accept", content={"value": value})

    async with legacy(url, elicitation_callback=answer) as client:
        result = await client.call_tool("elicit_twice", {})
    assert text_of(result) == "Lin is 29"
    assert asked == ["First name?", "Age?"]


async def test_elicitation_error_reply_is_a_tool_error(url: str) -> None:
    async def refuse(context: Any, params: types.ElicitRequestParams) -> types.ErrorData:
        return types.ErrorData(code=-32603, message="no UI available")

    async with legacy(url, elicitation_callback=refuse) as client:
        result = await client.call_tool("elicit_kind", {"kind": "str"})
    assert result.is_error is True
    assert "no UI available" in text_of(result)


# -- sampling and roots -----------------------------------------------------------------------


# -- the GET stream ---------------------------------------------------------------------------


async def test_get_stream_receives_list_changed_published_by_a_tool(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        session_id = await legacy_initialize(http, url)
        get_headers = legacy_headers(session_id, Accept="text/event-stream")
        async with http.stream("GET", url, headers=get_headers) as stream:
            assert stream.status_code == 200
            messages = sse_messages(stream)
            call = {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "announce", "arguments": {"kind": "prompts"}},
            }
            done = await http.post(url, json=call, headers=legacy_headers(session_id))
            assert final_message(done)["result"]["content"][0]["text"] == "announced"
            with anyio.fail_after(30):
                notification = await anext(messages)
    assert notification["method"] == "notifications/prompts/list_changed"


async def test_get_stream_receives_updates_only_for_subscribed_resources(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        session_id = await legacy_initialize(http, url)
        subscribe = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/subscribe",
            "params": {"uri": "live://static/info"},
        }
        assert (
            final_message(await http.post(url, json=subscribe, headers=legacy_headers(session_id)))[
                "result"
            ]
            == {}
        )
        get_headers = legacy_headers(session_id, Accept="text/event-stream")
        async with http.stream("GET", url, headers=get_headers) as stream:
            messages = sse_messages(stream)
            for request_id, uri in ((2, "live://other"), (3, "live://static/info")):
                call = {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "tools/call",
                    "params": {"name": "announce", "arguments": {"kind": "tools", "uri": uri}},
                }
                await http.post(url, json=call, headers=legacy_headers(session_id))
            updates = []
            with anyio.fail_after(30):
                async for message in messages:
                    if message["method"] == "notifications/resources/updated":
                        updates.append(message["params"]["uri"])
                        break
    assert updates == ["live://static/info"]


# -- cancellation -----------------------------------------------------------------------------


@pytest.mark.cancel
async def test_notifications_cancelled_cancels_the_running_tool(url: str, tmp_path: Path) -> None:
    async with legacy(url) as client:
        call = asyncio.ensure_future(
            client.call_tool("wait_for_cancel", {"marker_dir": str(tmp_path)})
        )
        assert await await_file(tmp_path / "started"), "the tool never started"
        call.cancel()  # the SDK sends notifications/cancelled for the request
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await await_file(tmp_path / "cancelled"), "the tool was not cancelled"
    assert not (tmp_path / "finished").exists()


@pytest.mark.cancel
async def test_closing_the_stream_does_not_cancel_the_tool(url: str, tmp_path: Path) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        session_id = await legacy_initialize(http, url)
        body = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {
                "name": "wait_for_cancel",
                "arguments": {"marker_dir": str(tmp_path), "seconds": 1.0},
            },
        }
        async with http.stream(
            "POST", url, json=body, headers=legacy_headers(session_id)
        ) as response:
            assert response.status_code == 200
            assert await await_file(tmp_path / "started"), "the tool never started"
        # The response stream is closed before the result; the tool keeps running.
    assert await await_file(tmp_path / "finished"), "the tool did not run to its end"
    assert not (tmp_path / "cancelled").exists()


# -- authentication ---------------------------------------------------------------------------


async def test_bad_token_on_initialize_is_401_with_www_authenticate(url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    async with httpx.AsyncClient() as http:
        response = await http.post(
            url, json=body, headers=legacy_headers(Authorization="Bearer forged-eve")
        )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert "invalid_token" in response.headers["www-authenticate"]
    assert final_message(response)["id"] is None

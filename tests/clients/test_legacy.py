"""The ``mcp`` 2.3 SDK client, legacy era (``Client(url, mode="legacy")``, 2025-11-25
sessions), against a live server running the test tools of ``tests.live_tools``."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from tests.clients.live_cases import (
    ELICIT_CASES,
    KINDS,
    ElicitCase,
    check_requested_schema,
    elicitation_responder,
)
from tests.conftest import LiveServer
from tests.live_tools.tools import SECRET_DETAIL
from tests.support.live import (
    LEGACY,
    await_file,
    final_message,
    legacy_headers,
    legacy_initialize,
    sdk_client,
    sse_messages,
    start_module_server,
)
from tests.support.results import text_of

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    yield from start_module_server(request, label="legacy client tests")


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


async def test_tools_list_shows_input_and_output_schemas(url: str) -> None:
    async with legacy(url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert tools["summarize"].output_schema is not None
    assert set(tools["elicit_kind"].input_schema["properties"]) == {"kind"}


async def test_tool_call_returns_structured_output(url: str) -> None:
    async with legacy(url) as client:
        result = await client.call_tool("summarize", {"values": [0.5, 0.25]})
    assert result.is_error is False
    assert result.structured_content == {"total": 0.75, "count": 2}


async def test_sync_tool_uses_the_orm_in_a_worker_thread(url: str) -> None:
    async with legacy(url) as client:
        result = await client.call_tool("register_user", {"username": "legacy-orm"})
    assert result.structured_content is not None
    assert result.structured_content["username"] == "legacy-orm"
    assert result.structured_content["in_thread"] is True


async def test_unknown_tool_is_invalid_params(url: str) -> None:
    async with legacy(url) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("no_such_tool", {})
    assert caught.value.code == -32602


async def test_tool_error_message_is_shown_to_the_client(url: str) -> None:
    async with legacy(url) as client:
        result = await client.call_tool("fail_for_client", {"reason": "read-only mode"})
    assert result.is_error is True
    assert text_of(result) == "cannot do that: read-only mode"


async def test_internal_exception_details_are_hidden(url: str) -> None:
    async with legacy(url) as client:
        result = await client.call_tool("fail_internally", {})
    assert result.is_error is True
    assert SECRET_DETAIL not in text_of(result)
    assert "internal error" in text_of(result)


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


async def test_progress_notifications_reach_the_progress_callback(url: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with legacy(url) as client:
        await client.call_tool("progress_steps", {"steps": 2}, progress_callback=on_progress)
    assert seen == [(1, 2, "step 1 of 2"), (2, 2, "step 2 of 2")]


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


@pytest.mark.parametrize("case", ELICIT_CASES, ids=KINDS)
async def test_elicitation_accept_returns_the_typed_answer(url: str, case: ElicitCase) -> None:
    seen: list[dict[str, Any]] = []
    async with legacy(url, elicitation_callback=elicitation_responder("accept", seen)) as client:
        result = await client.call_tool("elicit_kind", {"kind": case.kind})
    assert result.is_error is False, text_of(result)
    assert result.structured_content == {
        "action": "accept",
        "data": case.data,
        "type_name": case.type_name,
    }
    (asked,) = seen
    check_requested_schema(case, asked["schema"])


@pytest.mark.parametrize("kind", KINDS)
async def test_elicitation_decline_is_reported_to_the_tool(url: str, kind: str) -> None:
    async with legacy(url, elicitation_callback=elicitation_responder("decline")) as client:
        result = await client.call_tool("elicit_kind", {"kind": kind})
    assert result.structured_content == {"action": "decline", "data": None, "type_name": None}


@pytest.mark.parametrize("kind", KINDS)
async def test_elicitation_cancel_is_reported_to_the_tool(url: str, kind: str) -> None:
    async with legacy(url, elicitation_callback=elicitation_responder("cancel")) as client:
        result = await client.call_tool("elicit_kind", {"kind": kind})
    assert result.structured_content == {"action": "cancel", "data": None, "type_name": None}


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


async def test_elicitation_without_the_client_capability_is_a_tool_error(url: str) -> None:
    async with legacy(url) as client:
        result = await client.call_tool("elicit_kind", {"kind": "str"})
    assert result.is_error is True
    assert "elicitation" in text_of(result)


# -- sampling and roots -----------------------------------------------------------------------


async def test_sampling_answer_reaches_the_tool(url: str) -> None:
    async def sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        assert params.max_tokens == 64
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="Oslo"),
            model="legacy-llm",
        )

    async with legacy(url, sampling_callback=sample) as client:
        result = await client.call_tool("ask_model", {"question": "Capital of Norway?"})
    assert text_of(result) == "legacy-llm said: Oslo"


async def test_roots_reach_the_tool(url: str) -> None:
    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[types.Root.model_validate({"uri": "file:///srv/app", "name": "app"})]
        )

    async with legacy(url, list_roots_callback=roots) as client:
        result = await client.call_tool("client_roots", {})
    assert result.structured_content == {"result": ["file:///srv/app"]}


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


async def test_valid_bearer_token_is_seen_by_the_tool(url: str) -> None:
    async with legacy(url, token="valid-carol") as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content is not None
    assert result.structured_content["client_id"] == "client-carol"
    assert result.structured_content["subject"] == "carol"


async def test_token_standing_for_a_user_sets_ctx_user(url: str) -> None:
    async with legacy(url, token="user-hedy") as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content is not None
    assert result.structured_content["username"] == "hedy"


async def test_django_session_user_is_seen_by_the_tool(url: str) -> None:
    async with legacy(url) as client:
        started = await client.call_tool("start_django_session", {"username": "legacy-cookie"})
    session_key = text_of(started)
    async with legacy(url, headers={"Cookie": f"sessionid={session_key}"}) as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content is not None
    assert result.structured_content["username"] == "legacy-cookie"


async def test_bad_token_is_rejected_by_the_sdk_client(url: str) -> None:
    with pytest.raises(BaseException) as caught:  # noqa: PT011 - the SDK wraps it in task groups
        async with legacy(url, token="expired-dave"):
            pass
    assert "invalid or expired" in repr(caught.value)


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

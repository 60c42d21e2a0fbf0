"""The ``mcp`` 2.3 SDK client against a live server running the test tools of
``tests.live_tools``: what both eras do alike, each test run in both (``era``: 2026-07-28,
``Client(url)``, and 2025-11-25 sessions, ``Client(url, mode="legacy")``), and what only the
modern era does. The legacy era's own behaviours (sessions, the GET stream, logging/setLevel)
are in ``test_legacy.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

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
    MODERN,
    SIGNED_IN,
    await_file,
    modern_headers,
    modern_request,
    sdk_client,
)
from tests.support.results import text_of

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]


@pytest.fixture(params=["modern", "legacy"])
def era(request: pytest.FixtureRequest) -> str:
    """The protocol era a test that both eras pass runs in."""
    return str(request.param)


def connect(era: str, url: str, **kwargs: Any) -> Any:
    """The SDK client of ``era`` (legacy: a 2025-11-25 session), entered with ``async with``."""
    if era == "legacy":
        kwargs["mode"] = "legacy"
    return sdk_client(url, **kwargs)


# -- connection, listing ----------------------------------------------------------------------


async def test_client_negotiates_the_modern_protocol(url: str) -> None:
    async with sdk_client(url) as client:
        assert client.protocol_version == MODERN
        assert client.server_info is not None
        assert client.server_info.name == "mcp-tasks-demo"
        assert client.server_capabilities.tools is not None


async def test_tools_list_shows_input_and_output_schemas(era: str, url: str) -> None:
    async with connect(era, url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    summarize = tools["summarize"]
    assert summarize.input_schema["properties"]["values"]["type"] == "array"
    assert summarize.input_schema["required"] == ["values"]
    assert summarize.output_schema is not None
    assert set(summarize.output_schema["properties"]) == {"total", "count"}
    assert summarize.annotations is not None and summarize.annotations.read_only_hint is True


async def test_context_parameter_is_left_out_of_the_input_schema(url: str) -> None:
    async with sdk_client(url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools["elicit_kind"].input_schema["properties"]) == {"kind"}
    assert "ctx" not in tools["wait_for_cancel"].input_schema["properties"]


async def test_tool_call_returns_structured_output(era: str, url: str) -> None:
    async with connect(era, url) as client:
        result = await client.call_tool("summarize", {"values": [1, 2.5, 3]})
    assert result.is_error is False
    assert result.structured_content == {"total": 6.5, "count": 3}


async def test_sync_tool_uses_the_orm_in_a_worker_thread(era: str, url: str) -> None:
    async with connect(era, url) as client:
        first = await client.call_tool("register_user", {"username": f"{era}-orm-1"})
        second = await client.call_tool("register_user", {"username": f"{era}-orm-2"})
    assert first.structured_content is not None and second.structured_content is not None
    assert first.structured_content["username"] == f"{era}-orm-1"
    assert first.structured_content["in_thread"] is True
    assert second.structured_content["total_users"] == first.structured_content["total_users"] + 1


async def test_unknown_tool_is_invalid_params(era: str, url: str) -> None:
    async with connect(era, url) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("no_such_tool", {})
    assert caught.value.code == -32602


async def test_invalid_arguments_are_an_error_result_naming_the_field(url: str) -> None:
    async with sdk_client(url) as client:
        result = await client.call_tool("summarize", {"values": "not a list"})
    assert result.is_error is True
    assert "values" in text_of(result)


async def test_tool_error_message_is_shown_to_the_client(era: str, url: str) -> None:
    async with connect(era, url) as client:
        result = await client.call_tool("fail_for_client", {"reason": "quota exhausted"})
    assert result.is_error is True
    assert text_of(result) == "cannot do that: quota exhausted"


async def test_internal_exception_details_are_hidden(
    era: str, url: str, server: LiveServer
) -> None:
    async with connect(era, url) as client:
        result = await client.call_tool("fail_internally", {})
    assert result.is_error is True
    assert SECRET_DETAIL not in text_of(result)
    assert "internal error" in text_of(result)
    assert SECRET_DETAIL in server.output()  # the traceback is in the server log


# -- prompts and resources --------------------------------------------------------------------


async def test_prompts_list_shows_arguments(url: str) -> None:
    async with sdk_client(url) as client:
        prompts = {prompt.name: prompt for prompt in (await client.list_prompts()).prompts}
    greeting = prompts["live_greeting"]
    assert greeting.title == "Live greeting"
    arguments = {argument.name: argument for argument in greeting.arguments or []}
    assert arguments["name"].required is True
    assert arguments["name"].description == "Who to greet"
    assert arguments["style"].required is False


async def test_prompt_get_renders_messages(url: str) -> None:
    async with sdk_client(url) as client:
        result = await client.get_prompt("live_greeting", {"name": "Ada", "style": "formal"})
    assert len(result.messages) == 1
    message = result.messages[0]
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Write a formal greeting for Ada."


async def test_prompt_get_can_elicit_with_input_required_rounds(url: str) -> None:
    async def yes(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"value": True})

    async with sdk_client(url, elicitation_callback=yes) as client:
        result = await client.get_prompt("confirm_examples", {"topic": "recursion"})
    content = result.messages[0].content
    assert isinstance(content, types.TextContent)
    assert content.text == "Explain recursion with examples."


async def test_unknown_prompt_is_invalid_params(url: str) -> None:
    async with sdk_client(url) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("no_such_prompt", {})
    assert caught.value.code == -32602


async def test_resources_list_shows_fixed_resources(url: str) -> None:
    async with sdk_client(url) as client:
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
    assert resources["live://static/info"].mime_type == "text/plain"
    assert resources["live://static/info"].title == "Live info"
    assert "live://items/{item_id}" not in resources


async def test_resource_templates_list_shows_templates(url: str) -> None:
    async with sdk_client(url) as client:
        templates = {
            t.uri_template: t for t in (await client.list_resource_templates()).resource_templates
        }
    assert templates["live://items/{item_id}"].mime_type == "application/json"


async def test_resource_read_returns_text(url: str) -> None:
    async with sdk_client(url) as client:
        result = await client.read_resource("live://static/info")
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.text == "live tools are here"
    assert content.mime_type == "text/plain"


async def test_resource_template_read_fills_the_variables(url: str) -> None:
    async with sdk_client(url) as client:
        result = await client.read_resource("live://items/a17")
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    assert str(content.uri) == "live://items/a17"
    assert '"id": "a17"' in content.text


async def test_binary_resource_read_returns_a_blob(url: str) -> None:
    async with sdk_client(url) as client:
        result = await client.read_resource("live://bytes/logo")
    (content,) = result.contents
    assert isinstance(content, types.BlobResourceContents)
    assert content.mime_type == "image/png"


async def test_unknown_resource_is_an_error(url: str) -> None:
    async with sdk_client(url) as client:
        with pytest.raises(MCPError):
            await client.read_resource("live://nothing/here")


# -- notifications ----------------------------------------------------------------------------


async def test_progress_notifications_reach_the_progress_callback(era: str, url: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(era, url) as client:
        result = await client.call_tool(
            "progress_steps", {"steps": 3}, progress_callback=on_progress
        )
    assert text_of(result) == "done 3 steps"
    assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


async def test_logs_arrive_at_and_above_the_requested_level(url: str) -> None:
    received: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)

    async with sdk_client(url, logging_callback=on_log, log_level="warning") as client:
        await client.call_tool("log_every_level", {})
    assert [p.level for p in received] == ["warning", "error", "critical", "alert", "emergency"]
    assert received[0].data == "warning message"
    assert received[0].logger == "live"


async def test_every_log_level_arrives_at_debug(url: str) -> None:
    received: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params.level)

    async with sdk_client(url, logging_callback=on_log, log_level="debug") as client:
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


async def test_no_logs_arrive_for_a_request_without_a_log_level(url: str) -> None:
    received: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params.level)

    async with sdk_client(url, logging_callback=on_log) as client:
        result = await client.call_tool("log_every_level", {})
    assert text_of(result) == "logged"
    assert received == []


# -- elicitation ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ELICIT_CASES, ids=KINDS)
async def test_elicitation_accept_returns_the_typed_answer(
    era: str, url: str, case: ElicitCase
) -> None:
    seen: list[dict[str, Any]] = []
    async with sdk_client(
        url, elicitation_callback=elicitation_responder("accept", seen)
    ) as client:
        result = await client.call_tool("elicit_kind", {"kind": case.kind})
    assert result.is_error is False, text_of(result)
    assert result.structured_content == {
        "action": "accept",
        "data": case.data,
        "type_name": case.type_name,
    }
    (asked,) = seen
    assert asked["message"] == f"Please answer with a {case.kind}"
    check_requested_schema(case, asked["schema"])


@pytest.mark.parametrize("kind", KINDS)
async def test_elicitation_decline_is_reported_to_the_tool(era: str, url: str, kind: str) -> None:
    async with connect(era, url, elicitation_callback=elicitation_responder("decline")) as client:
        result = await client.call_tool("elicit_kind", {"kind": kind})
    assert result.structured_content == {"action": "decline", "data": None, "type_name": None}


@pytest.mark.parametrize("kind", KINDS)
async def test_elicitation_cancel_is_reported_to_the_tool(era: str, url: str, kind: str) -> None:
    async with connect(era, url, elicitation_callback=elicitation_responder("cancel")) as client:
        result = await client.call_tool("elicit_kind", {"kind": kind})
    assert result.structured_content == {"action": "cancel", "data": None, "type_name": None}


async def test_elicitation_answer_of_the_wrong_type_is_a_tool_error(url: str) -> None:
    async def wrong(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"value": "forty-two"})

    async with sdk_client(url, elicitation_callback=wrong) as client:
        result = await client.call_tool("elicit_kind", {"kind": "int"})
    assert result.is_error is True
    assert "does not match the requested type" in text_of(result)


async def test_two_elicitations_in_one_call_take_two_rounds(url: str) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        value: Any = "Ada" if params.message == "First name?" else 36
        return types.ElicitResult(action="accept", content={"value": value})

    async with sdk_client(url, elicitation_callback=answer) as client:
        result = await client.call_tool("elicit_twice", {})
    assert text_of(result) == "Ada is 36"
    assert asked == ["First name?", "Age?"]


async def test_elicitation_without_the_client_capability_is_a_tool_error(
    era: str, url: str
) -> None:
    async with connect(era, url) as client:  # no elicitation_callback: no capability declared
        result = await client.call_tool("elicit_kind", {"kind": "str"})
    assert result.is_error is True
    assert "elicitation" in text_of(result)


# -- sampling and roots -----------------------------------------------------------------------


async def test_sampling_answer_reaches_the_tool(era: str, url: str) -> None:
    requests: list[types.CreateMessageRequestParams] = []

    async def sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        requests.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Paris"), model="test-llm"
        )

    async with connect(era, url, sampling_callback=sample) as client:
        result = await client.call_tool("ask_model", {"question": "Capital of France?"})
    assert text_of(result) == "test-llm said: Paris"
    (params,) = requests
    assert params.system_prompt == "Answer briefly."
    assert params.max_tokens == 64
    content = params.messages[0].content
    assert isinstance(content, types.TextContent) and content.text == "Capital of France?"


async def test_roots_reach_the_tool(era: str, url: str) -> None:
    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[
                types.Root.model_validate({"uri": "file:///work/project", "name": "project"}),
                types.Root.model_validate({"uri": "file:///tmp"}),
            ]
        )

    async with connect(era, url, list_roots_callback=roots) as client:
        result = await client.call_tool("client_roots", {})
    assert result.structured_content == {"result": ["file:///work/project", "file:///tmp"]}


async def test_sampling_without_the_client_capability_is_a_tool_error(url: str) -> None:
    async with sdk_client(url) as client:
        result = await client.call_tool("ask_model", {"question": "hi"})
    assert result.is_error is True
    assert "sampling" in text_of(result)


# -- subscriptions/listen --------------------------------------------------------------------


async def test_listen_receives_list_changed_published_by_a_tool(url: str) -> None:
    from mcp.shared.subscriptions import ToolsListChanged

    async with sdk_client(url) as listener, sdk_client(url) as caller:
        async with listener.listen(tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed is True
            await caller.call_tool("announce", {"kind": "tools"})
            with anyio.fail_after(30):
                event = await anext(aiter(subscription))
    assert isinstance(event, ToolsListChanged)


async def test_listen_receives_updates_only_for_subscribed_resources(url: str) -> None:
    from mcp.shared.subscriptions import ResourceUpdated

    async with sdk_client(url) as listener, sdk_client(url) as caller:
        async with listener.listen(resource_subscriptions=["live://static/info"]) as subscription:
            await caller.call_tool("announce", {"kind": "prompts", "uri": "live://other"})
            await caller.call_tool("announce", {"kind": "prompts", "uri": "live://static/info"})
            with anyio.fail_after(30):
                event = await anext(aiter(subscription))
    assert isinstance(event, ResourceUpdated)
    assert event.uri == "live://static/info"


# -- cancellation -----------------------------------------------------------------------------


@pytest.mark.cancel
async def test_cancelling_the_call_cancels_the_running_tool(url: str, tmp_path: Path) -> None:
    async with sdk_client(url) as client:
        call = asyncio.ensure_future(
            client.call_tool("wait_for_cancel", {"marker_dir": str(tmp_path)})
        )
        assert await await_file(tmp_path / "started"), "the tool never started"
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert await await_file(tmp_path / "cancelled"), "the tool was not cancelled"
    assert not (tmp_path / "finished").exists()


@pytest.mark.cancel
async def test_read_timeout_closes_the_stream_and_cancels_the_tool(
    url: str, tmp_path: Path
) -> None:
    async with sdk_client(url) as client:
        with pytest.raises(MCPError):
            await client.call_tool(
                "wait_for_cancel", {"marker_dir": str(tmp_path)}, read_timeout_seconds=3.0
            )
    assert await await_file(tmp_path / "cancelled"), "the tool was not cancelled"


# -- authentication ---------------------------------------------------------------------------


async def test_anonymous_call_has_no_access_token(url: str) -> None:
    if SIGNED_IN:  # ALLOW_ANONYMOUS off: a client without credentials gets no further
        headers = modern_headers("tools/call", "whoami")
        del headers["Authorization"]
        body = modern_request("tools/call", {"name": "whoami", "arguments": {}})
        async with httpx.AsyncClient(timeout=30) as http:
            response = await http.post(url, json=body, headers=headers)
        assert response.status_code == 401
        assert "resource_metadata=" in response.headers["www-authenticate"]
        return
    async with sdk_client(url) as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content is not None
    assert result.structured_content["anonymous"] is True
    assert result.structured_content["client_id"] is None


async def test_valid_bearer_token_is_seen_by_the_tool(era: str, url: str) -> None:
    async with connect(era, url, token="valid-alice") as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content == {
        "anonymous": False,
        "client_id": "client-alice",
        "subject": "alice",
        "scopes": ["tools:read", "tools:call"],
        "claims": {"sub": "alice", "tenant": "tests"},
        "username": None,
    }


async def test_token_standing_for_a_user_sets_ctx_user(era: str, url: str) -> None:
    async with connect(era, url, token="user-grace") as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content is not None
    assert result.structured_content["username"] == "grace"
    assert result.structured_content["client_id"] == "user-client"


async def test_django_session_user_is_seen_by_the_tool(era: str, url: str) -> None:
    async with connect(era, url) as client:
        started = await client.call_tool("start_django_session", {"username": "modern-cookie"})
    session_key = text_of(started)
    async with connect(era, url, headers={"Cookie": f"sessionid={session_key}"}) as client:
        result = await client.call_tool("whoami", {})
    assert result.structured_content is not None
    assert result.structured_content["anonymous"] is False
    assert result.structured_content["username"] == "modern-cookie"
    assert result.structured_content["client_id"] is None


async def test_bad_token_is_rejected_by_the_sdk_client(era: str, url: str) -> None:
    with pytest.raises(BaseException) as caught:  # noqa: PT011 - the SDK wraps it in task groups
        async with connect(era, url, token="forged-mallory") as client:
            await client.call_tool("whoami", {})
    assert "invalid or expired" in repr(caught.value)


@pytest.mark.parametrize("token", ["forged-mallory", "expired-bob"])
async def test_bad_token_is_401_with_www_authenticate(url: str, token: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "server/discover",
    }
    async with httpx.AsyncClient() as http:
        response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'error="invalid_token"' in challenge

"""The protocol layer's dispatch, without a server: a :class:`Dispatcher` with a fake sink —
methods and results in both eras, ``tools/call``, notifications, server → client requests
(legacy through the sink, modern as MRTR input requests), prompts, resources and completion."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.test import override_settings

from mcp_tasks import AccessToken, MCPServer
from mcp_tasks.auth import ANONYMOUS, principal_for
from tests.support.protocol_fixtures import (
    ELICITATION,
    LEGACY,
    MODERN,
    SECRET,
    FakeSession,
    FakeSink,
    call,
    error_code,
    legacy_info,
    modern_info,
    request,
    result_of,
    run,
    text,
)

# -- dispatch: methods and results ------------------------------------------------------------


async def test_unknown_method_is_method_not_found(server: MCPServer) -> None:
    response = await run(server, request("tools/frobnicate", {}), modern_info())
    assert error_code(response) == -32601
    assert response["id"] == 1


@pytest.mark.parametrize(
    "method", ["ping", "logging/setLevel", "initialize", "resources/subscribe"]
)
async def test_legacy_only_methods_are_not_found_in_the_modern_era(
    server: MCPServer, method: str
) -> None:
    assert error_code(await run(server, request(method, {}), modern_info())) == -32601


async def test_server_discover_is_modern_only(server: MCPServer) -> None:
    assert error_code(await run(server, request("server/discover", {}), legacy_info())) == -32601
    result = result_of(await run(server, request("server/discover", {}), modern_info()))
    assert result["supportedVersions"] == [MODERN]


async def test_ping_answers_an_empty_result_in_the_legacy_era(server: MCPServer) -> None:
    assert await run(server, request("ping"), legacy_info()) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {},
    }


async def test_modern_results_carry_result_type_and_server_info(server: MCPServer) -> None:
    result = result_of(await run(server, call("add", {"a": 1, "b": 2}), modern_info()))
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]


async def test_legacy_results_have_no_result_type(server: MCPServer) -> None:
    result = result_of(await run(server, call("add", {"a": 1, "b": 2}), legacy_info()))
    assert "resultType" not in result


@override_settings(MCP_TASKS={"LIST_TTL_MS": 60000})
async def test_modern_list_results_carry_caching_hints_from_settings(server: MCPServer) -> None:
    result = result_of(await run(server, request("tools/list", {}), modern_info()))
    assert result["ttlMs"] == 60000
    assert result["cacheScope"] in ("private", "public")


async def test_tool_results_carry_no_caching_hints(server: MCPServer) -> None:
    result = result_of(await run(server, call("add", {"a": 1, "b": 2}), modern_info()))
    assert "ttlMs" not in result


async def test_tools_list_shows_schemas_and_annotations(server: MCPServer) -> None:
    tools = {
        t["name"]: t
        for t in result_of(await run(server, request("tools/list", {}), modern_info()))["tools"]
    }
    assert tools["add"]["description"] == "Add two integers."
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert tools["add"]["annotations"] == {"readOnlyHint": True}
    assert tools["make_point"]["outputSchema"]["properties"].keys() == {"x", "y"}
    assert "ctx" not in tools["chatty"]["inputSchema"].get("properties", {})


async def test_list_with_an_unknown_cursor_is_invalid_params(server: MCPServer) -> None:
    assert (
        error_code(await run(server, request("tools/list", {"cursor": "abc"}), modern_info()))
        == -32602
    )


async def test_initialize_accepts_a_supported_legacy_version(server: MCPServer) -> None:
    params = {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    result = result_of(await run(server, request("initialize", params), legacy_info()))
    assert result["protocolVersion"] == "2025-03-26"
    assert "tools" in result["capabilities"]
    assert result["serverInfo"]["name"]


async def test_initialize_answers_its_own_version_to_an_unknown_one(server: MCPServer) -> None:
    params = {
        "protocolVersion": "1999-01-01",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    result = result_of(await run(server, request("initialize", params), legacy_info()))
    assert result["protocolVersion"] == LEGACY


async def test_set_level_is_stored_on_the_session(server: MCPServer) -> None:
    session = FakeSession()
    result_of(
        await run(
            server, request("logging/setLevel", {"level": "warning"}), legacy_info(session=session)
        )
    )
    assert session.log_level == "warning"


async def test_set_level_with_an_unknown_level_is_invalid_params(server: MCPServer) -> None:
    assert (
        error_code(await run(server, request("logging/setLevel", {"level": "loud"}), legacy_info()))
        == -32602
    )


# -- tools/call -------------------------------------------------------------------------------


async def test_structured_output_is_returned(server: MCPServer) -> None:
    result = result_of(await run(server, call("make_point", {"x": 1, "y": 2}), modern_info()))
    assert result["structuredContent"] == {"x": 1, "y": 2}
    assert result["isError"] is False


async def test_unknown_tool_is_invalid_params(server: MCPServer) -> None:
    response = await run(server, call("nope"), modern_info())
    assert error_code(response) == -32602
    assert "nope" in response["error"]["message"]


async def test_missing_tool_name_is_invalid_params(server: MCPServer) -> None:
    assert (
        error_code(await run(server, request("tools/call", {"arguments": {}}), modern_info()))
        == -32602
    )


async def test_invalid_arguments_are_an_error_result_naming_the_field(server: MCPServer) -> None:
    result = result_of(await run(server, call("add", {"a": 1, "b": "two"}), modern_info()))
    assert result["isError"] is True
    assert " b: " in text(result)
    assert " a: " not in text(result)


async def test_tool_error_message_is_shown(server: MCPServer) -> None:
    result = result_of(await run(server, call("refuse"), modern_info()))
    assert result["isError"] is True
    assert text(result) == "not today"


async def test_plain_exception_is_hidden_and_logged(
    server: MCPServer, caplog: pytest.LogCaptureFixture
) -> None:
    result = result_of(await run(server, call("explode"), modern_info()))
    assert result["isError"] is True
    assert SECRET not in text(result)
    assert "internal error" in text(result)
    assert any(
        SECRET in (record.exc_text or "") or (record.exc_info and SECRET in str(record.exc_info[1]))
        for record in caplog.records
    )


async def test_tool_that_runs_only_as_a_task_needs_the_extension_when_tasks_are_not_for_all(
    server: MCPServer, settings: Any
) -> None:
    settings.MCP_TASKS = {"TASKS_FOR_ALL_CLIENTS": False}
    response = await run(server, call("only_as_task"), modern_info())
    assert error_code(response) == -32021
    assert response["error"]["data"] == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }


async def test_context_sees_the_access_token_and_request_id(server: MCPServer) -> None:
    token = AccessToken(token="t", client_id="cli", expires_at=None, claims={"sub": "u"})
    info = modern_info(principal=principal_for(token))
    result = result_of(await run(server, call("identity"), info))
    assert result["structuredContent"] == {"client": "cli", "request_id": 1}


async def test_expired_access_token_is_not_shown_to_the_tool(server: MCPServer) -> None:
    token = AccessToken(token="t", client_id="cli", expires_at=1)
    result = result_of(
        await run(server, call("identity"), modern_info(principal=principal_for(token)))
    )
    assert result["structuredContent"]["client"] is None


# -- notifications ----------------------------------------------------------------------------


async def test_progress_goes_to_the_sink_with_the_progress_token(server: MCPServer) -> None:
    sink = FakeSink()
    await run(server, call("chatty"), modern_info(progress_token="p"), sink)
    progress = [
        params for method, params in sink.notifications if method == "notifications/progress"
    ]
    assert progress == [
        {"progressToken": "p", "progress": 1, "total": 2, "message": "half"},
        {"progressToken": "p", "progress": 2, "total": 2, "message": "done"},
    ]


async def test_no_progress_without_a_progress_token(server: MCPServer) -> None:
    sink = FakeSink()
    await run(server, call("chatty"), modern_info(log_level="debug"), sink)
    assert "notifications/progress" not in sink.methods()


async def test_modern_logs_need_a_log_level_on_the_request(server: MCPServer) -> None:
    sink = FakeSink()
    await run(server, call("chatty"), modern_info(), sink)
    assert "notifications/message" not in sink.methods()


async def test_modern_logs_below_the_requested_level_are_dropped(server: MCPServer) -> None:
    sink = FakeSink()
    await run(server, call("chatty"), modern_info(log_level="warning"), sink)
    logs = [params for method, params in sink.notifications if method == "notifications/message"]
    assert logs == [
        {"level": "warning", "data": "warning line", "logger": "unit"},
        {"level": "error", "data": "error line", "logger": "unit"},
    ]


async def test_legacy_logs_follow_the_session_level(server: MCPServer) -> None:
    sink = FakeSink()
    await run(server, call("chatty"), legacy_info(log_level="error"), sink)
    assert [p["level"] for m, p in sink.notifications if m == "notifications/message"] == ["error"]


async def test_legacy_logs_all_levels_when_none_was_set(server: MCPServer) -> None:
    sink = FakeSink()
    await run(server, call("chatty"), legacy_info(), sink)
    levels = [p["level"] for m, p in sink.notifications if m == "notifications/message"]
    assert levels == ["debug", "info", "warning", "error"]


# -- server → client requests: legacy ---------------------------------------------------------


async def test_legacy_elicitation_goes_through_the_sink(server: MCPServer) -> None:
    sink = FakeSink({"elicitation/create": {"action": "accept", "content": {"value": "Ada"}}})
    result = result_of(
        await run(server, call("ask_name"), legacy_info(capabilities=ELICITATION), sink)
    )
    assert text(result) == "hello Ada"
    ((method, params),) = sink.requests
    assert method == "elicitation/create"
    assert params["message"] == "Name?"
    assert params["requestedSchema"]["properties"]["value"]["type"] == "string"


async def test_legacy_sampling_goes_through_the_sink(server: MCPServer) -> None:
    reply = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m1"}
    sink = FakeSink({"sampling/createMessage": reply})
    result = result_of(
        await run(server, call("ask_model"), legacy_info(capabilities={"sampling": {}}), sink)
    )
    assert text(result) == "m1: 4"
    assert sink.requests[0][1]["maxTokens"] == 5


async def test_legacy_roots_go_through_the_sink(server: MCPServer) -> None:
    sink = FakeSink({"roots/list": {"roots": [{"uri": "file:///a"}]}})
    result = result_of(
        await run(server, call("roots"), legacy_info(capabilities={"roots": {}}), sink)
    )
    assert result["structuredContent"] == {"result": ["file:///a"]}


async def test_asking_without_the_capability_is_an_error_result(server: MCPServer) -> None:
    sink = FakeSink()
    result = result_of(await run(server, call("ask_name"), legacy_info(), sink))
    assert result["isError"] is True
    assert "elicitation" in text(result)
    assert sink.requests == []


# -- server → client requests: modern MRTR ----------------------------------------------------


async def mrtr_round(
    server: MCPServer,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    state: Any = None,
    responses: dict[str, Any] | None = None,
    capabilities: dict[str, Any] | None = None,
    principal: Any = ANONYMOUS,
) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if state is not None:
        extra["requestState"] = state
    if responses is not None:
        extra["inputResponses"] = responses
    info = modern_info(capabilities=capabilities or ELICITATION, principal=principal)
    return await run(server, call(name, arguments, **extra), info)


async def test_modern_elicitation_answers_input_required(server: MCPServer) -> None:
    result = result_of(await mrtr_round(server, "ask_name"))
    assert result["resultType"] == "input_required"
    ((_key, input_request),) = result["inputRequests"].items()
    assert input_request["method"] == "elicitation/create"
    assert input_request["params"]["message"] == "Name?"
    assert isinstance(result["requestState"], str)
    assert "content" not in result


async def test_modern_retry_with_the_answer_completes(server: MCPServer) -> None:
    first = result_of(await mrtr_round(server, "ask_name"))
    (key,) = first["inputRequests"]
    answer = {key: {"action": "accept", "content": {"value": "Lin"}}}
    result = result_of(
        await mrtr_round(server, "ask_name", state=first["requestState"], responses=answer)
    )
    assert result["resultType"] == "complete"
    assert text(result) == "hello Lin"


@pytest.mark.parametrize("content", [["Lin"], "Lin", 5], ids=["list", "string", "number"])
async def test_modern_answer_whose_content_is_not_an_object_is_a_clear_error(
    server: MCPServer, content: Any
) -> None:
    first = result_of(await mrtr_round(server, "ask_name"))
    (key,) = first["inputRequests"]
    answer = {key: {"action": "accept", "content": content}}
    result = result_of(
        await mrtr_round(server, "ask_name", state=first["requestState"], responses=answer)
    )
    assert result["isError"] is True
    assert "content must be an object" in text(result)


async def test_modern_decline_reaches_the_tool(server: MCPServer) -> None:
    first = result_of(await mrtr_round(server, "ask_name"))
    (key,) = first["inputRequests"]
    result = result_of(
        await mrtr_round(
            server, "ask_name", state=first["requestState"], responses={key: {"action": "decline"}}
        )
    )
    assert text(result) == "decline"


async def test_modern_two_questions_take_two_rounds_with_distinct_keys(server: MCPServer) -> None:
    first = result_of(await mrtr_round(server, "ask_two"))
    (key1,) = first["inputRequests"]
    answer1 = {key1: {"action": "accept", "content": {"value": "green"}}}
    second = result_of(
        await mrtr_round(server, "ask_two", state=first["requestState"], responses=answer1)
    )
    assert second["resultType"] == "input_required"
    (key2,) = second["inputRequests"]
    assert key2 != key1
    assert second["inputRequests"][key2]["params"]["requestedSchema"]["required"] == ["x", "y"]
    answer2 = {key2: {"action": "accept", "content": {"x": 3, "y": 4}}}
    third = result_of(
        await mrtr_round(server, "ask_two", state=second["requestState"], responses=answer2)
    )
    assert text(third) == "green at 3,4"


async def test_modern_retry_without_the_answer_asks_again(server: MCPServer) -> None:
    first = result_of(await mrtr_round(server, "ask_name"))
    again = result_of(
        await mrtr_round(server, "ask_name", state=first["requestState"], responses={"unknown": {}})
    )
    assert again["resultType"] == "input_required"
    assert again["inputRequests"].keys() == first["inputRequests"].keys()


async def test_modern_sampling_and_roots_are_input_requests(server: MCPServer) -> None:
    sampling = result_of(await mrtr_round(server, "ask_model", capabilities={"sampling": {}}))
    roots = result_of(await mrtr_round(server, "roots", capabilities={"roots": {}}))
    assert [r["method"] for r in sampling["inputRequests"].values()] == ["sampling/createMessage"]
    assert [r["method"] for r in roots["inputRequests"].values()] == ["roots/list"]


async def test_modern_input_request_needs_the_declared_capability(server: MCPServer) -> None:
    result = result_of(await mrtr_round(server, "ask_name", capabilities={"sampling": {}}))
    assert result["resultType"] == "complete"
    assert result["isError"] is True
    assert "elicitation" in text(result)


async def test_tampered_request_state_is_invalid_params(server: MCPServer) -> None:
    first = result_of(await mrtr_round(server, "ask_name"))
    state = first["requestState"]
    tampered = state[:-2] + ("xx" if not state.endswith("xx") else "yy")
    assert error_code(await mrtr_round(server, "ask_name", state=tampered, responses={})) == -32602


async def test_request_state_for_other_arguments_is_invalid_params(server: MCPServer) -> None:
    first = result_of(await mrtr_round(server, "ask_about", {"topic": "cats"}))
    (key,) = first["inputRequests"]
    answer = {key: {"action": "accept", "content": {"value": "yes"}}}
    response = await mrtr_round(
        server, "ask_about", {"topic": "dogs"}, state=first["requestState"], responses=answer
    )
    assert error_code(response) == -32602


async def test_request_state_of_another_principal_is_invalid_params(server: MCPServer) -> None:
    alice = principal_for(AccessToken(token="a", client_id="alice"))
    bob = principal_for(AccessToken(token="b", client_id="bob"))
    first = result_of(await mrtr_round(server, "ask_name", principal=alice))
    response = await mrtr_round(
        server, "ask_name", state=first["requestState"], responses={}, principal=bob
    )
    assert error_code(response) == -32602


@override_settings(MCP_TASKS={"REQUEST_STATE_TTL": 0})
async def test_expired_request_state_is_invalid_params(server: MCPServer) -> None:
    first = result_of(await mrtr_round(server, "ask_name"))
    response = await mrtr_round(server, "ask_name", state=first["requestState"], responses={})
    assert error_code(response) == -32602


async def test_non_string_request_state_is_invalid_params(server: MCPServer) -> None:
    assert error_code(await mrtr_round(server, "ask_name", state={"a": 1}, responses={})) == -32602


async def test_prompt_get_can_ask_with_input_required(server: MCPServer) -> None:
    message = request("prompts/get", {"name": "confirm", "arguments": {}})
    first = result_of(await run(server, message, modern_info(capabilities=ELICITATION)))
    assert first["resultType"] == "input_required"
    (key,) = first["inputRequests"]
    retry = request(
        "prompts/get",
        {
            "name": "confirm",
            "arguments": {},
            "requestState": first["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"value": True}}},
        },
    )
    result = result_of(await run(server, retry, modern_info(capabilities=ELICITATION)))
    assert result["messages"][0]["content"]["text"] == "confirmed=True"


async def test_resource_read_can_ask_with_input_required(server: MCPServer) -> None:
    message = request("resources/read", {"uri": "unit://asked"})
    first = result_of(await run(server, message, modern_info(capabilities=ELICITATION)))
    (key,) = first["inputRequests"]
    assert first["inputRequests"][key]["params"]["requestedSchema"]["properties"]["value"][
        "enum"
    ] == ["a", "b"]
    retry = request(
        "resources/read",
        {
            "uri": "unit://asked",
            "requestState": first["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"value": "b"}}},
        },
    )
    result = result_of(await run(server, retry, modern_info(capabilities=ELICITATION)))
    assert result["contents"][0]["text"] == "picked b"


# -- prompts, resources, completion -----------------------------------------------------------


async def test_prompts_list_shows_arguments(server: MCPServer) -> None:
    prompts = {
        p["name"]: p
        for p in result_of(await run(server, request("prompts/list", {}), modern_info()))["prompts"]
    }
    assert prompts["greet"]["arguments"] == [
        {"name": "name", "required": True, "description": "Who"},
        {"name": "formal", "required": False},
    ]


async def test_prompt_get_renders_messages(server: MCPServer) -> None:
    message = request(
        "prompts/get", {"name": "greet", "arguments": {"name": "Ada", "formal": "true"}}
    )
    result = result_of(await run(server, message, legacy_info()))
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Good day, Ada"}}
    ]
    assert result["description"] == "A greeting prompt."


async def test_unknown_prompt_is_invalid_params(server: MCPServer) -> None:
    assert (
        error_code(await run(server, request("prompts/get", {"name": "nope"}), modern_info()))
        == -32602
    )


async def test_prompt_with_missing_argument_is_invalid_params(server: MCPServer) -> None:
    assert (
        error_code(await run(server, request("prompts/get", {"name": "greet"}), modern_info()))
        == -32602
    )


async def test_resource_template_read_passes_variables(server: MCPServer) -> None:
    result = result_of(
        await run(
            server, request("resources/read", {"uri": "unit://users/42/avatar"}), modern_info()
        )
    )
    (content,) = result["contents"]
    assert content["uri"] == "unit://users/42/avatar"
    assert base64.b64decode(content["blob"]) == b"png-42"
    assert content["mimeType"] == "image/png"


async def test_resources_and_templates_are_listed_apart(server: MCPServer) -> None:
    resources = result_of(await run(server, request("resources/list", {}), modern_info()))[
        "resources"
    ]
    templates = result_of(
        await run(server, request("resources/templates/list", {}), modern_info())
    )["resourceTemplates"]
    assert [r["uri"] for r in resources] == ["unit://readme", "unit://asked"]
    assert [t["uriTemplate"] for t in templates] == ["unit://users/{user_id}/avatar"]


async def test_unknown_resource_is_invalid_params_in_the_modern_era(server: MCPServer) -> None:
    assert (
        error_code(
            await run(server, request("resources/read", {"uri": "unit://none"}), modern_info())
        )
        == -32602
    )


async def test_unknown_resource_is_resource_not_found_in_the_legacy_era(server: MCPServer) -> None:
    assert (
        error_code(
            await run(server, request("resources/read", {"uri": "unit://none"}), legacy_info())
        )
        == -32002
    )


async def test_completion_uses_the_registered_function(server: MCPServer) -> None:
    params = {
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "name", "value": "A"},
    }
    result = result_of(await run(server, request("completion/complete", params), modern_info()))
    assert result["completion"] == {"values": ["Ada", "Alan"], "total": 2, "hasMore": False}


@pytest.mark.parametrize("context", [{"arguments": "formal"}, {"arguments": ["formal"]}, "x"])
async def test_completion_context_that_is_no_object_is_invalid_params(
    server: MCPServer, context: Any
) -> None:
    """``params.context.arguments`` is an object of argument values: anything else is
    ``-32602``, not a crash of a completion function that reads it (``-32603``)."""

    @server.completion("ref/prompt", "greet")
    def by_context(argument_name: str, value: str, context_arguments: dict[str, Any]) -> list[str]:
        return ["Dr. Ada"] if context_arguments.get("formal") else ["Ada"]

    params = {
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "name", "value": "A"},
        "context": context,
    }
    response = await run(server, request("completion/complete", params), modern_info())
    assert error_code(response) == -32602
    assert "params.context" in response["error"]["message"]
    params["context"] = {"arguments": {"formal": "yes"}}
    result = result_of(await run(server, request("completion/complete", params), modern_info()))
    assert result["completion"]["values"] == ["Dr. Ada"]


async def test_resource_subscription_is_stored_on_the_session(server: MCPServer) -> None:
    session = FakeSession()
    await run(
        server,
        request("resources/subscribe", {"uri": "unit://readme"}),
        legacy_info(session=session),
    )
    assert session.subscriptions == ["unit://readme"]

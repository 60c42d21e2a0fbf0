"""The protocol layer without a server: a :class:`Dispatcher` with a fake sink, the modern
envelope and header checks, ``requestState`` sealing, elicitation schemas, ``TaskConfig``
and the registry."""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pytest
import typing_extensions
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from mcp_types._v2025_11_25 import PrimitiveSchemaDefinition
from pydantic import BaseModel, Field, TypeAdapter

from mcp_tasks import (
    AcceptedElicitation,
    AccessToken,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    MCPServer,
    TaskConfig,
    ToolError,
)
from mcp_tasks.auth import ANONYMOUS, principal_for
from mcp_tasks.elicitation import elicitation_spec
from mcp_tasks.exceptions import ProtocolError
from mcp_tasks.protocol import (
    Dispatcher,
    RequestInfo,
    kind_of,
    modern_request_info,
    parse_body,
    request_state,
)
from mcp_tasks.protocol.envelope import check_modern_envelope, check_param_headers
from mcp_tasks.tasks.engine import Engine

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ELICITATION: dict[str, Any] = {"elicitation": {"form": {}}}
SECRET = "stack trace says password=hunter2"

# -- fakes ------------------------------------------------------------------------------------


class FakeSink:
    """Records what the protocol layer sends; answers server requests from ``replies``."""

    def __init__(self, replies: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.replies = dict(replies or {})
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.published: list[tuple[str, dict[str, Any]]] = []

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((method, params))
        return self.replies[method]

    async def publish(self, method: str, params: dict[str, Any]) -> None:
        self.published.append((method, params))

    async def close_stream(self) -> None:
        return None

    async def watch_task(self, task_id: str) -> None:
        return None

    async def wait_for_task(self, task_id: str, timeout: float) -> None:
        return None

    def methods(self) -> list[str]:
        return [method for method, _ in self.notifications]


class FakeSession:
    def __init__(self, session_id: str = "s1") -> None:
        self.id = session_id
        self.protocol_version = LEGACY
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] = {}
        self.log_level: str | None = None
        self.subscriptions: list[str] = []

    async def set_log_level(self, level: str) -> None:
        self.log_level = level

    async def subscribe(self, uri: str) -> None:
        self.subscriptions.append(uri)

    async def unsubscribe(self, uri: str) -> None:
        self.subscriptions.remove(uri)


def modern_info(
    *,
    capabilities: dict[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
    principal: Any = ANONYMOUS,
    headers: Mapping[str, str | list[str]] | None = None,
) -> RequestInfo:
    return RequestInfo(
        era="modern",
        protocol_version=MODERN,
        principal=principal,
        request_id=1,
        client_capabilities=capabilities or {},
        log_level=log_level,
        progress_token=progress_token,
        headers=headers or {},
    )


def legacy_info(
    *,
    capabilities: dict[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
    session: FakeSession | None = None,
) -> RequestInfo:
    return RequestInfo(
        era="legacy",
        protocol_version=LEGACY,
        principal=ANONYMOUS,
        request_id=1,
        client_capabilities=capabilities or {},
        log_level=log_level,
        progress_token=progress_token,
        session=session or FakeSession(),
    )


def request(
    method: str, params: dict[str, Any] | None = None, request_id: int = 1
) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments or {}, **extra})


async def run(
    server: MCPServer, message: dict[str, Any], info: RequestInfo, sink: FakeSink | None = None
) -> dict[str, Any]:
    """One request through the site's method tables (the task engine included)."""
    return await Dispatcher(server, Engine()).handle(message, info, sink or FakeSink())


def result_of(response: dict[str, Any]) -> dict[str, Any]:
    assert "result" in response, response
    result: dict[str, Any] = response["result"]
    return result


def error_code(response: dict[str, Any]) -> int:
    assert "error" in response, response
    code: int = response["error"]["code"]
    return code


def text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


# -- a registry of test tools -----------------------------------------------------------------


AB: Any = Literal["a", "b"]


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    x: int
    y: int


@pytest.fixture
def server() -> MCPServer:
    registry = MCPServer()

    @registry.tool(annotations={"readOnlyHint": True})
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @registry.tool()
    def make_point(x: int, y: int) -> Point:
        return Point(x=x, y=y)

    @registry.tool()
    def refuse() -> str:
        raise ToolError("not today")

    @registry.tool()
    def explode() -> str:
        raise RuntimeError(SECRET)

    @registry.tool()
    async def chatty(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "half")
        await ctx.report_progress(2, 2, "done")
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, f"{level} line", logger_name="unit")
        return "ok"

    @registry.tool()
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", str)
        if isinstance(answer, AcceptedElicitation):
            return f"hello {answer.data}"
        return answer.action

    @registry.tool()
    async def ask_about(topic: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Anything about {topic}?", str)
        return answer.action

    @registry.tool()
    async def ask_two(ctx: Context) -> str:
        first = await ctx.elicit("Colour?", Color)
        second = await ctx.elicit("Point?", Point)
        assert isinstance(first, AcceptedElicitation) and isinstance(second, AcceptedElicitation)
        return f"{first.data.value} at {second.data.x},{second.data.y}"

    @registry.tool()
    async def ask_model(ctx: Context) -> str:
        result = await ctx.sample("2+2?", max_tokens=5)
        return f"{result.model}: {result.content.text}"  # type: ignore[union-attr]

    @registry.tool()
    async def roots(ctx: Context) -> list[str]:
        return [str(root.uri) for root in await ctx.list_roots()]

    @registry.tool()
    async def identity(ctx: Context) -> dict[str, Any]:
        token = ctx.get_access_token()
        return {"client": token.client_id if token else None, "request_id": ctx.request_id}

    @registry.tool(task="required")
    async def only_as_task() -> str:
        return "never inline"

    @registry.tool()
    def regional(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], size: int = 1
    ) -> str:
        return f"{region}:{size}"

    @registry.prompt()
    def greet(name: Annotated[str, Field(description="Who")], formal: bool = False) -> str:
        """A greeting prompt."""
        return f"{'Good day' if formal else 'Hi'}, {name}"

    @registry.prompt()
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Sure?", bool)
        return f"confirmed={isinstance(answer, AcceptedElicitation) and answer.data}"

    @registry.resource("unit://readme", mime_type="text/plain")
    def readme() -> str:
        return "read me"

    @registry.resource("unit://users/{user_id}/avatar", mime_type="image/png")
    def avatar(user_id: str) -> bytes:
        return f"png-{user_id}".encode()

    @registry.resource("unit://asked")
    async def asked(ctx: Context) -> str:
        answer = await ctx.elicit("Which?", AB)
        return f"picked {answer.data}" if isinstance(answer, AcceptedElicitation) else "none"

    @registry.completion("ref/prompt", "greet")
    def complete_name(
        argument_name: str, value: str, context_arguments: dict[str, Any]
    ) -> list[str]:
        return [name for name in ("Ada", "Alan", "Grace") if name.startswith(value)]

    return registry


# -- JSON-RPC framing -------------------------------------------------------------------------


def test_parse_body_rejects_bad_json_with_parse_error() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_body(b'{"jsonrpc": "2.0",')
    assert caught.value.code == -32700


def test_parse_body_rejects_a_batch_with_invalid_request() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_body(json.dumps([request("ping")]).encode())
    assert caught.value.code == -32600


@pytest.mark.parametrize(
    "body", [b'"text"', b"42", b'{"id": 1, "method": "ping"}', b'{"jsonrpc": "1.0", "id": 1}']
)
def test_parse_body_rejects_non_jsonrpc_objects(body: bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_body(body)
    assert caught.value.code == -32600


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, "request"),
        ({"jsonrpc": "2.0", "id": "a", "method": "ping"}, "request"),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, "notification"),
        ({"jsonrpc": "2.0", "id": 3, "result": {}}, "response"),
        ({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "x"}}, "response"),
    ],
)
def test_kind_of_classifies_messages(message: dict[str, Any], kind: str) -> None:
    assert kind_of(message) == kind


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]},
        {"jsonrpc": "2.0", "id": 1},
    ],
)
def test_kind_of_rejects_malformed_messages(message: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError) as caught:
        kind_of(message)
    assert caught.value.code == -32600


# -- modern envelope and headers --------------------------------------------------------------


def envelope_params(**meta: Any) -> dict[str, Any]:
    base = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
    }
    base.update(meta)
    return {"_meta": {k: v for k, v in base.items() if v is not None}}


def headers_for(
    method: str, name: str | None = None, version: str = MODERN
) -> dict[str, str | list[str]]:
    headers: dict[str, str | list[str]] = {"mcp-protocol-version": version, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


def envelope_error(
    method: str, params: dict[str, Any], headers: Mapping[str, str | list[str]]
) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        check_modern_envelope(method, params, headers)
    return caught.value


def test_envelope_returns_what_the_client_declared() -> None:
    params = envelope_params(
        **{
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "io.modelcontextprotocol/logLevel": "notice",
            "progressToken": "tok",
        }
    )
    envelope = check_modern_envelope("tools/list", params, headers_for("tools/list"))
    assert envelope.protocol_version == MODERN
    assert envelope.client_capabilities == {"sampling": {}}
    assert envelope.client_info == {"name": "c", "version": "1"}
    assert envelope.log_level == "notice"
    assert envelope.progress_token == "tok"


def test_envelope_without_meta_is_invalid_params() -> None:
    assert envelope_error("tools/list", {}, headers_for("tools/list")).code == -32602


@pytest.mark.parametrize(
    "missing",
    ["io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"],
)
def test_envelope_missing_a_required_key_is_invalid_params(missing: str) -> None:
    error = envelope_error(
        "tools/list", envelope_params(**{missing: None}), headers_for("tools/list")
    )
    assert error.code == -32602
    assert missing in error.message


def test_envelope_capabilities_must_be_an_object() -> None:
    params = envelope_params(**{"io.modelcontextprotocol/clientCapabilities": ["sampling"]})
    assert envelope_error("tools/list", params, headers_for("tools/list")).code == -32602


def test_envelope_unknown_log_level_is_invalid_params() -> None:
    params = envelope_params(**{"io.modelcontextprotocol/logLevel": "loud"})
    assert envelope_error("tools/list", params, headers_for("tools/list")).code == -32602


def test_missing_protocol_version_header_is_header_mismatch() -> None:
    headers = headers_for("tools/list")
    del headers["mcp-protocol-version"]
    assert envelope_error("tools/list", envelope_params(), headers).code == -32020


def test_protocol_version_header_differing_from_envelope_is_header_mismatch() -> None:
    params = envelope_params(**{"io.modelcontextprotocol/protocolVersion": "2027-01-01"})
    assert envelope_error("tools/list", params, headers_for("tools/list")).code == -32020


def test_unsupported_version_is_32022_with_supported_and_requested() -> None:
    params = envelope_params(**{"io.modelcontextprotocol/protocolVersion": "2027-01-01"})
    error = envelope_error("tools/list", params, headers_for("tools/list", version="2027-01-01"))
    assert error.code == -32022
    assert error.data == {"supported": [MODERN], "requested": "2027-01-01"}


def test_missing_mcp_method_header_is_header_mismatch() -> None:
    headers = headers_for("tools/list")
    del headers["mcp-method"]
    assert envelope_error("tools/list", envelope_params(), headers).code == -32020


def test_mcp_method_header_mismatch_is_header_mismatch() -> None:
    assert (
        envelope_error("tools/list", envelope_params(), headers_for("prompts/list")).code == -32020
    )


def test_duplicated_header_is_header_mismatch() -> None:
    headers = headers_for("tools/list")
    headers["mcp-method"] = ["tools/list", "tools/list"]
    assert envelope_error("tools/list", envelope_params(), headers).code == -32020


@pytest.mark.parametrize(
    ("method", "field"),
    [("tools/call", "name"), ("prompts/get", "name"), ("resources/read", "uri")],
)
def test_mcp_name_header_is_required_for_named_methods(method: str, field: str) -> None:
    params = {**envelope_params(), field: "thing"}
    assert envelope_error(method, params, headers_for(method)).code == -32020
    assert envelope_error(method, params, headers_for(method, "other")).code == -32020
    check_modern_envelope(method, params, headers_for(method, "thing"))


def test_mcp_name_header_is_not_needed_for_list_methods() -> None:
    check_modern_envelope("tools/list", envelope_params(), headers_for("tools/list"))


def test_base64_mcp_name_header_is_decoded() -> None:
    name = "grüße"
    encoded = "=?base64?" + base64.b64encode(name.encode()).decode() + "?="
    check_modern_envelope(
        "tools/call", {**envelope_params(), "name": name}, headers_for("tools/call", encoded)
    )


def test_invalid_base64_mcp_name_header_is_header_mismatch() -> None:
    params = {**envelope_params(), "name": "x"}
    assert (
        envelope_error("tools/call", params, headers_for("tools/call", "=?base64?***?=")).code
        == -32020
    )


def test_modern_request_info_describes_the_request() -> None:
    message = request(
        "tools/list", envelope_params(**{"io.modelcontextprotocol/logLevel": "error"}), request_id=9
    )
    info = modern_request_info(message, headers_for("tools/list"), ANONYMOUS)
    assert info.modern
    assert info.request_id == 9
    assert info.log_level == "error"
    assert info.client_capabilities == {"sampling": {}}


def test_param_header_must_match_its_argument(server: MCPServer) -> None:
    schema = server.tools["regional"].input_schema
    check_param_headers(schema, {"region": "eu"}, {"mcp-param-region": "eu"})
    with pytest.raises(ProtocolError) as missing:
        check_param_headers(schema, {"region": "eu"}, {})
    with pytest.raises(ProtocolError) as mismatch:
        check_param_headers(schema, {"region": "eu"}, {"mcp-param-region": "us"})
    assert missing.value.code == mismatch.value.code == -32020


async def test_tools_call_checks_param_headers_in_the_modern_era(server: MCPServer) -> None:
    wrong = modern_info(headers={"mcp-param-region": "us"})
    right = modern_info(headers={"mcp-param-region": "eu"})
    assert error_code(await run(server, call("regional", {"region": "eu"}), wrong)) == -32020
    assert text(result_of(await run(server, call("regional", {"region": "eu"}), right))) == "eu:1"


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


async def test_tool_that_runs_only_as_a_task_needs_the_extension(server: MCPServer) -> None:
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


@override_settings(MCP_TASKS={"REQUEST_STATE_TTL": -1})
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


# -- request_state seal / unseal --------------------------------------------------------------

BINDING: dict[str, Any] = {
    "principal": "user:1",
    "method": "tools/call",
    "target": "book",
    "arguments": {"room": 5, "day": "mon"},
}


def unseal_error(token: Any, **binding: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        request_state.unseal(token, **{**BINDING, **binding})
    return caught.value


def test_request_state_round_trips_the_answers() -> None:
    token = request_state.seal({"k": {"action": "decline"}}, **BINDING)
    assert request_state.unseal(token, **BINDING) == {"k": {"action": "decline"}}


def test_request_state_ignores_argument_order() -> None:
    token = request_state.seal({}, **BINDING)
    assert request_state.unseal(token, **{**BINDING, "arguments": {"day": "mon", "room": 5}}) == {}


@pytest.mark.parametrize(
    "change",
    [
        {"principal": "user:2"},
        {"method": "prompts/get"},
        {"target": "cancel_booking"},
        {"arguments": {"room": 6, "day": "mon"}},
    ],
    ids=["principal", "method", "target", "arguments"],
)
def test_request_state_is_bound_to_its_request(change: dict[str, Any]) -> None:
    token = request_state.seal({}, **BINDING)
    assert unseal_error(token, **change).code == -32602


def test_tampered_request_state_is_rejected() -> None:
    token = request_state.seal({"k": {"action": "accept"}}, **BINDING)
    value, _, signature = token.rpartition(":")
    forged = value + ":" + signature[::-1]
    assert unseal_error(forged).code == -32602


def test_request_state_signed_with_another_key_is_rejected() -> None:
    with override_settings(SECRET_KEY="another-secret-key-entirely"):
        token = request_state.seal({}, **BINDING)
    assert unseal_error(token).code == -32602


def test_request_state_survives_a_key_rotation_with_fallbacks() -> None:
    with override_settings(SECRET_KEY="old-secret-key-of-the-project"):
        token = request_state.seal({"k": {}}, **BINDING)
    with override_settings(
        SECRET_KEY="new-secret-key-of-the-project",
        SECRET_KEY_FALLBACKS=["old-secret-key-of-the-project"],
    ):
        assert request_state.unseal(token, **BINDING) == {"k": {}}


@override_settings(MCP_TASKS={"REQUEST_STATE_TTL": -1})
def test_expired_request_state_is_rejected() -> None:
    token = request_state.seal({}, **BINDING)
    assert unseal_error(token).code == -32602


def test_all_request_state_failures_share_one_message() -> None:
    token = request_state.seal({}, **BINDING)
    messages = {
        unseal_error("garbage").message,
        unseal_error(token, principal="user:9").message,
        unseal_error(None).message,
    }
    assert len(messages) == 1


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


async def test_resource_subscription_is_stored_on_the_session(server: MCPServer) -> None:
    session = FakeSession()
    await run(
        server,
        request("resources/subscribe", {"uri": "unit://readme"}),
        legacy_info(session=session),
    )
    assert session.subscriptions == ["unit://readme"]


# -- elicitation schemas ----------------------------------------------------------------------


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


class Person(BaseModel):
    name: str = Field(min_length=1, description="Full name")
    age: int = Field(ge=0)
    email: str = Field(default="", json_schema_extra={"format": "email"})


@dataclasses.dataclass
class Address:
    city: str
    zip_code: str = "0000"


class ExtFlags(typing_extensions.TypedDict):
    verbose: bool
    level: int


class StdFlags(typing.TypedDict):
    verbose: bool
    level: int


_PRIMITIVE = TypeAdapter(PrimitiveSchemaDefinition)


def properties_of(response_type: Any) -> dict[str, Any]:
    schema = elicitation_spec(response_type).requested_schema
    assert schema["type"] == "object"
    for prop in schema["properties"].values():
        _PRIMITIVE.validate_python(prop)  # each property is a spec PrimitiveSchemaDefinition
        assert "$ref" not in json.dumps(prop)
    assert "$defs" not in schema
    properties: dict[str, Any] = schema["properties"]
    return properties


@pytest.mark.parametrize(
    ("response_type", "json_type"),
    [(str, "string"), (int, "integer"), (float, "number"), (bool, "boolean")],
)
def test_scalar_is_asked_as_a_required_value(response_type: type, json_type: str) -> None:
    spec = elicitation_spec(response_type)
    assert spec.requested_schema["required"] == ["value"]
    assert properties_of(response_type) == {"value": {"type": json_type}}


def test_enum_is_a_single_select() -> None:
    assert properties_of(Size)["value"]["enum"] == ["small", "large"]


def test_literal_is_a_single_select() -> None:
    assert properties_of(Literal["a", "b"])["value"] == {"type": "string", "enum": ["a", "b"]}


def test_list_of_literal_is_a_multi_select() -> None:
    value = properties_of(list[Literal["x", "y"]])["value"]
    assert value["type"] == "array"
    assert value["items"]["enum"] == ["x", "y"]


def test_list_of_enum_is_a_multi_select() -> None:
    value = properties_of(list[Size])["value"]
    assert value["type"] == "array"
    assert value["items"]["enum"] == ["small", "large"]


def test_pydantic_model_is_asked_field_by_field() -> None:
    properties = properties_of(Person)
    assert properties["name"]["type"] == "string"
    assert properties["name"]["minLength"] == 1
    assert properties["name"]["description"] == "Full name"
    assert properties["age"] == {"type": "integer", "minimum": 0, "title": "Age"}
    assert properties["email"]["format"] == "email"
    assert elicitation_spec(Person).requested_schema["required"] == ["name", "age"]


def test_a_response_type_asked_again_gets_a_schema_of_its_own() -> None:
    # Specs are built once per type: a caller that changes its schema changes no other.
    first = elicitation_spec(Person).requested_schema
    first["properties"]["name"]["description"] = "changed"
    first["required"].append("extra")
    again = elicitation_spec(Person).requested_schema
    assert again["properties"]["name"]["description"] == "Full name"
    assert again["required"] == ["name", "age"]


def test_literals_equal_to_typing_keep_their_own_order() -> None:
    assert Literal["b", "a"] == Literal["a", "b"]  # typing's equality ignores the order
    assert properties_of(Literal["b", "a"])["value"]["enum"] == ["b", "a"]
    assert properties_of(Literal["a", "b"])["value"]["enum"] == ["a", "b"]


def test_an_unhashable_response_type_is_still_asked() -> None:
    class Unhashable(type):  # __eq__ without __hash__: its classes cannot be hashed
        def __eq__(cls, other: object) -> bool:
            return cls is other

    @dataclasses.dataclass
    class Answer(metaclass=Unhashable):
        count: int

    with pytest.raises(TypeError):
        hash(Answer)
    spec = elicitation_spec(Answer)
    assert spec.requested_schema["properties"]["count"]["type"] == "integer"
    answer = spec.parse({"action": "accept", "content": {"count": 3}})
    assert isinstance(answer, AcceptedElicitation) and answer.data == Answer(count=3)


def test_dataclass_is_asked_field_by_field() -> None:
    properties = properties_of(Address)
    assert properties["city"]["type"] == "string"
    assert properties["zip_code"]["default"] == "0000"
    assert elicitation_spec(Address).requested_schema["required"] == ["city"]


def test_typing_extensions_typeddict_is_asked_field_by_field() -> None:
    properties = properties_of(ExtFlags)
    assert properties["verbose"]["type"] == "boolean"
    assert properties["level"]["type"] == "integer"


def test_typing_typeddict_is_asked_field_by_field() -> None:
    properties = properties_of(StdFlags)
    assert properties["verbose"]["type"] == "boolean"
    assert properties["level"]["type"] == "integer"


def test_optional_model_field_is_an_optional_primitive() -> None:
    class Profile(BaseModel):
        name: str
        nickname: str | None = None

    properties = properties_of(Profile)
    assert properties["nickname"]["type"] == "string"
    assert elicitation_spec(Profile).requested_schema["required"] == ["name"]


def test_none_asks_for_a_bare_confirmation() -> None:
    spec = elicitation_spec(None)
    assert spec.requested_schema == {"type": "object", "properties": {}}
    assert spec.parse({"action": "accept", "content": {}}) == AcceptedElicitation(data=None)


def test_nested_model_is_refused() -> None:
    class Outer(BaseModel):
        inner: Person

    with pytest.raises(TypeError, match="flat"):
        elicitation_spec(Outer)


@pytest.mark.parametrize("response_type", [dict, list[str], bytes, Person | None])
def test_unsupported_response_type_is_refused(response_type: Any) -> None:
    with pytest.raises(TypeError):
        elicitation_spec(response_type)


@pytest.mark.parametrize(
    ("response_type", "content", "expected"),
    [
        (str, {"value": "hi"}, "hi"),
        (int, {"value": 3}, 3),
        (float, {"value": 1.5}, 1.5),
        (bool, {"value": False}, False),
        (Size, {"value": "large"}, Size.LARGE),
        (Literal["a", "b"], {"value": "b"}, "b"),
        (list[Literal["x", "y"]], {"value": ["y"]}, ["y"]),
        (Person, {"name": "Ada", "age": 36}, Person(name="Ada", age=36)),
        (Address, {"city": "Oslo"}, Address(city="Oslo")),
        (ExtFlags, {"verbose": True, "level": 2}, {"verbose": True, "level": 2}),
    ],
    ids=[
        "str",
        "int",
        "float",
        "bool",
        "enum",
        "literal",
        "multi",
        "model",
        "dataclass",
        "typeddict",
    ],
)
def test_accepted_content_is_parsed_into_the_response_type(
    response_type: Any, content: dict[str, Any], expected: Any
) -> None:
    parsed = elicitation_spec(response_type).parse({"action": "accept", "content": content})
    assert parsed == AcceptedElicitation(data=expected)
    assert type(parsed.data) is type(expected)


def test_accepted_content_of_the_wrong_type_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="does not match"):
        elicitation_spec(int).parse({"action": "accept", "content": {"value": "many"}})


def test_decline_and_cancel_are_parsed() -> None:
    spec = elicitation_spec(str)
    assert spec.parse({"action": "decline"}) == DeclinedElicitation()
    assert spec.parse({"action": "cancel"}) == CancelledElicitation()


def test_unknown_action_counts_as_cancel() -> None:
    assert elicitation_spec(str).parse({"action": "shrug"}) == CancelledElicitation()


# -- TaskConfig and the registry --------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "mode"),
    [
        (True, "optional"),
        (False, "forbidden"),
        (None, "forbidden"),
        ("required", "required"),
        ("optional", "optional"),
        ("forbidden", "forbidden"),
    ],
)
def test_task_config_coercion(task: Any, mode: str) -> None:
    assert TaskConfig.coerce(task).mode == mode


def test_task_config_passes_through_a_config() -> None:
    config = TaskConfig(mode="required", ttl=60, poll_interval=1.0, queue="q", timeout=30)
    assert TaskConfig.coerce(config) is config


@pytest.mark.parametrize("task", ["sometimes", 3, ["optional"]])
def test_task_config_rejects_anything_else(task: Any) -> None:
    with pytest.raises(ImproperlyConfigured):
        TaskConfig.coerce(task)


def test_tool_task_argument_is_stored_as_task_config() -> None:
    registry = MCPServer()

    @registry.tool(task=True)
    async def background() -> str:
        return ""

    @registry.tool()
    def inline() -> str:
        return ""

    assert registry.tools["background"].task == TaskConfig(mode="optional")
    assert registry.tools["inline"].task.mode == "forbidden"


def test_duplicate_tool_name_is_improperly_configured() -> None:
    registry = MCPServer()

    @registry.tool(name="same")
    def first() -> str:
        return "1"

    with pytest.raises(ImproperlyConfigured, match="same"):

        @registry.tool(name="same")
        def second() -> str:
            return "2"


def test_reregistering_the_same_function_is_harmless() -> None:
    registry = MCPServer()

    def tool() -> str:
        return ""

    registry.tool()(tool)
    registry.tool()(tool)
    assert list(registry.tools) == ["tool"]


def test_duplicate_prompt_name_is_improperly_configured() -> None:
    registry = MCPServer()

    @registry.prompt(name="p")
    def one() -> str:
        return ""

    with pytest.raises(ImproperlyConfigured):

        @registry.prompt(name="p")
        def two() -> str:
            return ""


@pytest.mark.parametrize("name", ["has space", "", "x" * 129, "slash/name"])
def test_invalid_tool_name_is_improperly_configured(name: str) -> None:
    registry = MCPServer()
    with pytest.raises(ImproperlyConfigured):
        registry.tool(name=name)(lambda: "")


def test_tool_decorator_without_parentheses_is_a_type_error() -> None:
    registry = MCPServer()
    with pytest.raises(TypeError, match="parentheses"):
        registry.tool(lambda: "")  # type: ignore[arg-type]


def test_resource_template_variables_must_match_the_parameters() -> None:
    registry = MCPServer()
    with pytest.raises(ImproperlyConfigured):

        @registry.resource("unit://items/{item_id}")
        def item(other: str) -> str:
            return other


def test_context_parameter_is_injected_and_left_out_of_the_schema() -> None:
    registry = MCPServer()

    @registry.tool()
    async def with_context(query: str, context: Context) -> str:
        return query

    spec = registry.tools["with_context"]
    assert spec.context_param == "context"
    assert set(spec.input_schema["properties"]) == {"query"}

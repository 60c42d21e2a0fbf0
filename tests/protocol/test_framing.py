"""The protocol layer's framing, without a server: JSON-RPC parsing and message kinds, the
modern envelope (``_meta``) and its ``mcp-*`` / ``mcp-param-*`` headers."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest

from mcp_tasks import MCPServer
from mcp_tasks.auth import ANONYMOUS
from mcp_tasks.exceptions import ProtocolError
from mcp_tasks.protocol import (
    Dispatcher,
    kind_of,
    legacy_request_info,
    modern_request_info,
    parse_body,
)
from mcp_tasks.protocol.envelope import check_modern_envelope, check_param_headers
from tests.support.protocol_fixtures import (
    MODERN,
    FakeSink,
    call,
    error_code,
    modern_info,
    request,
    result_of,
    run,
    text,
)

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


@pytest.mark.parametrize("token", [True, False], ids=["true", "false"])
async def test_a_boolean_progress_token_is_no_token_in_either_era(
    server: MCPServer, token: bool
) -> None:
    """JSON ``true`` is no progress token (a string or an integer): the modern envelope
    ignores it as a legacy request does, and no progress goes out under it."""
    meta = {"progressToken": token}
    modern = request("tools/call", {**envelope_params(**meta), "name": "chatty"})
    legacy = request("tools/call", {"_meta": meta, "name": "chatty"})
    info = modern_request_info(modern, headers_for("tools/call", "chatty"), ANONYMOUS)
    assert info.progress_token is None
    assert legacy_request_info(legacy, {}, ANONYMOUS, None).progress_token is None
    sink = FakeSink()
    result_of(await Dispatcher(server).handle(modern, info, sink))
    assert "notifications/progress" not in sink.methods()


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


@pytest.mark.parametrize(
    ("value", "header", "matches"),
    [
        (10**400, "1" + "0" * 400, True),
        (10**400, "1", False),
        (10**400, "inf", False),
        (2**53 + 1, str(2**53), False),
        (2**53 + 1, str(2**53 + 1), True),
        (3, "3.0", True),
        (0.5, "0.5", True),
    ],
    ids=[
        "huge-same",
        "huge-other",
        "huge-vs-inf",
        "past-double-other",
        "past-double-same",
        "int-as-float",
        "float",
    ],
)
async def test_a_numeric_param_header_is_compared_exactly(
    server: MCPServer, value: Any, header: str, matches: bool
) -> None:
    """An integer argument past a double's range or precision is compared as the integer
    it is: no ``OverflowError`` (a ``-32603``), no match of a different number."""
    schema = server.tools["regional"].input_schema
    headers = {"mcp-param-region": header}
    if matches:
        check_param_headers(schema, {"region": value}, headers)
    else:
        with pytest.raises(ProtocolError) as caught:
            check_param_headers(schema, {"region": value}, headers)
        assert caught.value.code == -32020
    response = await run(server, call("regional", {"region": value}), modern_info(headers=headers))
    if not matches:
        assert error_code(response) == -32020
    else:
        assert "error" not in response or response["error"]["code"] != -32603

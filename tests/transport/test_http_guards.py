"""Raw HTTP against a live server: every guard and error of the MCP endpoint, both eras."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer
from tests.live_tools.tools import SECRET_DETAIL
from tests.support.live import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    attach_server_output,
    final_message,
    legacy_headers,
    legacy_initialize,
    messages_of,
    modern_headers,
    modern_request,
    start_module_server,
)

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]

MAX_BODY = 64 * 1024
LISTED_ORIGIN = "https://app.example.com"
ELICITATION: dict[str, Any] = {"elicitation": {"form": {}}}
KEEPALIVE = 0.5  # seconds between ": ping" comments on a quiet stream


@pytest.fixture(scope="module")
def server_env() -> dict[str, str]:
    return {
        "MCP_TASKS_TEST_MAX_BODY_BYTES": str(MAX_BODY),
        "MCP_TASKS_TEST_ALLOWED_ORIGINS": LISTED_ORIGIN,
        "MCP_TASKS_TEST_SSE_KEEPALIVE": str(KEEPALIVE),
    }


@pytest.fixture(scope="module")
def closed_server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """A server with ``ALLOW_ANONYMOUS: False``."""
    yield from start_module_server(
        request, {"MCP_TASKS_TEST_ALLOW_ANONYMOUS": "0"}, label="no-anonymous server"
    )


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def error_of(response: httpx.Response) -> dict[str, Any]:
    message = final_message(response)
    assert "error" in message, message
    error: dict[str, Any] = message["error"]
    return error


async def post_modern(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    headers: dict[str, str] | None = None,
    **request_kwargs: Any,
) -> httpx.Response:
    body = modern_request(method, params, **request_kwargs)
    return await http.post(
        url, json=body, headers={**modern_headers(method, name), **(headers or {})}
    )


def call_params(tool: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments, **extra}


# -- Host and Origin --------------------------------------------------------------------------


async def test_bad_host_is_rejected(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(http, url, "tools/list", headers={"Host": "evil.example:80"})
    assert 400 <= response.status_code < 500
    assert response.status_code not in (404, 405)


async def raw_post(url: str, header_lines: list[tuple[str, str]], body: bytes) -> int:
    """POST ``body`` with exactly these header lines (repeats kept); the status code."""
    target = httpx.URL(url)
    reader, writer = await asyncio.open_connection(target.host, target.port)
    try:
        lines = [
            f"POST {target.raw_path.decode()} HTTP/1.1",
            *(f"{k}: {v}" for k, v in header_lines),
        ]
        lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
        writer.write("\r\n".join(lines).encode("latin-1") + body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
        return int(status_line.split()[1])
    finally:
        writer.close()


@pytest.mark.parametrize("name", ["Host", "Origin"])
async def test_a_repeated_host_or_origin_header_is_a_bad_request(url: str, name: str) -> None:
    # RFC 9112 3.2: more than one Host line is a 400; a browser sends one Origin (RFC 6454
    # 7.2), so a second one is a forgery to refuse, not a choice to make.
    host = httpx.URL(url).netloc.decode()
    own = {"Host": host, "Origin": f"http://{host}"}
    headers = [(k, v) for k, v in modern_headers("tools/list").items()]
    repeated = [("Host", host), *headers, (name, own[name]), (name, "evil.example")]
    body = json.dumps(modern_request("tools/list")).encode()
    assert await raw_post(url, [("Host", host), *headers], body) == 200
    assert await raw_post(url, repeated, body) == 400


async def test_foreign_origin_is_forbidden(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http, url, "tools/list", headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403


async def test_loopback_origin_on_another_port_is_forbidden(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await post_modern(http, url, "tools/list", headers={"Origin": "http://127.0.0.1:1"})
    assert response.status_code == 403


async def test_same_host_on_another_scheme_is_forbidden_on_both_eras(
    http: httpx.AsyncClient, url: str, server: LiveServer
) -> None:
    other_scheme = server.url.replace("http://", "https://")
    modern = await post_modern(http, url, "tools/list", headers={"Origin": other_scheme})
    legacy = await http.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        headers={**legacy_headers(), "Origin": other_scheme},
    )
    assert (modern.status_code, legacy.status_code) == (403, 403)


async def test_a_default_port_written_or_not_is_the_same_origin(
    http: httpx.AsyncClient, url: str
) -> None:
    # As behind a proxy on port 80 that passes the client's Host on: "127.0.0.1", no port.
    response = await post_modern(
        http, url, "tools/list", headers={"Host": "127.0.0.1", "Origin": "http://127.0.0.1:80"}
    )
    assert response.status_code == 200
    assert "result" in final_message(response)


async def test_same_origin_is_allowed(
    http: httpx.AsyncClient, url: str, server: LiveServer
) -> None:
    response = await post_modern(http, url, "tools/list", headers={"Origin": server.url})
    assert response.status_code == 200
    assert "result" in final_message(response)
    assert response.headers["access-control-allow-origin"] == server.url


async def test_listed_origin_is_allowed(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(http, url, "tools/list", headers={"Origin": LISTED_ORIGIN})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == LISTED_ORIGIN


async def test_request_without_origin_is_allowed(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(http, url, "tools/list")
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


async def test_cors_preflight_from_listed_origin_is_answered(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await http.options(
        url,
        headers={
            "Origin": LISTED_ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, mcp-protocol-version, mcp-method",
        },
    )
    assert response.status_code in (200, 204)
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "mcp-method" in response.headers["access-control-allow-headers"].lower()


async def test_cors_preflight_from_foreign_origin_is_forbidden(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await http.options(
        url, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    )
    assert response.status_code == 403


# -- Accept, Content-Type, body size ----------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    ["application/json", "text/event-stream", "text/html"],
    ids=["json-only", "sse-only", "html"],
)
async def test_accept_missing_a_required_type_is_406(
    http: httpx.AsyncClient, url: str, accept: str
) -> None:
    response = await post_modern(http, url, "tools/list", headers={"Accept": accept})
    assert response.status_code == 406


async def test_accept_header_absent_is_406(http: httpx.AsyncClient, url: str) -> None:
    body = modern_request("tools/list")
    headers = modern_headers("tools/list")
    del headers["Accept"]
    response = await http.post(url, content=json.dumps(body), headers={**headers, "Accept": ""})
    assert response.status_code == 406


async def test_accept_with_parameters_and_quality_values_is_fine(
    http: httpx.AsyncClient, url: str
) -> None:
    accept = "application/json;q=0.9, text/event-stream;q=0.8"
    response = await post_modern(http, url, "tools/list", headers={"Accept": accept})
    assert response.status_code == 200


async def test_accept_split_over_two_header_lines_is_fine(
    http: httpx.AsyncClient, url: str
) -> None:
    """RFC 9110 section 5.3: header lines of one name are one comma-separated list, so
    ``Accept: application/json`` plus ``Accept: text/event-stream`` accepts both."""
    body = modern_request("tools/list")
    headers = [
        (name, value) for name, value in modern_headers("tools/list").items() if name != "Accept"
    ]
    headers += [("Accept", "application/json"), ("Accept", "text/event-stream")]
    response = await http.post(url, content=json.dumps(body), headers=headers)
    assert response.status_code == 200, response.text
    assert "tools" in final_message(response)["result"]


async def test_wrong_content_type_is_415(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(http, url, "tools/list", headers={"Content-Type": "text/plain"})
    assert response.status_code == 415


async def test_content_type_with_charset_is_accepted(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http, url, "tools/list", headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert response.status_code == 200


async def test_body_over_the_limit_is_413(http: httpx.AsyncClient, url: str) -> None:
    body = modern_request("tools/call", call_params("summarize", {"values": [1]}))
    body["params"]["padding"] = "x" * MAX_BODY
    response = await http.post(
        url, content=json.dumps(body), headers=modern_headers("tools/call", "summarize")
    )
    assert response.status_code == 413


async def test_body_under_the_limit_is_served(http: httpx.AsyncClient, url: str) -> None:
    values = [1.0] * 1000
    response = await post_modern(
        http, url, "tools/call", call_params("summarize", {"values": values}), name="summarize"
    )
    assert response.status_code == 200
    assert final_message(response)["result"]["structuredContent"] == {
        "total": 1000.0,
        "count": 1000,
    }


# -- JSON-RPC framing -------------------------------------------------------------------------


async def test_bad_json_is_parse_error_with_null_id(http: httpx.AsyncClient, url: str) -> None:
    response = await http.post(
        url, content=b'{"jsonrpc": "2.0", "id": 1,', headers=modern_headers("tools/list")
    )
    assert response.status_code == 400
    message = final_message(response)
    assert message["id"] is None
    assert message["error"]["code"] == -32700


async def test_batch_is_invalid_request_with_null_id(http: httpx.AsyncClient, url: str) -> None:
    batch = [modern_request("tools/list", request_id=1), modern_request("tools/list", request_id=2)]
    response = await http.post(url, json=batch, headers=modern_headers("tools/list"))
    assert response.status_code == 400
    message = final_message(response)
    assert message["id"] is None
    assert message["error"]["code"] == -32600


async def test_legacy_batch_is_invalid_request(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    response = await http.post(url, json=batch, headers=legacy_headers(session_id))
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600


async def test_non_jsonrpc_object_is_invalid_request(http: httpx.AsyncClient, url: str) -> None:
    response = await http.post(
        url, json={"id": 1, "method": "tools/list"}, headers=modern_headers("tools/list")
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600


async def test_modern_notification_is_202_without_body(http: httpx.AsyncClient, url: str) -> None:
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = await http.post(
        url, json=notification, headers=modern_headers("notifications/initialized")
    )
    assert response.status_code == 202
    assert response.content == b""


async def test_legacy_notification_is_202_without_body(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    notification = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
    response = await http.post(url, json=notification, headers=legacy_headers(session_id))
    assert response.status_code == 202
    assert response.content == b""


async def test_legacy_response_to_unknown_request_is_202(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    reply = {"jsonrpc": "2.0", "id": "never-asked", "result": {"action": "cancel"}}
    response = await http.post(url, json=reply, headers=legacy_headers(session_id))
    assert response.status_code == 202


async def test_unknown_method_is_method_not_found_404(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(http, url, "tools/frobnicate")
    assert response.status_code == 404
    assert error_of(response)["code"] == -32601


async def test_legacy_unknown_method_is_method_not_found(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/frobnicate"}
    response = await http.post(url, json=body, headers=legacy_headers(session_id))
    assert error_of(response)["code"] == -32601


# -- modern era: HTTP methods, envelope, headers, versions ------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_modern_get_and_delete_are_405_allow_post(
    http: httpx.AsyncClient, url: str, method: str
) -> None:
    response = await http.request(method, url, headers=modern_headers("tools/list"))
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_modern_result_has_no_session_id(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(http, url, "server/discover")
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers


async def test_modern_request_ignores_a_stray_session_id(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http, url, "tools/list", headers={"Mcp-Session-Id": "not-a-session"}
    )
    assert response.status_code == 200
    assert "result" in final_message(response)


async def test_server_discover_lists_the_modern_version(http: httpx.AsyncClient, url: str) -> None:
    result = final_message(await post_modern(http, url, "server/discover"))["result"]
    assert result["supportedVersions"] == [MODERN]
    assert result["resultType"] == "complete"
    assert "tools" in result["capabilities"]
    assert isinstance(result["ttlMs"], int)
    assert result["cacheScope"] in ("public", "private")


@pytest.mark.parametrize(
    "method", ["tools/list", "prompts/list", "resources/list", "resources/templates/list"]
)
async def test_modern_list_results_carry_caching_hints(
    http: httpx.AsyncClient, url: str, method: str
) -> None:
    result = final_message(await post_modern(http, url, method))["result"]
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int)
    assert result["cacheScope"] in ("public", "private")


async def test_modern_tool_result_has_result_type(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http, url, "tools/call", call_params("summarize", {"values": [2]}), name="summarize"
    )
    assert final_message(response)["result"]["resultType"] == "complete"


async def test_missing_meta_is_invalid_params(http: httpx.AsyncClient, url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = await http.post(url, json=body, headers=modern_headers("tools/list"))
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


@pytest.mark.parametrize(
    "missing",
    ["io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/protocolVersion"],
)
async def test_missing_envelope_key_is_invalid_params(
    http: httpx.AsyncClient, url: str, missing: str
) -> None:
    body = modern_request("tools/list")
    del body["params"]["_meta"][missing]
    response = await http.post(url, json=body, headers=modern_headers("tools/list"))
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32602
    assert missing in error["message"]


async def test_invalid_log_level_is_invalid_params(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(http, url, "tools/list", log_level="verbose")
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


async def test_missing_mcp_method_header_is_header_mismatch(
    http: httpx.AsyncClient, url: str
) -> None:
    headers = modern_headers("tools/list")
    del headers["Mcp-Method"]
    response = await http.post(url, json=modern_request("tools/list"), headers=headers)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


async def test_mcp_method_header_mismatch_is_header_mismatch(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await http.post(
        url, json=modern_request("tools/list"), headers=modern_headers("prompts/list")
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


async def test_duplicated_mcp_method_header_is_header_mismatch(
    http: httpx.AsyncClient, url: str
) -> None:
    headers = [(k, v) for k, v in modern_headers("tools/list").items()] + [
        ("Mcp-Method", "tools/list")
    ]
    response = await http.post(url, json=modern_request("tools/list"), headers=headers)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


async def test_missing_mcp_name_header_is_header_mismatch(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await post_modern(http, url, "tools/call", call_params("summarize", {"values": [1]}))
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


async def test_mcp_name_header_mismatch_is_header_mismatch(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await post_modern(
        http, url, "tools/call", call_params("summarize", {"values": [1]}), name="fail_internally"
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


async def test_mcp_name_header_for_resources_read_is_the_uri(
    http: httpx.AsyncClient, url: str
) -> None:
    params = {"uri": "live://static/info"}
    good = await post_modern(http, url, "resources/read", params, name="live://static/info")
    bad = await post_modern(http, url, "resources/read", params, name="live://other")
    assert good.status_code == 200
    assert final_message(good)["result"]["contents"][0]["text"] == "live tools are here"
    assert bad.status_code == 400
    assert error_of(bad)["code"] == -32020


async def test_base64_encoded_mcp_name_header_matches(http: httpx.AsyncClient, url: str) -> None:
    import base64

    encoded = "=?base64?" + base64.b64encode(b"summarize").decode() + "?="
    response = await post_modern(
        http, url, "tools/call", call_params("summarize", {"values": [1]}), name=encoded
    )
    assert response.status_code == 200


async def test_protocol_version_header_differing_from_envelope_is_header_mismatch(
    http: httpx.AsyncClient, url: str
) -> None:
    body = modern_request("tools/list")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2027-01-01"
    response = await http.post(url, json=body, headers=modern_headers("tools/list"))
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


async def test_unsupported_version_is_32022_with_supported_and_requested(
    http: httpx.AsyncClient, url: str
) -> None:
    body = modern_request("tools/list")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2027-01-01"
    headers = {**modern_headers("tools/list"), "MCP-Protocol-Version": "2027-01-01"}
    response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32022
    assert error["data"] == {"supported": [MODERN], "requested": "2027-01-01"}


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "initialize"])
async def test_legacy_only_methods_are_not_found_in_the_modern_era(
    http: httpx.AsyncClient, url: str, method: str
) -> None:
    response = await post_modern(
        http, url, method, {"level": "info"} if method == "logging/setLevel" else None
    )
    assert response.status_code == 404
    assert error_of(response)["code"] == -32601


async def test_streamed_response_uses_sse_headers(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http,
        url,
        "tools/call",
        call_params("progress_steps", {"steps": 2}),
        name="progress_steps",
        progress_token="p1",
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "no-cache" in response.headers["cache-control"]
    assert response.headers["x-accel-buffering"] == "no"
    messages = messages_of(response)
    assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2]
    assert all(m["params"]["progressToken"] == "p1" for m in messages[:-1])
    assert messages[-1]["result"]["content"][0]["text"] == "done 2 steps"


async def test_quiet_long_call_switches_to_sse_with_keepalive_pings(
    http: httpx.AsyncClient, url: str, tmp_path: Any
) -> None:
    arguments = {"marker_dir": str(tmp_path), "seconds": KEEPALIVE * 6}
    response = await post_modern(
        http, url, "tools/call", call_params("wait_for_cancel", arguments), name="wait_for_cancel"
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert ": ping" in response.text
    assert (
        final_message(response)["result"]["content"][0]["text"]
        == "finished without being cancelled"
    )


async def test_no_progress_without_a_progress_token(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http, url, "tools/call", call_params("progress_steps", {"steps": 2}), name="progress_steps"
    )
    assert [m.get("method") for m in messages_of(response)] == [None]


# -- tools: errors ----------------------------------------------------------------------------


async def test_unknown_tool_is_invalid_params(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http, url, "tools/call", call_params("no_such_tool", {}), name="no_such_tool"
    )
    error = error_of(response)
    assert error["code"] == -32602
    assert "no_such_tool" in error["message"]


async def test_legacy_unknown_tool_is_invalid_params(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": call_params("no_such_tool", {}),
    }
    response = await http.post(url, json=body, headers=legacy_headers(session_id))
    assert error_of(response)["code"] == -32602


async def test_invalid_arguments_are_an_error_result_naming_the_field(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await post_modern(
        http,
        url,
        "tools/call",
        call_params("register_user", {"username": ""}),
        name="register_user",
    )
    result = final_message(response)["result"]
    assert result["isError"] is True
    assert "username" in result["content"][0]["text"]


async def test_missing_argument_is_an_error_result_naming_the_field(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await post_modern(
        http, url, "tools/call", call_params("fail_for_client", {}), name="fail_for_client"
    )
    result = final_message(response)["result"]
    assert result["isError"] is True
    assert "reason" in result["content"][0]["text"]


async def test_raising_tool_is_an_error_result_with_hidden_details(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await post_modern(
        http, url, "tools/call", call_params("fail_internally", {}), name="fail_internally"
    )
    assert response.status_code == 200
    result = final_message(response)["result"]
    assert result["isError"] is True
    assert SECRET_DETAIL not in response.text
    assert "internal error" in result["content"][0]["text"]


async def test_tool_error_is_an_error_result_with_its_message(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await post_modern(
        http,
        url,
        "tools/call",
        call_params("fail_for_client", {"reason": "nope"}),
        name="fail_for_client",
    )
    result = final_message(response)["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == "cannot do that: nope"


# -- MRTR requestState ------------------------------------------------------------------------


async def first_round(
    http: httpx.AsyncClient, url: str, kind: str = "str", headers: dict[str, str] | None = None
) -> dict[str, Any]:
    response = await post_modern(
        http,
        url,
        "tools/call",
        call_params("elicit_kind", {"kind": kind}),
        name="elicit_kind",
        capabilities=ELICITATION,
        headers=headers,
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = final_message(response)["result"]
    assert result["resultType"] == "input_required", result
    return result


async def retry(
    http: httpx.AsyncClient,
    url: str,
    state: Any,
    responses: dict[str, Any],
    kind: str = "str",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    params = call_params(
        "elicit_kind", {"kind": kind}, inputResponses=responses, requestState=state
    )
    return await post_modern(
        http,
        url,
        "tools/call",
        params,
        name="elicit_kind",
        capabilities=ELICITATION,
        request_id=2,
        headers=headers,
    )


async def test_mrtr_input_required_then_retry_completes(http: httpx.AsyncClient, url: str) -> None:
    first = await first_round(http, url)
    (key,) = first["inputRequests"]
    request = first["inputRequests"][key]
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"]["properties"]["value"]["type"] == "string"
    assert isinstance(first["requestState"], str)
    answer = {key: {"action": "accept", "content": {"value": "Ada"}}}
    response = await retry(http, url, first["requestState"], answer)
    result = final_message(response)["result"]
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"action": "accept", "data": "Ada", "type_name": "str"}


async def test_mrtr_retry_without_the_answer_asks_again(http: httpx.AsyncClient, url: str) -> None:
    first = await first_round(http, url)
    response = await retry(
        http, url, first["requestState"], {"unrelated-key": {"action": "accept"}}
    )
    result = final_message(response)["result"]
    assert result["resultType"] == "input_required"
    assert set(result["inputRequests"]) == set(first["inputRequests"])


async def test_tampered_request_state_is_invalid_params(http: httpx.AsyncClient, url: str) -> None:
    first = await first_round(http, url)
    (key,) = first["inputRequests"]
    state = first["requestState"]
    tampered = state[:-3] + ("AAA" if state[-3:] != "AAA" else "BBB")
    response = await retry(
        http, url, tampered, {key: {"action": "accept", "content": {"value": "x"}}}
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


async def test_forged_request_state_is_invalid_params(http: httpx.AsyncClient, url: str) -> None:
    response = await retry(http, url, "v1.not-a-real-state", {})
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


async def test_request_state_replayed_for_other_arguments_is_invalid_params(
    http: httpx.AsyncClient, url: str
) -> None:
    first = await first_round(http, url, kind="str")
    (key,) = first["inputRequests"]
    response = await retry(
        http, url, first["requestState"], {key: {"action": "decline"}}, kind="int"
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


async def test_request_state_replayed_by_another_principal_is_invalid_params(
    http: httpx.AsyncClient, url: str
) -> None:
    first = await first_round(http, url, headers={"Authorization": "Bearer valid-alice"})
    (key,) = first["inputRequests"]
    response = await retry(
        http,
        url,
        first["requestState"],
        {key: {"action": "decline"}},
        headers={"Authorization": "Bearer valid-bob"},
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


async def test_request_state_replayed_for_another_tool_is_invalid_params(
    http: httpx.AsyncClient, url: str
) -> None:
    first = await first_round(http, url)
    params = call_params("elicit_twice", {}, inputResponses={}, requestState=first["requestState"])
    response = await post_modern(
        http, url, "tools/call", params, name="elicit_twice", capabilities=ELICITATION
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


async def test_input_request_needs_the_declared_capability(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await post_modern(
        http, url, "tools/call", call_params("elicit_kind", {"kind": "str"}), name="elicit_kind"
    )
    result = final_message(response)["result"]
    assert result["resultType"] == "complete"
    assert result["isError"] is True
    assert "inputRequests" not in result


# -- legacy era: sessions ---------------------------------------------------------------------


async def test_legacy_initialize_returns_a_session_id(http: httpx.AsyncClient, url: str) -> None:
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
    response = await http.post(url, json=body, headers=legacy_headers())
    assert response.status_code == 200
    assert len(response.headers["mcp-session-id"]) >= 32
    result = final_message(response)["result"]
    assert result["protocolVersion"] == LEGACY
    assert "resultType" not in result


async def test_legacy_initialize_with_unknown_version_answers_a_supported_one(
    http: httpx.AsyncClient, url: str
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2023-01-01",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    response = await http.post(
        url, json=body, headers={"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    )
    assert final_message(response)["result"]["protocolVersion"] in (
        "2025-11-25",
        "2025-06-18",
        "2025-03-26",
    )


async def test_legacy_request_without_session_is_400(http: httpx.AsyncClient, url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = await http.post(url, json=body, headers=legacy_headers())
    assert response.status_code == 400


async def test_legacy_request_with_unknown_session_is_404(
    http: httpx.AsyncClient, url: str
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = await http.post(url, json=body, headers=legacy_headers("f" * 64))
    assert response.status_code == 404


async def test_legacy_session_serves_requests(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = await http.post(url, json=body, headers=legacy_headers(session_id))
    assert response.status_code == 200
    assert response.headers["mcp-session-id"] == session_id
    assert any(tool["name"] == "summarize" for tool in final_message(response)["result"]["tools"])


async def test_legacy_ping_answers_empty_result(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    response = await http.post(
        url, json={"jsonrpc": "2.0", "id": 5, "method": "ping"}, headers=legacy_headers(session_id)
    )
    assert final_message(response) == {"jsonrpc": "2.0", "id": 5, "result": {}}


async def test_legacy_request_without_version_header_is_served(
    http: httpx.AsyncClient, url: str
) -> None:
    session_id = await legacy_initialize(http, url)
    headers = {
        "Accept": ACCEPT_BOTH,
        "Content-Type": "application/json",
        "Mcp-Session-Id": session_id,
    }
    response = await http.post(
        url, json={"jsonrpc": "2.0", "id": 5, "method": "ping"}, headers=headers
    )
    assert response.status_code == 200


async def test_legacy_delete_ends_the_session(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    deleted = await http.delete(url, headers=legacy_headers(session_id))
    assert deleted.status_code in (200, 204)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    reused = await http.post(url, json=body, headers=legacy_headers(session_id))
    assert reused.status_code == 404


async def test_legacy_delete_of_unknown_session_is_404(http: httpx.AsyncClient, url: str) -> None:
    response = await http.delete(url, headers=legacy_headers("e" * 64))
    assert response.status_code == 404


async def test_another_principals_session_is_not_found(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url, headers={"Authorization": "Bearer valid-alice"})
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    as_bob = await http.post(
        url, json=body, headers=legacy_headers(session_id, Authorization="Bearer valid-bob")
    )
    anonymous = await http.post(url, json=body, headers=legacy_headers(session_id))
    as_alice = await http.post(
        url, json=body, headers=legacy_headers(session_id, Authorization="Bearer valid-alice")
    )
    assert as_bob.status_code == 404
    assert anonymous.status_code == 404
    assert as_alice.status_code == 200


async def test_another_principal_cannot_delete_a_session(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url, headers={"Authorization": "Bearer valid-alice"})
    deleted = await http.delete(
        url, headers=legacy_headers(session_id, Authorization="Bearer valid-bob")
    )
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    still = await http.post(
        url, json=body, headers=legacy_headers(session_id, Authorization="Bearer valid-alice")
    )
    assert deleted.status_code == 404
    assert still.status_code == 200


async def test_legacy_get_without_session_is_400(http: httpx.AsyncClient, url: str) -> None:
    response = await http.get(
        url, headers={"Accept": "text/event-stream", "MCP-Protocol-Version": LEGACY}
    )
    assert response.status_code == 400


async def test_legacy_get_without_event_stream_accept_is_406(
    http: httpx.AsyncClient, url: str
) -> None:
    session_id = await legacy_initialize(http, url)
    response = await http.get(url, headers=legacy_headers(session_id, Accept="application/json"))
    assert response.status_code == 406


async def test_legacy_get_opens_an_event_stream(http: httpx.AsyncClient, url: str) -> None:
    session_id = await legacy_initialize(http, url)
    headers = legacy_headers(session_id, Accept="text/event-stream")
    async with http.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")


async def test_legacy_put_is_405_listing_the_allowed_methods(
    http: httpx.AsyncClient, url: str
) -> None:
    response = await http.put(url, json={}, headers=legacy_headers())
    assert response.status_code == 405
    assert {m.strip() for m in response.headers["allow"].split(",")} == {"GET", "POST", "DELETE"}


# -- authentication ---------------------------------------------------------------------------


async def test_bad_token_is_401_with_www_authenticate(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http, url, "tools/list", headers={"Authorization": "Bearer forged-mallory"}
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_non_bearer_authorization_is_401(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(http, url, "tools/list", headers={"Authorization": "Basic YTpi"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_expired_token_is_401(http: httpx.AsyncClient, url: str) -> None:
    response = await post_modern(
        http, url, "tools/list", headers={"Authorization": "Bearer expired-bob"}
    )
    assert response.status_code == 401


async def test_anonymous_is_401_when_anonymous_access_is_off(
    http: httpx.AsyncClient, closed_server: LiveServer, request: pytest.FixtureRequest
) -> None:
    attach_server_output(request, closed_server)
    response = await post_modern(http, closed_server.mcp_url, "tools/list")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_legacy_initialize_is_401_when_anonymous_access_is_off(
    http: httpx.AsyncClient, closed_server: LiveServer
) -> None:
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
    response = await http.post(closed_server.mcp_url, json=body, headers=legacy_headers())
    assert response.status_code == 401


async def test_valid_token_is_served_when_anonymous_access_is_off(
    http: httpx.AsyncClient, closed_server: LiveServer
) -> None:
    response = await post_modern(
        http,
        closed_server.mcp_url,
        "tools/call",
        call_params("whoami", {}),
        name="whoami",
        headers={"Authorization": "Bearer valid-frank"},
    )
    assert response.status_code == 200
    assert final_message(response)["result"]["structuredContent"]["client_id"] == "client-frank"

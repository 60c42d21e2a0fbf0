"""The ``Origin`` check of the MCP endpoint (``transport/http.py``), through the real ASGI
application (``mcp_application``): a browser page may call ``/mcp`` from this server's own
origin (scheme, host and port, a default port written or not; the scheme a TLS proxy
reports through ``SECURE_PROXY_SSL_HEADER``) or from one listed in ``ALLOWED_ORIGINS``;
any other origin gets 403 (MCP transport spec), on both eras. A request without ``Origin``
(not a browser) passes. Allowed requests are CORS preflights (answered 204 right after the
check) or ``tools/list``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref import testing
from django.test import override_settings

from mcp_tasks.asgi import mcp_application
from mcp_tasks.transport.http import SameOriginWebSocket
from tests.signin.asgi_calls import django_app
from tests.support.live import LEGACY, MODERN, modern_request

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_thread_closed"),
]

#: asgiref's communicator (its methods carry no type hints).
Communicator: Any = testing.ApplicationCommunicator
HOST = "mcp.example.com"
PROXY = {"SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https")}


@pytest.fixture(autouse=True)
def _hosts() -> Iterator[None]:
    with override_settings(ALLOWED_HOSTS=[HOST, "[::1]"]):
        yield


async def send(
    method: str = "OPTIONS",
    *,
    origin: str | None,
    host: str = HOST,
    scheme: str = "http",
    body: dict[str, Any] | None = None,
    **headers: str,
) -> dict[str, Any]:
    """One request to ``/mcp``: its status, headers (by name) and decoded body."""
    sent = [(b"host", host.encode())]
    if origin is not None:
        sent.append((b"origin", origin.encode()))
    sent += [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    if body is not None:
        sent += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ]
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "scheme": scheme,
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": sent,
    }
    communicator = Communicator(mcp_application(django_app), scope)
    payload = json.dumps(body).encode() if body is not None else b""
    await communicator.send_input({"type": "http.request", "body": payload})
    start = await communicator.receive_output(10)
    content = b""
    while True:
        part = await communicator.receive_output(10)
        content += part.get("body", b"")
        if not part.get("more_body"):
            break
    await communicator.wait(10)
    return {
        "status": start["status"],
        "headers": {name.decode(): value.decode() for name, value in start["headers"]},
        "body": content,
    }


async def assert_forbidden(origin: str, **request: Any) -> dict[str, Any]:
    response = await send(origin=origin, **request)
    assert response["status"] == 403, response
    assert "access-control-allow-origin" not in response["headers"]
    return response


async def assert_allowed(origin: str, **request: Any) -> None:
    response = await send(origin=origin, **request)
    assert response["status"] == 204, response
    assert response["headers"]["access-control-allow-origin"] == origin


# -- the server's own origin ------------------------------------------------------------------


async def test_a_request_without_origin_passes() -> None:
    response = await send(origin=None)
    assert response["status"] == 204
    assert "access-control-allow-origin" not in response["headers"]


async def test_the_servers_own_origin_is_allowed() -> None:
    await assert_allowed(f"http://{HOST}")


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"method": "OPTIONS"},
        {
            "method": "POST",
            "body": modern_request("tools/list"),
            "mcp_protocol_version": MODERN,
            "mcp_method": "tools/list",
        },
        {
            "method": "POST",
            "body": {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
            "mcp_protocol_version": LEGACY,
        },
        {"method": "GET", "mcp_protocol_version": LEGACY, "accept": "text/event-stream"},
    ],
    ids=["preflight", "modern-post", "legacy-initialize", "legacy-get"],
)
async def test_the_same_host_on_another_scheme_is_forbidden(request_kwargs: dict[str, Any]) -> None:
    response = await assert_forbidden(f"https://{HOST}", **request_kwargs)
    message = json.loads(response["body"])["error"]["message"]
    assert f"not this server's origin (http://{HOST})" in message
    assert "SECURE_PROXY_SSL_HEADER" in message


async def test_a_tls_server_forbids_its_plain_http_twin() -> None:
    await assert_forbidden(f"http://{HOST}", scheme="https")
    await assert_allowed(f"https://{HOST}", scheme="https")


@pytest.mark.parametrize("origin", [f"http://{HOST}:8080", f"http://{HOST}:443"])
async def test_the_same_host_on_another_port_is_forbidden(origin: str) -> None:
    await assert_forbidden(origin)


@pytest.mark.parametrize(
    ("scheme", "host", "origin"),
    [
        ("http", f"{HOST}:80", f"http://{HOST}"),
        ("http", HOST, f"http://{HOST}:80"),
        ("https", f"{HOST}:443", f"https://{HOST}"),
        ("https", HOST, f"https://{HOST}:443"),
        ("http", "[::1]:8000", "http://[::1]:8000"),
    ],
)
async def test_a_default_port_written_or_not_is_the_same_origin(
    scheme: str, host: str, origin: str
) -> None:
    await assert_allowed(origin, scheme=scheme, host=host)


async def test_the_default_port_of_the_other_scheme_is_another_origin() -> None:
    await assert_forbidden(f"https://{HOST}", host=f"{HOST}:443")  # http on port 443


@pytest.mark.parametrize("origin", ["null", HOST, f"ftp://{HOST}", "http://[::1", "http://:80"])
async def test_an_origin_that_is_no_http_origin_is_forbidden(origin: str) -> None:
    await assert_forbidden(origin)


# -- behind a proxy ---------------------------------------------------------------------------


async def test_behind_a_tls_proxy_the_forwarded_scheme_is_the_servers() -> None:
    with override_settings(**PROXY):
        await assert_allowed(f"https://{HOST}", x_forwarded_proto="https")
        await assert_forbidden(f"http://{HOST}", x_forwarded_proto="https")
        await assert_allowed(f"http://{HOST}", x_forwarded_proto="http")


async def test_a_forwarded_scheme_counts_only_with_secure_proxy_ssl_header() -> None:
    await assert_forbidden(f"https://{HOST}", x_forwarded_proto="https")
    await assert_allowed(f"http://{HOST}", x_forwarded_proto="https")


# -- ALLOWED_ORIGINS --------------------------------------------------------------------------


async def test_a_listed_origin_is_allowed_with_its_default_port_written_or_not() -> None:
    listed = ["https://app.example.com:443", "http://tools.example.com"]
    with override_settings(MCP_TASKS={"ALLOWED_ORIGINS": listed}):
        await assert_allowed("https://app.example.com")
        await assert_allowed("http://tools.example.com:80")
        await assert_forbidden("http://app.example.com")
        await assert_forbidden("https://tools.example.com")


async def test_a_star_allows_every_origin() -> None:
    with override_settings(MCP_TASKS={"ALLOWED_ORIGINS": ["*"]}):
        await assert_allowed("https://anywhere.example")


# -- the live admin's WebSocket ---------------------------------------------------------------


@pytest.mark.parametrize("repeated", ["host", "origin"])
def test_the_admin_socket_refuses_a_repeated_host_or_origin(repeated: str) -> None:
    # Servers already refuse such a handshake (daphne and uvicorn answer 400); the guard does
    # not rely on it.
    own = {"host": HOST, "origin": f"http://{HOST}"}
    sent = [(name.encode(), value.encode()) for name, value in own.items()]
    scope = {"type": "websocket", "scheme": "ws", "path": "/", "headers": sent}
    assert SameOriginWebSocket.allows(scope)
    second = {"host": "evil.example", "origin": "https://evil.example"}[repeated]
    assert not SameOriginWebSocket.allows(
        {**scope, "headers": [*sent, (repeated.encode(), second.encode())]}
    )

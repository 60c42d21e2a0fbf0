"""``ALLOW_ANONYMOUS = False`` closes every path of the endpoint to a caller without
credentials (the real ASGI application, through Channels' ``HttpCommunicator``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.testing import HttpCommunicator
from django.test import override_settings

from mcp_tasks.asgi import mcp_application
from tests.signin.asgi_calls import django_app

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_thread_closed"),
]

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
}


async def send(method: str, body: dict[str, Any] | None, **headers: str) -> dict[str, Any]:
    sent = [
        (b"host", b"mcp.example.com"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
    ]
    sent += [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    payload = json.dumps(body).encode() if body is not None else b""
    communicator = HttpCommunicator(
        mcp_application(django_app), method, "/mcp", body=payload, headers=sent
    )
    response: dict[str, Any] = await communicator.get_response(timeout=10)
    return response


def modern(method: str, params: dict[str, Any], name: str | None = None) -> tuple[Any, ...]:
    headers = {"mcp_protocol_version": MODERN, "mcp_method": method}
    if name:
        headers["mcp_name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    return body, headers


CASES = {
    "tools/list": ("POST", *modern("tools/list", {})),
    "tools/call": ("POST", *modern("tools/call", {"name": "x", "arguments": {}}, "x")),
    "tasks/get": ("POST", *modern("tasks/get", {"taskId": "t"}, "t")),
    "tasks/update": ("POST", *modern("tasks/update", {"taskId": "t", "inputResponses": {}}, "t")),
    "tasks/cancel": ("POST", *modern("tasks/cancel", {"taskId": "t"}, "t")),
    "legacy initialize": (
        "POST",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        },
        {"mcp_protocol_version": LEGACY},
    ),
    "legacy call in a session": (
        "POST",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"mcp_protocol_version": LEGACY, "mcp_session_id": "0" * 64},
    ),
    "legacy stream": ("GET", None, {"mcp_protocol_version": LEGACY, "mcp_session_id": "0" * 64}),
    "legacy delete": ("DELETE", None, {"mcp_protocol_version": LEGACY, "mcp_session_id": "0" * 64}),
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=pytest.mark.cancel) if case == "tasks/cancel" else case
        for case in sorted(CASES)
    ],
)
@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS={"ALLOW_ANONYMOUS": False})
async def test_no_credentials_get_401_everywhere(case: str) -> None:
    method, body, headers = CASES[case]
    response = await send(method, body, **headers)
    assert response["status"] == 401
    challenge = dict(response["headers"])[b"www-authenticate"].decode()
    assert challenge.startswith("Bearer")


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS={})
async def test_anonymous_is_served_by_default() -> None:
    body, headers = modern("tools/list", {})
    response = await send("POST", body, **headers)
    assert response["status"] == 200

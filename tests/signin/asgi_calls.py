"""The real ASGI application (``mcp_application``) called through Channels'
``HttpCommunicator``, and a tool that needs a scope: shared by ``test_resource_metadata.py``,
``test_verifiers.py`` and ``test_anonymous_off.py``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from channels.testing import HttpCommunicator

from mcp_tasks import mcp
from mcp_tasks.asgi import mcp_application
from tests.support.live import MODERN


@contextlib.contextmanager
def scoped_tool() -> Iterator[None]:
    """``scoped_report``, a tool that needs the ``reports:read`` scope, while inside."""

    @mcp.tool(name="scoped_report", scopes=["reports:read"])
    def scoped_report() -> str:
        return "report"

    try:
        yield
    finally:
        mcp.tools.pop("scoped_report", None)


async def django_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"django"})


async def request(
    method: str, path: str, body: dict[str, Any] | None = None, **headers: str
) -> dict[str, Any]:
    sent = [(b"host", b"mcp.example.com")]
    sent += [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    payload = json.dumps(body).encode() if body is not None else b""
    if body is not None:
        sent += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ]
    communicator = HttpCommunicator(
        mcp_application(django_app), method, path, body=payload, headers=sent
    )
    response: dict[str, Any] = await communicator.get_response(timeout=10)
    response["header_map"] = {k.decode(): v.decode() for k, v in response["headers"]}
    return response


def call(name: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": name,
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }


def modern(name: str, **extra: str) -> dict[str, str]:
    return {"mcp_protocol_version": MODERN, "mcp_method": "tools/call", "mcp_name": name, **extra}

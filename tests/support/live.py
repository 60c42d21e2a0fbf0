"""Helpers for the live-server tests: module-scoped servers, SDK clients, raw MCP over httpx.

``conftest.asgi_server`` is function-scoped; the client and guard modules run dozens of
tests against one server each, so :func:`start_module_server` starts one the same way
(fresh migrated database, daphne on a loopback socket) for a module-scoped fixture.

The fixtures ``server`` (and ``module_server`` behind it) give each module that asks one
such server; a module overrides ``server_env`` to change its settings, or ``server`` when its
stack differs (a worker, a Redis of its own, seeded users).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import _SERVERS, LiveServer, launch_server

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
#: ``MCP_TASKS_TEST_ANONYMOUS=off``: the live servers run with ``ALLOW_ANONYMOUS`` off and
#: every client of these helpers signs in with a bearer token of the test verifier (as do
#: the task servers of ``worker_fixtures`` and the clients in other virtualenvs and Node).
#: The client modules run again so in CI (``noxfile.py``): they must pass either way.
SIGNED_IN = os.environ.get("MCP_TASKS_TEST_ANONYMOUS", "on") == "off"
CLIENT_TOKEN = "valid-signed-in" if SIGNED_IN else None
#: The clients that run in their own virtualenv or in Node read their default token here.
TOKEN_ENV = "MCP_TASKS_TEST_TOKEN"
if CLIENT_TOKEN:
    os.environ.setdefault(TOKEN_ENV, CLIENT_TOKEN)
#: The settings of every live server and worker (``MCP_TASKS_TEST_*`` variables adjust them).
LIVE_SETTINGS_MODULE = "tests.support.live_settings"
LIVE_SETTINGS = {
    "DJANGO_SETTINGS_MODULE": LIVE_SETTINGS_MODULE,
    **({"MCP_TASKS_TEST_ALLOW_ANONYMOUS": "0"} if SIGNED_IN else {}),
}
ACCEPT_BOTH = "application/json, text/event-stream"


# -- servers ----------------------------------------------------------------------------------


def start_module_server(
    request: pytest.FixtureRequest,
    env: Mapping[str, str] | None = None,
    *,
    label: str = "module server",
) -> Iterator[LiveServer]:
    """Start a live server with ``tests.support.live_settings`` (plus ``env``) on a fresh database
    for a module-scoped fixture, on the ASGI server ``MCP_TASKS_TEST_SERVER`` names, like
    ``conftest.asgi_server`` (which is function-scoped); stop it after the module."""
    databases = request.getfixturevalue("_live_databases")
    log_dir = request.getfixturevalue("tmp_path_factory").mktemp("module-server")
    overrides = {"DATABASE_URL": databases.new(), **LIVE_SETTINGS, **(env or {})}
    server = launch_server(overrides, log_dir / "server.log", label=label)
    try:
        yield server
    finally:
        server.stop()


def attach_server_output(request: pytest.FixtureRequest, server: LiveServer) -> None:
    """Show ``server``'s output in the report when the current test fails."""
    request.node.stash.setdefault(_SERVERS, []).append(server)


@pytest.fixture(scope="module")
def server_env() -> dict[str, str]:
    """Settings of the module's :func:`server` beyond the live settings (none): a module whose
    server differs overrides this fixture, e.g. with ``MCP_TASKS_TEST_*`` variables."""
    return {}


@pytest.fixture(scope="module")
def module_server(
    request: pytest.FixtureRequest, server_env: dict[str, str]
) -> Iterator[LiveServer]:
    """One live server for the test module (see :func:`start_module_server`), started with
    ``server_env``."""
    yield from start_module_server(request, server_env, label=f"{request.module.__name__} server")


@pytest.fixture
def server(request: pytest.FixtureRequest, module_server: LiveServer) -> LiveServer:
    """The module's live server, whose output the report shows when the test fails."""
    attach_server_output(request, module_server)
    return module_server


def live_env(**extra: str) -> dict[str, str]:
    """Environment for ``asgi_server(env=...)``: the live settings plus ``extra``."""
    return {**LIVE_SETTINGS, **extra}


# -- SDK clients ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def sdk_client(
    url: str, *, token: str | None = None, headers: Mapping[str, str] | None = None, **kwargs: Any
) -> AsyncIterator[Any]:
    """An entered ``mcp.Client`` for ``url``; ``token`` adds ``Authorization: Bearer``,
    ``headers`` any other HTTP headers (e.g. a session cookie)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with contextlib.AsyncExitStack() as stack:
        extra = dict(headers or {})
        if token is None and not {"authorization", "cookie"} & {k.lower() for k in extra}:
            token = CLIENT_TOKEN
        if token is not None:
            extra["Authorization"] = f"Bearer {token}"
        if not extra:
            target: Any = url
        else:
            http = await stack.enter_async_context(create_mcp_http_client(headers=extra))
            target = streamable_http_client(url, http_client=http)
        client = await stack.enter_async_context(Client(target, **kwargs))
        yield client


# -- raw MCP over httpx -----------------------------------------------------------------------


def modern_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    headers = {
        "Accept": ACCEPT_BOTH,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    return _signed_in(headers, extra)


def _signed_in(headers: dict[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with ``extra``, and the client token when :data:`SIGNED_IN` (unless
    ``extra`` brings credentials of its own)."""
    if CLIENT_TOKEN and not {"authorization", "cookie"} & {k.lower() for k in extra}:
        headers["Authorization"] = f"Bearer {CLIENT_TOKEN}"
    headers.update(extra)
    return headers


def modern_request(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    request_id: int | str = 1,
    capabilities: dict[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
) -> dict[str, Any]:
    """A modern JSON-RPC request with the required ``_meta`` envelope."""
    params = dict(params or {})
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-tests", "version": "0"},
    }
    if log_level is not None:
        meta["io.modelcontextprotocol/logLevel"] = log_level
    if progress_token is not None:
        meta["progressToken"] = progress_token
    params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def legacy_headers(
    session_id: str | None = None, version: str = LEGACY, **extra: str
) -> dict[str, str]:
    headers = {
        "Accept": ACCEPT_BOTH,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": version,
    }
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    return _signed_in(headers, extra)


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a complete SSE body."""
    messages = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        payload = "\n".join(data).strip()
        if payload:  # a priming event carries an id and empty data
            messages.append(json.loads(payload))
    return messages


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """Every JSON-RPC message in a response, JSON or SSE."""
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        return parse_sse(response.text)
    if not response.content:
        return []
    return [response.json()]


def final_message(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response (the last message) of a POST."""
    messages = messages_of(response)
    assert messages, f"no message in {response.status_code} response: {response.text!r}"
    return messages[-1]


async def sse_messages(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Yield JSON-RPC messages from a streaming SSE response as they arrive (events without
    data, such as a resumable stream's priming event, are skipped)."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "":
            payload = "\n".join(data).strip()
            data = []
            if payload:
                yield json.loads(payload)


async def legacy_initialize(
    client: httpx.AsyncClient,
    url: str,
    *,
    capabilities: dict[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> str:
    """Run the legacy handshake over raw HTTP and return the session id."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw-tests", "version": "0"},
        },
    }
    response = await client.post(url, json=body, headers={**legacy_headers(), **(headers or {})})
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await client.post(
        url, json=initialized, headers={**legacy_headers(session_id), **(headers or {})}
    )
    assert done.status_code == 202, done.text
    return session_id


def wait_for_file(path: Path, timeout: float = 30.0) -> bool:
    """Poll for ``path`` to exist (a tool's marker); False when it never appears."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return path.exists()


async def await_file(path: Path, timeout: float = 30.0) -> bool:
    """Async version of :func:`wait_for_file`."""
    import asyncio

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        await asyncio.sleep(0.05)
    return path.exists()

"""Sign-in as 2026 clients do it, end to end: the ``mcp`` SDK's OAuth client (mcp 2.3)
against the example project on a live server.

- Client ID Metadata Documents: the test publishes the client's metadata document on a
  loopback port (HTTPS, a test authority the server trusts); the client offers its URL as
  the client_id, the authorization server fetches the document (the example's fetcher,
  allowed to reach loopback only: ``cimd_documents.py``), shows the client's name and host on the consent page, and
  issues a token; the client calls a tool and runs a task. With CIMD off, the same client
  registers (RFC 7591) instead.
- The authorization response carries the issuer (RFC 9207 ``iss``), which the SDK checks
  since the metadata announces it.
- Step-up: the 401 challenge asks for the default scope only; a tool that needs another
  answers 403 ``insufficient_scope`` naming it, the user consents again to the wider
  scope, and the call passes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import LiveServer
from tests.signin.cimd_documents import DocumentServer, trust_env
from tests.signin.oauth_client import (
    CREATE_USERS,
    PASSWORD,
    REDIRECT,
    Browser,
    MemoryStorage,
    oauth_client,
)
from tests.support.live import (
    attach_server_output,
    modern_headers,
    modern_request,
    start_module_server,
)
from tests.support.results import task_text_of as text_of
from tests.support.task_driver import TaskDriver, django_shell, task_capabilities

pytestmark = pytest.mark.live

SIGNED_IN_ONLY = {
    "DJANGO_SETTINGS_MODULE": "tests.signin.cimd_settings",
    "MCP_TASKS_TEST_TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.dot.verify",
    "MCP_TASKS_TEST_ALLOW_ANONYMOUS": "0",
}
USERS = ["ada", "grace", "edsger"]
DOCUMENT = "/clients/desk-assistant.json"


def without_credentials(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` without the test token that ``MCP_TASKS_TEST_ANONYMOUS=off`` adds."""
    return {name: value for name, value in headers.items() if name != "Authorization"}


@pytest.fixture(scope="module")
def documents() -> Iterator[DocumentServer]:
    server = DocumentServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def client_id(documents: DocumentServer) -> str:
    return documents.publish(DOCUMENT, "Desk Assistant", REDIRECT)


def _server_with_users(request: pytest.FixtureRequest, env: dict[str, str]) -> Iterator[LiveServer]:
    for server in start_module_server(request, {**env, **trust_env()}, label="sign-in server"):
        asyncio.run(django_shell(server, CREATE_USERS, usernames=USERS, password=PASSWORD))
        yield server


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The example project as configured: CIMD on, dynamic registration as the fallback."""
    yield from _server_with_users(request, SIGNED_IN_ONLY)


@pytest.fixture(scope="module")
def server_without_cimd(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    yield from _server_with_users(request, {**SIGNED_IN_ONLY, "SIGNIN_TEST_CIMD": "off"})


async def test_discovery_announces_cimd_iss_and_the_scopes_to_ask_for(server: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        metadata = (await http.get(f"{server.url}/.well-known/oauth-authorization-server")).json()
        resource = (await http.get(f"{server.url}/.well-known/oauth-protected-resource/mcp")).json()
        challenge = await http.post(
            server.mcp_url,
            json=modern_request("tools/list"),
            headers=without_credentials(modern_headers("tools/list")),
        )
    assert metadata["client_id_metadata_document_supported"] is True
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert metadata["registration_endpoint"] == f"{server.url}/o/register/"  # the fallback
    assert resource["scopes_supported"][:1] == ["mcp"]
    assert "account:read" in resource["scopes_supported"]
    assert challenge.status_code == 401
    assert challenge.headers["www-authenticate"] == (
        f'Bearer scope="mcp", resource_metadata="{server.url}'
        '/.well-known/oauth-protected-resource/mcp"'
    )


async def test_client_signs_in_with_its_metadata_document_url(
    server: LiveServer, documents: DocumentServer, client_id: str
) -> None:
    ada, storage = Browser("ada"), MemoryStorage()
    async with oauth_client(server, ada, storage, client_metadata_url=client_id) as client:
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5}
    assert storage.client_info.client_id == client_id  # no registration
    assert documents.fetches[DOCUMENT] >= 1
    assert ada.consents[0]["client-name"] == "Desk Assistant"
    assert "vouched for by 127.0.0.1" in ada.consents[0]["client-host"]
    assert client_id in ada.consents[0]["client-host"]
    assert ada.result["iss"] == server.url  # RFC 9207
    async with httpx.AsyncClient(timeout=60) as http:
        token = storage.tokens.access_token
        driver = TaskDriver(http, server.mcp_url, capabilities=task_capabilities(), token=token)
        task_id = await driver.call("trivial_task", {"n": 7})
        assert text_of(await driver.run(task_id)) == "7"


async def test_same_client_registers_when_cimd_is_off(
    server_without_cimd: LiveServer, documents: DocumentServer, client_id: str
) -> None:
    fetched = documents.fetches.get(DOCUMENT, 0)
    edsger, storage = Browser("edsger"), MemoryStorage()
    async with oauth_client(
        server_without_cimd, edsger, storage, client_metadata_url=client_id
    ) as client:
        result = await client.call_tool("add", {"a": 20, "b": 22})
        assert result.structured_content == {"result": 42}
    assert storage.client_info.client_id != client_id  # a registered (RFC 7591) client_id
    assert documents.fetches.get(DOCUMENT, 0) == fetched
    assert edsger.consents[0]["client-name"] == "SDK test client"
    assert "send you back to 127.0.0.1" in edsger.consents[0]["client-host"]


async def test_tool_needing_a_scope_gets_403_then_a_wider_consent(
    server: LiveServer, client_id: str
) -> None:
    grace, storage = Browser("grace"), MemoryStorage()
    async with oauth_client(server, grace, storage, client_metadata_url=client_id) as client:
        await client.call_tool("add", {"a": 1, "b": 1})
        narrow = storage.tokens.access_token
        # Listed for the narrow token too: a client can only step up to a tool it sees.
        assert "account_info" in [tool.name for tool in (await client.list_tools()).tools]
        async with httpx.AsyncClient(timeout=30) as http:
            refused = await http.post(
                server.mcp_url,
                json=modern_request("tools/call", {"name": "account_info", "arguments": {}}),
                headers=modern_headers(
                    "tools/call", "account_info", Authorization=f"Bearer {narrow}"
                ),
            )
        assert refused.status_code == 403
        challenge = refused.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge
        assert 'scope="account:read"' in challenge

        result = await client.call_tool("account_info", {})  # the SDK steps up
    assert not result.is_error
    assert "scopes: mcp account:read" in final_text(result)
    first, wider = (consent["scopes"] for consent in grace.consents)
    assert "MCP tools and tasks" in first and "See which account" not in first
    assert "MCP tools and tasks" in wider and "See which account" in wider
    assert storage.tokens.access_token != narrow


def final_text(result: object) -> str:
    content = getattr(result, "content", [])
    return " ".join(getattr(block, "text", "") for block in content)


@pytest.fixture(autouse=True)
def _show_server_output(request: pytest.FixtureRequest) -> None:
    """A failed test's report shows the output of the servers it used."""
    for name in ("server", "server_without_cimd"):
        if name in request.fixturenames:
            attach_server_output(request, request.getfixturevalue(name))

"""RFC 9728 protected resource metadata, the 401 challenge that points at it, RFC 8707
audience binding and the 403 ``insufficient_scope`` step-up, through the real ASGI
application (``mcp_application``) with Channels' ``HttpCommunicator``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from channels.testing import HttpCommunicator
from django.test import override_settings

from mcp_tasks import AccessToken
from mcp_tasks.asgi import mcp_application
from mcp_tasks.transport.resource_metadata import supported_scopes
from tests.signin.asgi_calls import call, django_app, modern, request, scoped_tool

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_thread_closed"),
]

ISSUER = "https://auth.example.com"
OAUTH = {
    "AUTHORIZATION_SERVERS": [ISSUER],
    "TOKEN_VERIFIER": "tests.signin.test_resource_metadata.verify",
}


def verify(token: str) -> AccessToken | None:
    """``scopes-<a,b>-aud-<url>``: a token with those scopes for that audience."""
    if not token.startswith("scopes-"):
        return None
    scopes, _, audience = token.removeprefix("scopes-").partition("-aud-")
    return AccessToken(
        token=token,
        client_id="client",
        scopes=[scope for scope in scopes.split(",") if scope],
        claims={"sub": "someone"},
        audience=(audience,) if audience else (),
    )


@pytest.fixture(autouse=True)
def _scoped_tool() -> Iterator[None]:
    with scoped_tool():
        yield


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS=OAUTH)
async def test_metadata_document_is_built_from_settings_and_request() -> None:
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        response = await request("GET", path)
        assert response["status"] == 200
        document = json.loads(response["body"])
        assert document["resource"] == "http://mcp.example.com/mcp"
        assert document["authorization_servers"] == [ISSUER]
        assert document["bearer_methods_supported"] == ["header"]
        assert "reports:read" in document["scopes_supported"]
        assert response["header_map"]["access-control-allow-origin"] == "*"


@override_settings(
    ALLOWED_HOSTS=["mcp.example.com"],
    MCP_TASKS={**OAUTH, "RESOURCE": "https://mcp.example.com/mcp", "SCOPES_SUPPORTED": ["a"]},
)
async def test_configured_resource_and_scopes_win() -> None:
    response = await request("GET", "/.well-known/oauth-protected-resource/mcp")
    document = json.loads(response["body"])
    assert document["resource"] == "https://mcp.example.com/mcp"
    assert document["scopes_supported"] == ["a"]


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS={})
async def test_no_metadata_without_authorization_servers() -> None:
    response = await request("GET", "/.well-known/oauth-protected-resource")
    assert response["status"] == 404


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS=OAUTH)
async def test_metadata_refuses_an_unknown_host() -> None:
    communicator = HttpCommunicator(
        mcp_application(django_app),
        "GET",
        "/.well-known/oauth-protected-resource",
        headers=[(b"host", b"evil.example.net")],
    )
    response = await communicator.get_response(timeout=10)
    assert response["status"] == 421


@override_settings(
    ALLOWED_HOSTS=["mcp.example.com"],
    SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"),
    MCP_TASKS={**OAUTH, "ALLOW_ANONYMOUS": False},
)
async def test_401_points_at_the_metadata_built_from_the_request() -> None:
    response = await request(
        "POST", "/mcp", call("scoped_report"), **modern("scoped_report"), x_forwarded_proto="https"
    )
    assert response["status"] == 401
    challenge = response["header_map"]["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert (
        'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"'
        in challenge
    )


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS=OAUTH)
async def test_token_for_another_resource_is_refused() -> None:
    token = "scopes-reports:read-aud-https://other.example.com/mcp"
    response = await request(
        "POST",
        "/mcp",
        call("scoped_report"),
        **modern("scoped_report"),
        authorization=f"Bearer {token}",
    )
    assert response["status"] == 401
    assert 'error="invalid_token"' in response["header_map"]["www-authenticate"]


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS=OAUTH)
async def test_token_for_this_resource_is_accepted() -> None:
    token = "scopes-reports:read-aud-http://mcp.example.com/mcp"
    response = await request(
        "POST",
        "/mcp",
        call("scoped_report"),
        **modern("scoped_report"),
        authorization=f"Bearer {token}",
    )
    assert response["status"] == 200
    assert json.loads(response["body"])["result"]["content"][0]["text"] == "report"


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS=OAUTH)
async def test_token_missing_the_tool_scope_gets_403_insufficient_scope() -> None:
    token = "scopes-other-aud-http://mcp.example.com/mcp"
    response = await request(
        "POST",
        "/mcp",
        call("scoped_report"),
        **modern("scoped_report"),
        authorization=f"Bearer {token}",
    )
    assert response["status"] == 403
    challenge = response["header_map"]["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="reports:read"' in challenge
    assert "resource_metadata=" in challenge


def test_supported_scopes_default_to_the_registered_ones() -> None:
    with override_settings(MCP_TASKS={}):
        assert "reports:read" in supported_scopes()


@override_settings(
    ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS={**OAUTH, "AUTHORIZATION_SERVERS": ["/"]}
)
async def test_issuer_given_as_a_path_is_on_this_origin() -> None:
    response = await request("GET", "/.well-known/oauth-protected-resource/mcp")
    assert json.loads(response["body"])["authorization_servers"] == ["http://mcp.example.com"]


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS=OAUTH)
async def test_audience_with_a_trailing_slash_names_this_resource() -> None:
    token = "scopes-reports:read-aud-http://mcp.example.com/mcp/"
    response = await request(
        "POST",
        "/mcp",
        call("scoped_report"),
        **modern("scoped_report"),
        authorization=f"Bearer {token}",
    )
    assert response["status"] == 200

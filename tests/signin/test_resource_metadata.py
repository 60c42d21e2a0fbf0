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
from mcp_tasks.auth import InvalidTokenError
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
    """``scopes-<a,b>-aud-<url>``: a token with those scopes for that audience;
    ``refused-<reason>``: refused with that reason."""
    if token.startswith("refused-"):
        raise InvalidTokenError(token.removeprefix("refused-"))
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


@override_settings(
    ALLOWED_HOSTS=["mcp.example.com"],
    MCP_TASKS={**OAUTH, "ALLOW_ANONYMOUS": False, "SIGN_IN_SCOPES": ["mcp"]},
)
async def test_401_without_credentials_names_the_sign_in_scopes_and_no_error() -> None:
    response = await request("POST", "/mcp", call("scoped_report"), **modern("scoped_report"))
    assert response["status"] == 401
    assert response["header_map"]["www-authenticate"] == (
        'Bearer scope="mcp", '
        'resource_metadata="http://mcp.example.com/.well-known/oauth-protected-resource/mcp"'
    )  # RFC 6750 §3.1: no error code or description for a request without credentials


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS=OAUTH)
async def test_401_for_another_scheme_carries_no_error() -> None:
    response = await request(
        "POST", "/mcp", call("scoped_report"), **modern("scoped_report"), authorization="Basic YTpi"
    )
    assert response["status"] == 401
    challenge = response["header_map"]["www-authenticate"]
    assert "error" not in challenge
    assert "resource_metadata=" in challenge


@override_settings(
    ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS={**OAUTH, "SIGN_IN_SCOPES": ["mcp"]}
)
async def test_401_for_a_bad_token_explains_and_names_the_sign_in_scopes() -> None:
    response = await request(
        "POST", "/mcp", call("scoped_report"), **modern("scoped_report"), authorization="Bearer x"
    )
    challenge = response["header_map"]["www-authenticate"]
    assert challenge.startswith(
        'Bearer error="invalid_token", '
        'error_description="The access token is invalid or expired", scope="mcp", '
    )


@override_settings(ALLOWED_HOSTS=["mcp.example.com"], MCP_TASKS=OAUTH)
async def test_verifier_refusal_reason_reaches_the_client_as_a_safe_description() -> None:
    token = 'refused-sign in again, "please" \\ thanks'
    response = await request(
        "POST",
        "/mcp",
        call("scoped_report"),
        **modern("scoped_report"),
        authorization=f"Bearer {token}",
    )
    assert response["status"] == 401
    challenge = response["header_map"]["www-authenticate"]
    assert 'error_description="sign in again, ?please? ? thanks"' in challenge


def test_sign_in_scopes_lead_the_supported_scopes() -> None:
    with override_settings(MCP_TASKS={"SIGN_IN_SCOPES": ["mcp", "reports:read"]}):
        scopes = supported_scopes()
    assert scopes[:2] == ["mcp", "reports:read"]
    assert scopes.count("reports:read") == 1

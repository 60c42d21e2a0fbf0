"""The example project's authorization server (django-oauth-toolkit), configured as MCP
clients expect: RFC 8414 metadata, dynamic client registration (RFC 7591), authorization
code with PKCE S256 only, a sign-in and a consent page, and tokens bound to the MCP
resource (RFC 8707) that the DOT verifier accepts. Django's test client, real database."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from mcp_tasks.auth import principal_for
from mcp_tasks.auth.verifiers import dot
from project import settings as project_settings

pytestmark = pytest.mark.django_db

REDIRECT = "http://127.0.0.1:33418/callback"
RESOURCE = "http://testserver/mcp"


@pytest.fixture(autouse=True)
def _project_oauth() -> Iterator[None]:
    with override_settings(
        OAUTH2_PROVIDER=project_settings.OAUTH2_PROVIDER, LOGIN_URL=project_settings.LOGIN_URL
    ):
        yield


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def register(client: Client) -> str:
    response = client.post(
        "/o/register/",
        data=json.dumps(
            {
                "client_name": "Desk Assistant",
                "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    client_id: str = response.json()["client_id"]
    return client_id


def authorize_query(client_id: str, challenge: str, method: str = "S256") -> str:
    return urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "scope": "mcp",
            "state": "st4te",
            "code_challenge": challenge,
            "code_challenge_method": method,
            "resource": RESOURCE,
        }
    )


def test_metadata_announces_code_flow_with_s256_and_registration() -> None:
    response = Client().get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    assert document["issuer"] == "http://testserver"
    assert document["authorization_endpoint"] == "http://testserver/o/authorize/"
    assert document["token_endpoint"] == "http://testserver/o/token/"
    assert document["registration_endpoint"] == "http://testserver/o/register/"
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["response_types_supported"] == ["code"]
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert "none" in document["token_endpoint_auth_methods_supported"]


def test_signed_out_user_is_sent_to_the_sign_in_page() -> None:
    client = Client()
    client_id = register(client)
    _, challenge = pkce()
    response = client.get(f"/o/authorize/?{authorize_query(client_id, challenge)}")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert b'id="login-form"' in page.content


def test_code_flow_with_pkce_gives_a_token_for_the_mcp_resource() -> None:
    client = Client()
    client_id = register(client)
    user = get_user_model().objects.create_user(username="ada", password="pw-for-tests-1")
    client.force_login(user)
    verifier, challenge = pkce()
    query = authorize_query(client_id, challenge)
    consent = client.get(f"/o/authorize/?{query}")
    assert consent.status_code == 200
    assert b"Desk Assistant" in consent.content and b'id="allow"' in consent.content
    form = {key: value[0] for key, value in parse_qs(query).items()}
    decided = client.post("/o/authorize/", {**form, "allow": "Allow"})
    assert decided.status_code == 302
    location = urlsplit(decided["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    code = parse_qs(location.query)["code"][0]
    token = Client().post(
        "/o/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": RESOURCE,
        },
    )
    assert token.status_code == 200, token.content
    access = token.json()["access_token"]
    found = dot._lookup(access)
    assert found is not None
    assert found.audience == (RESOURCE,)
    assert principal_for(found).scope == f"user:{user.pk}"


def test_plain_pkce_is_refused() -> None:
    client = Client()
    client_id = register(client)
    client.force_login(get_user_model().objects.create_user(username="bob"))
    verifier, _ = pkce()
    query = authorize_query(client_id, verifier, "plain")
    form = {key: value[0] for key, value in parse_qs(query).items()}
    decided = client.post("/o/authorize/", {**form, "allow": "Allow"})
    # No code is issued: the client is sent back with the error (RFC 9700 §2.1.1).
    assert decided.status_code == 302
    answer = parse_qs(urlsplit(decided["Location"]).query)
    assert answer["error"] == ["invalid_request"]
    assert "code" not in answer


def test_authorization_without_pkce_is_refused() -> None:
    client = Client()
    client_id = register(client)
    client.force_login(get_user_model().objects.create_user(username="eve"))
    query = urlencode(
        {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "scope": "mcp"}
    )
    response = client.get(f"/o/authorize/?{query}")
    assert b'id="allow"' not in response.content
    if response.status_code == 302:
        assert "error=" in response["Location"]

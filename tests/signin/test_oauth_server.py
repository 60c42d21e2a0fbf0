"""The example project's authorization server (django-oauth-toolkit), configured as MCP
clients expect: RFC 8414 metadata, Client ID Metadata Documents and dynamic client
registration (RFC 7591), authorization code with PKCE S256 only, a sign-in and a consent
page, the issuer in every authorization response (RFC 9207), and tokens bound to the MCP
resource (RFC 8707) that the DOT verifier accepts; any other resource is refused with
``invalid_target``. Django's test client, real database; client metadata documents come
from a loopback HTTPS server (``cimd_documents.py``)."""

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
from tests.signin.cimd_documents import FETCHER, DocumentServer, trust_env

pytestmark = pytest.mark.django_db

REDIRECT = "http://127.0.0.1:33418/callback"
RESOURCE = "http://testserver/mcp"
ISSUER = "http://testserver"
ELSEWHERE = "https://elsewhere.example/mcp"


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


def authorize_query(
    client_id: str, challenge: str, method: str = "S256", resource: str = RESOURCE
) -> str:
    return urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "scope": "mcp",
            "state": "st4te",
            "code_challenge": challenge,
            "code_challenge_method": method,
            "resource": resource,
        }
    )


def answer(response: Any) -> dict[str, list[str]]:
    """The parameters of an authorization response redirected to the client."""
    assert response.status_code == 302, response.content
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    return parse_qs(location.query)


def signed_in_client(username: str) -> tuple[Client, str]:
    """A browser signed in as a new user, and a client registered for it."""
    client = Client()
    client_id = register(client)
    client.force_login(get_user_model().objects.create_user(username=username))
    return client, client_id


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
    assert document["client_id_metadata_document_supported"] is True
    assert document["authorization_response_iss_parameter_supported"] is True


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
    decided = answer(client.post("/o/authorize/", {**form, "allow": "Allow"}))
    assert decided["iss"] == [ISSUER]  # RFC 9207
    code = decided["code"][0]
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


def test_refused_consent_still_names_the_issuer() -> None:
    client, client_id = signed_in_client("dora")
    _, challenge = pkce()
    form = {key: value[0] for key, value in parse_qs(authorize_query(client_id, challenge)).items()}
    decided = answer(client.post("/o/authorize/", form))  # the user did not allow
    assert decided["error"] == ["access_denied"]
    assert decided["iss"] == [ISSUER]  # RFC 9207 §2: error responses too


def test_authorization_for_another_resource_is_invalid_target() -> None:
    client, client_id = signed_in_client("mallory")
    _, challenge = pkce()
    response = client.get(
        f"/o/authorize/?{authorize_query(client_id, challenge, resource=ELSEWHERE)}"
    )
    decided = answer(response)  # no consent page: the client is told at once (RFC 8707 §2)
    assert decided["error"] == ["invalid_target"]
    assert ELSEWHERE in decided["error_description"][0]
    assert decided["state"] == ["st4te"]
    assert decided["iss"] == [ISSUER]


def test_another_resource_for_an_unknown_client_redirects_nowhere() -> None:
    client, _ = signed_in_client("trent")
    _, challenge = pkce()
    response = client.get(
        f"/o/authorize/?{authorize_query('nobody', challenge, resource=ELSEWHERE)}"
    )
    assert response.status_code == 400
    assert "Location" not in response


def test_resource_changed_in_the_consent_form_is_invalid_target() -> None:
    client, client_id = signed_in_client("oscar")
    _, challenge = pkce()
    form = {key: value[0] for key, value in parse_qs(authorize_query(client_id, challenge)).items()}
    decided = answer(
        client.post("/o/authorize/", {**form, "resource": ELSEWHERE, "allow": "Allow"})
    )
    assert decided["error"] == ["invalid_target"]
    assert "code" not in decided


def test_token_for_another_resource_is_invalid_target() -> None:
    client, client_id = signed_in_client("peggy")
    verifier, challenge = pkce()
    form = {key: value[0] for key, value in parse_qs(authorize_query(client_id, challenge)).items()}
    code = answer(client.post("/o/authorize/", {**form, "allow": "Allow"}))["code"][0]
    token = Client().post(
        "/o/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": ELSEWHERE,
        },
    )
    assert token.status_code == 400
    assert token.json()["error"] == "invalid_target"


@pytest.fixture(scope="module")
def documents() -> Iterator[DocumentServer]:
    """The document server, its authority trusted while the module's tests run."""
    server = DocumentServer()
    with pytest.MonkeyPatch.context() as env:
        for name, value in trust_env().items():
            env.setenv(name, value)
        yield server
    server.close()


def test_consent_page_names_a_metadata_document_client_and_its_host(
    documents: DocumentServer,
) -> None:
    client_id = documents.publish("/consent.json", "Desk Assistant", REDIRECT)
    client = Client()
    client.force_login(get_user_model().objects.create_user(username="ada"))
    _, challenge = pkce()
    with override_settings(
        OAUTH2_PROVIDER={**project_settings.OAUTH2_PROVIDER, "CIMD_METADATA_FETCHER": FETCHER}
    ):
        consent = client.get(f"/o/authorize/?{authorize_query(client_id, challenge)}")
    assert consent.status_code == 200, consent.content
    page = consent.content.decode()
    assert '<span id="client-name">Desk Assistant</span>' in page
    assert "vouched for by <strong>127.0.0.1</strong>" in page
    assert documents.fetches["/consent.json"] == 1


def test_host_allowlist_keeps_other_metadata_documents_out(documents: DocumentServer) -> None:
    client_id = documents.publish("/not-listed.json", "Stranger", REDIRECT)
    client = Client()
    client.force_login(get_user_model().objects.create_user(username="walter"))
    _, challenge = pkce()
    allowlist = {
        **project_settings.OAUTH2_PROVIDER,
        "CIMD_METADATA_FETCHER": FETCHER,
        "CIMD_REGISTRATION_PERMISSION_CLASSES": (
            "oauth2_provider.cimd.HostAllowlistCIMDPermission",
        ),
        "CIMD_ALLOWED_HOSTS": ["clients.example.com"],
    }
    with override_settings(OAUTH2_PROVIDER=allowlist):
        response = client.get(f"/o/authorize/?{authorize_query(client_id, challenge)}")
    assert b'id="allow"' not in response.content
    assert response.status_code == 400  # an unknown client: no redirect to its URI
    assert "/not-listed.json" not in documents.fetches  # refused before any fetch

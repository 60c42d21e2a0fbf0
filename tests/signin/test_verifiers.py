"""The ready token verifiers: django-oauth-toolkit access tokens (real rows in the test
database) and JWTs of an external issuer (real RSA keys, the JWKS served over real HTTP)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken as DotToken, Application

from mcp_tasks.auth import AccessToken, InvalidTokenError, principal_for
from mcp_tasks.auth.verifiers import dot, jwks
from mcp_tasks.core.db import db
from tests.signin.asgi_calls import call, modern, request, scoped_tool

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_thread_closed"),
]

ISSUER = "https://issuer.example.com"
RESOURCE = "https://mcp.example.com/mcp"


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    dot.cache.clear()
    jwks.cache.clear()
    jwks._jwks_client.cache_clear()
    yield
    dot.cache.clear()
    jwks.cache.clear()


# -- django-oauth-toolkit ---------------------------------------------------------------------


def _dot_token(
    value: str, *, expires_in: int = 3600, resource: list[str] | None = None, active: bool = True
) -> Any:
    user = get_user_model().objects.create_user(username=f"u-{value}", is_active=active)
    app = Application.objects.create(
        name="client",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
        user=user,
    )
    return DotToken.objects.create(
        user=user,
        application=app,
        token=value,
        expires=timezone.now() + timedelta(seconds=expires_in),
        scope="tools:call reports:read",
        resource=resource or [],
    )


async def test_dot_token_user_becomes_the_principal() -> None:
    row = await db(_dot_token)("tok-valid", resource=[RESOURCE])
    found = await dot.verify("tok-valid")
    assert found is not None
    assert found.scopes == ["tools:call", "reports:read"]
    assert found.audience == (RESOURCE,)
    assert found.client_id == row.application.client_id
    assert principal_for(found).scope == f"user:{row.user_id}"


async def test_expired_dot_token_is_refused() -> None:
    await db(_dot_token)("tok-expired", expires_in=-10, resource=[RESOURCE])
    assert await dot.verify("tok-expired") is None


async def test_unknown_dot_token_is_refused() -> None:
    assert await dot.verify("never-issued") is None


async def test_dot_token_issued_for_no_resource_is_refused_saying_so() -> None:
    await db(_dot_token)("tok-anywhere")  # no RFC 8707 resource: e.g. the site's REST API's
    with pytest.raises(InvalidTokenError, match="issued for no resource"):
        await dot.verify("tok-anywhere")


async def test_dot_token_of_an_inactive_user_is_refused() -> None:
    await db(_dot_token)("tok-inactive", active=False, resource=[RESOURCE])
    assert await dot.verify("tok-inactive") is None


@override_settings(MCP_TASKS={"TOKEN_CACHE_TTL": 0})
async def test_revoked_dot_token_is_refused() -> None:
    row = await db(_dot_token)("tok-revoked", resource=[RESOURCE])
    assert await dot.verify("tok-revoked") is not None
    await db(row.revoke)()
    assert await dot.verify("tok-revoked") is None


async def test_dot_lookup_is_cached_within_the_ttl() -> None:
    row = await db(_dot_token)("tok-cached", resource=[RESOURCE])
    assert await dot.verify("tok-cached") is not None
    await db(row.revoke)()
    assert await dot.verify("tok-cached") is not None  # remembered for TOKEN_CACHE_TTL


# -- JWT of an external issuer ----------------------------------------------------------------


class _Jwks(http.server.BaseHTTPRequestHandler):
    body = b"{}"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return {
        "issuer": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "stranger": rsa.generate_private_key(public_exponent=65537, key_size=2048),
    }


@pytest.fixture
def jwks_url(keys: dict[str, Any]) -> Iterator[str]:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys["issuer"].public_key()))
    _Jwks.body = json.dumps(
        {"keys": [{**public, "kid": "k1", "alg": "RS256", "use": "sig"}]}
    ).encode()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Jwks)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    settings = {
        "JWT_ISSUER": ISSUER,
        "JWT_JWKS_URL": url,
        "TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.jwks.verify",
    }
    with override_settings(MCP_TASKS=settings):
        yield url
    server.shutdown()
    server.server_close()


def _jwt(key: Any, **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "alice",
        "client_id": "desktop-app",
        "scope": "tools:call reports:read",
        "iat": now,
        "exp": now + 600,
        **claims,
    }
    body = {name: value for name, value in body.items() if value is not None}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": "k1"})


async def test_valid_jwt_is_accepted(keys: dict[str, Any], jwks_url: str) -> None:
    found = await jwks.verify(_jwt(keys["issuer"]))
    assert found is not None
    assert found.scopes == ["tools:call", "reports:read"]
    assert found.client_id == "desktop-app"
    assert found.audience == (RESOURCE,)
    assert principal_for(found).scope == "client:desktop-app:alice"


async def test_expired_jwt_is_refused(keys: dict[str, Any], jwks_url: str) -> None:
    past = int(time.time()) - 3600
    assert await jwks.verify(_jwt(keys["issuer"], iat=past - 600, exp=past)) is None


async def test_jwt_of_another_issuer_is_refused(keys: dict[str, Any], jwks_url: str) -> None:
    assert await jwks.verify(_jwt(keys["issuer"], iss="https://evil.example.com")) is None


async def test_jwt_with_a_bad_signature_is_refused(keys: dict[str, Any], jwks_url: str) -> None:
    assert await jwks.verify(_jwt(keys["stranger"])) is None


async def test_jwt_without_an_audience_is_refused_saying_so(
    keys: dict[str, Any], jwks_url: str
) -> None:
    with pytest.raises(InvalidTokenError, match="no audience"):
        await jwks.verify(_jwt(keys["issuer"], aud=None))


async def test_jwt_of_a_stranger_without_an_audience_is_refused_unexplained(
    keys: dict[str, Any], jwks_url: str
) -> None:
    assert await jwks.verify(_jwt(keys["stranger"], aud=None)) is None  # signature first


async def test_jwt_with_an_empty_audience_list_is_refused_saying_so(
    keys: dict[str, Any], jwks_url: str
) -> None:
    with pytest.raises(InvalidTokenError, match="no audience"):
        await jwks.verify(_jwt(keys["issuer"], aud=[]))


@pytest.mark.parametrize("aud", [5, {"url": RESOURCE}, [RESOURCE, 5]], ids=["int", "dict", "mix"])
async def test_jwt_with_a_malformed_audience_is_refused(
    keys: dict[str, Any], jwks_url: str, aud: Any
) -> None:
    assert await jwks.verify(_jwt(keys["issuer"], aud=aud)) is None


async def test_jwt_audience_list_is_kept(keys: dict[str, Any], jwks_url: str) -> None:
    found = await jwks.verify(_jwt(keys["issuer"], aud=["https://other.example.com", RESOURCE]))
    assert found is not None and found.audience == ("https://other.example.com", RESOURCE)


async def test_jwt_scp_list_gives_the_scopes(keys: dict[str, Any], jwks_url: str) -> None:
    found = await jwks.verify(_jwt(keys["issuer"], scope=None, scp=["a", "b"]))
    assert found is not None and found.scopes == ["a", "b"]


async def test_jwt_scp_string_gives_the_scopes(keys: dict[str, Any], jwks_url: str) -> None:
    found = await jwks.verify(_jwt(keys["issuer"], scope=None, scp="reports:read tools:call"))
    assert found is not None and found.scopes == ["reports:read", "tools:call"]


@pytest.mark.parametrize("scp", [5, {"a": 1}, ["a", 5]], ids=["int", "dict", "mix"])
async def test_jwt_malformed_scp_gives_only_its_string_scopes(
    keys: dict[str, Any], jwks_url: str, scp: Any
) -> None:
    found = await jwks.verify(_jwt(keys["issuer"], scope=None, scp=scp))
    assert found is not None and found.scopes == (["a"] if isinstance(scp, list) else [])


# -- through the endpoint: audience (RFC 8707) and scopes ---------------------------------------

HOST = {"ALLOWED_HOSTS": ["mcp.example.com"]}


async def _call_with(token: str) -> dict[str, Any]:
    return await request(
        "POST",
        "/mcp",
        call("scoped_report"),
        **modern("scoped_report"),
        authorization=f"Bearer {token}",
        x_forwarded_proto="https",
    )


@pytest.fixture
def endpoint() -> Iterator[None]:
    with (
        scoped_tool(),
        override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"), **HOST),
    ):
        yield


@pytest.mark.usefixtures("endpoint")
async def test_jwt_for_another_resource_is_refused_by_the_endpoint(
    keys: dict[str, Any], jwks_url: str
) -> None:
    response = await _call_with(_jwt(keys["issuer"], aud="https://other.example.com/mcp"))
    assert response["status"] == 401
    assert "another resource" in response["header_map"]["www-authenticate"]


@pytest.mark.usefixtures("endpoint")
@pytest.mark.parametrize("aud", [[], 5, [5]], ids=["empty", "int", "int-list"])
async def test_jwt_with_no_usable_audience_is_refused_by_the_endpoint(
    keys: dict[str, Any], jwks_url: str, aud: Any
) -> None:
    response = await _call_with(_jwt(keys["issuer"], aud=aud))
    assert response["status"] == 401
    assert 'error="invalid_token"' in response["header_map"]["www-authenticate"]


@pytest.mark.usefixtures("endpoint")
async def test_jwt_missing_the_tool_scope_gets_403(keys: dict[str, Any], jwks_url: str) -> None:
    response = await _call_with(_jwt(keys["issuer"], scope="tools:call"))
    assert response["status"] == 403
    assert 'scope="reports:read"' in response["header_map"]["www-authenticate"]
    allowed = await _call_with(_jwt(keys["issuer"]))
    assert allowed["status"] == 200


@pytest.mark.usefixtures("endpoint")
async def test_jwt_scp_string_holding_the_tool_scope_is_allowed(
    keys: dict[str, Any], jwks_url: str
) -> None:
    response = await _call_with(_jwt(keys["issuer"], scope=None, scp="tools:call reports:read"))
    assert response["status"] == 200


DOT = {"TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.dot.verify"}


@pytest.mark.usefixtures("endpoint")
@override_settings(MCP_TASKS=DOT)
async def test_dot_token_for_another_resource_is_refused_by_the_endpoint() -> None:
    await db(_dot_token)("tok-other", resource=["https://other.example.com/mcp"])
    response = await _call_with("tok-other")
    assert response["status"] == 401
    await db(_dot_token)("tok-ours", resource=[RESOURCE])
    assert (await _call_with("tok-ours"))["status"] == 200


@pytest.mark.usefixtures("endpoint")
@override_settings(MCP_TASKS=DOT)
async def test_dot_token_missing_the_tool_scope_gets_403() -> None:
    row = await db(_dot_token)("tok-narrow", resource=[RESOURCE])
    row.scope = "tools:call"
    await db(row.save)()
    response = await _call_with("tok-narrow")
    assert response["status"] == 403
    assert 'error="insufficient_scope"' in response["header_map"]["www-authenticate"]


@pytest.mark.usefixtures("endpoint")
@override_settings(MCP_TASKS=DOT)
async def test_dot_token_for_no_resource_gets_401_that_says_so() -> None:
    await db(_dot_token)("tok-nowhere")
    response = await _call_with("tok-nowhere")
    assert response["status"] == 401
    challenge = response["header_map"]["www-authenticate"]
    assert 'error="invalid_token"' in challenge
    assert "issued for no resource" in challenge
    assert "invalid or expired" not in challenge


def test_expiry_is_read_against_the_time_given_even_zero() -> None:
    token = AccessToken(token="t", client_id="c", expires_at=100)
    assert not token.is_expired(now=0)  # at the epoch it had 100 s left
    assert token.is_expired(now=100)
    assert token.is_expired()  # now, long after
    assert not AccessToken(token="t", client_id="c").is_expired()

"""Who is calling: a bearer token checked by ``TOKEN_VERIFIER``, or the Django user."""

from __future__ import annotations

import inspect
import re
from typing import Any

from ..auth import ANONYMOUS, AccessToken, InvalidTokenError, Principal, principal_for
from ..conf import get_config, imported
from ..core.db import db
from .http import HttpError, first
from .resource_metadata import metadata_url, resource_url

#: What RFC 6750 §3 allows inside ``error_description`` (printable ASCII but ``"`` and ``\``).
_NOT_IN_DESCRIPTION = re.compile(r"[^\x20-\x21\x23-\x5b\x5d-\x7e]")


def challenge(
    scope: dict[str, Any],
    headers: dict[str, str | list[str]],
    error: str | None = None,
    description: str | None = None,
    scopes: list[str] | None = None,
) -> list[tuple[bytes, bytes]]:
    """A ``WWW-Authenticate: Bearer`` header (RFC 6750 §3, RFC 9728); ``error_description``
    goes with an ``error`` only (RFC 6750 §3.1)."""
    parts = []
    if error:
        parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{_NOT_IN_DESCRIPTION.sub("?", description)}"')
    if scopes:
        parts.append(f'scope="{" ".join(scopes)}"')
    metadata = metadata_url(scope, headers)
    if metadata:
        parts.append(f'resource_metadata="{metadata}"')
    value = "Bearer" + (" " + ", ".join(parts) if parts else "")
    return [(b"www-authenticate", value.encode("latin-1"))]


def unauthorized(
    scope: dict[str, Any],
    headers: dict[str, str | list[str]],
    error: str | None,
    description: str,
) -> HttpError:
    """HTTP 401; the challenge names the scopes a client asks for to use this server
    (``SIGN_IN_SCOPES``, as the MCP authorization spec asks of a 401)."""
    scopes = list(get_config().SIGN_IN_SCOPES)
    return HttpError(401, description, challenge(scope, headers, error, description, scopes))


def insufficient_scope(
    scope: dict[str, Any], headers: dict[str, str | list[str]], scopes: list[str]
) -> HttpError:
    """HTTP 403 asking the client for a token with more scopes (step-up authorization)."""
    description = "The access token lacks a required scope"
    return HttpError(
        403, description, challenge(scope, headers, "insufficient_scope", description, scopes)
    )


async def _verify(token: str) -> AccessToken | None:
    path = get_config().TOKEN_VERIFIER
    if not path:
        return None
    verifier = imported(path)
    if inspect.iscoroutinefunction(verifier):
        result = await verifier(token)
    else:
        result = await db(verifier)(token)
    if result is None or isinstance(result, AccessToken):
        return result
    raise TypeError(
        f"{path} must return an mcp_tasks.AccessToken or None, not {type(result).__name__}"
    )


async def authenticate(scope: dict[str, Any], headers: dict[str, str | list[str]]) -> Principal:
    """The request's principal, or ``HttpError(401)`` with a ``WWW-Authenticate`` challenge."""
    authorization = first(headers, "authorization")
    if authorization:
        kind, _, token = authorization.partition(" ")
        if kind.lower() != "bearer":
            # Another scheme (Basic…): no error code, as for no credentials (RFC 6750 §3.1).
            raise unauthorized(scope, headers, None, "Authorization must be 'Bearer <token>'")
        if not token.strip():
            raise unauthorized(
                scope, headers, "invalid_request", "Authorization must be 'Bearer <token>'"
            )
        try:
            access_token = await _verify(token.strip())
        except InvalidTokenError as refused:
            raise unauthorized(scope, headers, "invalid_token", refused.description) from None
        if access_token is None or access_token.is_expired():
            raise unauthorized(
                scope, headers, "invalid_token", "The access token is invalid or expired"
            )
        if access_token.audience:
            # RFC 8707: a token issued for another resource server is not ours to accept (a
            # trailing slash does not count).
            ours = resource_url(scope, headers).rstrip("/")
            if not any(item.rstrip("/") == ours for item in access_token.audience):
                description = "The access token was issued for another resource"
                raise unauthorized(scope, headers, "invalid_token", description)
        return principal_for(access_token)
    user = scope.get("user")  # resolved by Channels' AuthMiddleware
    if getattr(user, "is_authenticated", False):
        return principal_for(None, user)
    if not get_config().ALLOW_ANONYMOUS:
        raise unauthorized(scope, headers, None, "Authentication required")
    return ANONYMOUS

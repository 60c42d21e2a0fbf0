"""Who is calling: a bearer token checked by ``TOKEN_VERIFIER``, or the Django user."""

from __future__ import annotations

import inspect
from typing import Any

from django.utils.module_loading import import_string

from ..auth import ANONYMOUS, AccessToken, Principal, principal_for
from ..conf import get_config
from ..db import db
from .http import HttpError, first


def _challenge(
    error: str | None = None, description: str | None = None
) -> list[tuple[bytes, bytes]]:
    parts = []
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    metadata = get_config()["RESOURCE_METADATA_URL"]
    if metadata:
        parts.append(f'resource_metadata="{metadata}"')
    value = "Bearer" + (" " + ", ".join(parts) if parts else "")
    return [(b"www-authenticate", value.encode("latin-1"))]


def unauthorized(error: str | None, description: str) -> HttpError:
    return HttpError(401, description, _challenge(error, description))


async def _verify(token: str) -> AccessToken | None:
    path = get_config()["TOKEN_VERIFIER"]
    if not path:
        return None
    verifier = import_string(path)
    if inspect.iscoroutinefunction(verifier):
        result = await verifier(token)
    else:
        result = await db(verifier)(token)
    if result is None or isinstance(result, AccessToken):
        return result
    raise TypeError(
        f"{path} must return an mcp_tasks.AccessToken or None, not {type(result).__name__}"
    )


def _scope_user_sync(scope: dict[str, Any]) -> Any:
    user = scope.get("user")
    if user is None:
        return None
    # Channels' AuthMiddleware stores a lazy object; resolve it in a thread.
    return user if getattr(user, "is_authenticated", False) else None


async def authenticate(scope: dict[str, Any], headers: dict[str, str | list[str]]) -> Principal:
    """The request's principal, or ``HttpError(401)`` with a ``WWW-Authenticate`` challenge."""
    authorization = first(headers, "authorization")
    if authorization:
        kind, _, token = authorization.partition(" ")
        if kind.lower() != "bearer" or not token.strip():
            raise unauthorized("invalid_request", "Authorization must be 'Bearer <token>'")
        access_token = await _verify(token.strip())
        if access_token is None or access_token.is_expired():
            raise unauthorized("invalid_token", "The access token is invalid or expired")
        return principal_for(access_token)
    user = await db(_scope_user_sync)(scope)
    if user is not None:
        return principal_for(None, user)
    if not get_config()["ALLOW_ANONYMOUS"]:
        raise unauthorized(None, "Authentication required")
    return ANONYMOUS

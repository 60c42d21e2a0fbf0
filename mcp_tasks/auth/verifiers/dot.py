"""``TOKEN_VERIFIER`` for this project's django-oauth-toolkit access tokens
(``mcp_tasks.auth.verifiers.dot.verify``): the token's user is the principal; expired,
revoked or inactive users' tokens are refused, and so, with a reason, is one issued for no
RFC 8707 ``resource`` (the site's other APIs' tokens are not for this server). Verified
tokens are kept ``TOKEN_CACHE_TTL`` s, so a revocation takes at most that long."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from ...core.db import db
from .. import AccessToken, InvalidTokenError
from . import TokenCache

logger = logging.getLogger("mcp_tasks.verifiers")  # a stable name: older than the auth folder
cache = TokenCache()
NO_RESOURCE = (
    "The access token was issued for no resource; sign in again naming this server "
    "as the resource (RFC 8707)"
)


def _lookup(token: str) -> AccessToken | None:
    from oauth2_provider.models import get_access_token_model

    checksum = hashlib.sha256(token.encode()).hexdigest()
    row: Any = (
        get_access_token_model()
        .objects.select_related("application", "user")
        .filter(token_checksum=checksum)
        .first()
    )
    if row is None or row.is_expired():
        return None
    if not row.resource:
        logger.info("refused a DOT access token issued for no resource (RFC 8707)")
        raise InvalidTokenError(NO_RESOURCE)
    user = row.user
    if user is not None and not user.is_active:
        return None
    application = row.application
    return AccessToken(
        token=token,
        client_id=application.client_id if application is not None else "",
        scopes=row.scope.split() if row.scope else [],
        expires_at=int(row.expires.timestamp()),
        claims={"sub": str(user.pk)} if user is not None else {},
        user=user,
        audience=tuple(row.resource or ()),
    )


async def verify(token: str) -> AccessToken | None:
    """Verify a DOT access token (async: the lookup runs on the ORM thread)."""
    return await cache.verify(token, db(_lookup))

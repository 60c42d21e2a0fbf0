"""``TOKEN_VERIFIER`` for an external issuer's JWT access tokens
(``mcp_tasks.auth.verifiers.jwks.verify``; ``JWT_ISSUER``, ``JWT_JWKS_URL``,
``JWT_ALGORITHMS``): checks the signature, ``iss``, ``exp`` and that ``aud`` is present
(the transport matches it to ``RESOURCE``). Scopes from ``scope`` or ``scp``, the client
from ``client_id`` or ``azp``; no Django user."""

from __future__ import annotations

import asyncio
import logging
from functools import lru_cache
from typing import Any

import jwt

from ...conf import get_config
from .. import AccessToken, InvalidTokenError
from . import TokenCache

logger = logging.getLogger("mcp_tasks.verifiers")  # a stable name: older than the auth folder

cache = TokenCache()
NO_AUDIENCE = "The access token names no audience (aud); ask the issuer for one for this server"


@lru_cache(maxsize=8)
def _jwks_client(url: str) -> jwt.PyJWKClient:
    return jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=10)


def _decode(token: str) -> AccessToken | None:
    config = get_config()
    try:
        key = _jwks_client(config.JWT_JWKS_URL).get_signing_key_from_jwt(token)
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=list(config.JWT_ALGORITHMS),
            issuer=config.JWT_ISSUER,
            options={"require": ["exp", "iss", "aud"], "verify_aud": False},
            leeway=30,
        )
    except jwt.PyJWKClientConnectionError:
        logger.exception("could not fetch the issuer's keys from %s", config.JWT_JWKS_URL)
        return None
    except jwt.MissingRequiredClaimError as exc:
        logger.info("refused a JWT access token: %s", exc)
        if exc.claim == "aud":
            raise InvalidTokenError(NO_AUDIENCE) from None
        return None
    except jwt.PyJWTError as exc:
        logger.info("refused a JWT access token: %s", exc)
        return None
    audience = claims["aud"]
    audience = [audience] if isinstance(audience, str) else audience
    if not isinstance(audience, list) or not all(isinstance(item, str) for item in audience):
        logger.info("refused a JWT access token: aud is neither a string nor a list of them")
        return None
    if not audience:
        logger.info("refused a JWT access token: its aud is an empty list")
        raise InvalidTokenError(NO_AUDIENCE)
    return AccessToken(
        token=token,
        client_id=str(claims.get("client_id") or claims.get("azp") or ""),
        scopes=_scopes(claims),
        expires_at=int(claims["exp"]),
        claims=claims,
        audience=tuple(audience),
    )


def _scopes(claims: dict[str, Any]) -> list[str]:
    """The token's scopes: ``scope`` (space-separated), else ``scp``, space-separated as
    some issuers write it, or a list; what is neither holds none."""
    scopes = claims.get("scope")
    if not isinstance(scopes, str):
        scopes = claims.get("scp")
    if isinstance(scopes, str):
        return scopes.split()
    if isinstance(scopes, list):
        return [scope for scope in scopes if isinstance(scope, str)]
    return []


async def verify(token: str) -> AccessToken | None:
    """Verify a JWT access token (fetching keys runs in a thread, not on the event loop)."""
    return await cache.verify(token, lambda token: asyncio.to_thread(_decode, token))

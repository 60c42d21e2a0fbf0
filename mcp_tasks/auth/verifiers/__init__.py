"""Ready ``TOKEN_VERIFIER``\\ s: ``mcp_tasks.auth.verifiers.dot.verify`` (django-oauth-toolkit
access tokens) and ``mcp_tasks.auth.verifiers.jwks.verify`` (JWT access tokens of an external
issuer). Both need the ``oauth`` extra: ``pip install 'django-mcp-tasks[oauth]'``."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable

from ...conf import get_config
from .. import AccessToken


class TokenCache:
    """Verified tokens for ``TOKEN_CACHE_TTL`` seconds, keyed by the token's SHA-256 (the
    token itself is not kept as a key). Refusals are not cached."""

    LIMIT = 10_000

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, AccessToken]] = {}

    async def verify(
        self, token: str, verifier: Callable[[str], Awaitable[AccessToken | None]]
    ) -> AccessToken | None:
        """The cached token while fresh and unexpired, else what ``verifier`` says."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit = self._entries.get(key)
        if hit is not None and hit[0] > time.monotonic() and not hit[1].is_expired():
            return hit[1]
        found = await verifier(token)
        if found is None:
            return None
        ttl = float(get_config().TOKEN_CACHE_TTL)
        if ttl > 0:
            if len(self._entries) >= self.LIMIT:
                self._entries.clear()
            self._entries[key] = (time.monotonic() + ttl, found)
        return found

    def clear(self) -> None:
        self._entries.clear()

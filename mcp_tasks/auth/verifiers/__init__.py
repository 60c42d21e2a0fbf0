"""Ready ``TOKEN_VERIFIER``\\ s: ``mcp_tasks.auth.verifiers.dot.verify`` (django-oauth-toolkit
access tokens) and ``mcp_tasks.auth.verifiers.jwks.verify`` (JWT access tokens of an external
issuer). Both need the ``oauth`` extra: ``pip install 'django-mcp-tasks[oauth]'``."""

from __future__ import annotations

import hashlib
import time

from ...conf import get_config
from .. import AccessToken


class TokenCache:
    """Verified tokens for ``TOKEN_CACHE_TTL`` seconds, keyed by the token's SHA-256 (the
    token itself is not kept as a key). Refusals are not cached."""

    LIMIT = 10_000

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, AccessToken]] = {}

    @staticmethod
    def key(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def get(self, token: str) -> AccessToken | None:
        hit = self._entries.get(self.key(token))
        if hit is None or hit[0] <= time.monotonic():
            return None
        return hit[1]

    def put(self, token: str, access_token: AccessToken) -> None:
        ttl = float(get_config().TOKEN_CACHE_TTL)
        if ttl <= 0:
            return
        if len(self._entries) >= self.LIMIT:
            self._entries.clear()
        self._entries[self.key(token)] = (time.monotonic() + ttl, access_token)

    def clear(self) -> None:
        self._entries.clear()

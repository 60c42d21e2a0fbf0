"""A bearer-token verifier for the live tests (``MCP_TASKS["TOKEN_VERIFIER"]``).

- ``valid-<name>``   → a token of client ``client-<name>`` for subject ``<name>``;
- ``expired-<name>`` → the same, already expired;
- ``user-<username>`` → a token standing for the Django user ``<username>`` (created on use);
- anything else      → rejected.
"""

from __future__ import annotations

import time

from mcp_tasks import AccessToken


def verify(token: str) -> AccessToken | None:
    kind, _, name = token.partition("-")
    if not name:
        return None
    if kind == "valid":
        return AccessToken(
            token=token,
            client_id=f"client-{name}",
            scopes=["tools:read", "tools:call"],
            expires_at=int(time.time()) + 3600,
            claims={"sub": name, "tenant": "tests"},
        )
    if kind == "expired":
        return AccessToken(
            token=token,
            client_id=f"client-{name}",
            expires_at=int(time.time()) - 60,
            claims={"sub": name},
        )
    if kind == "user":
        from django.contrib.auth import get_user_model

        user, _ = get_user_model().objects.get_or_create(username=name)
        return AccessToken(token=token, client_id="user-client", claims={"sub": name}, user=user)
    return None

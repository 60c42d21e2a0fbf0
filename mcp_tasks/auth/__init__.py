"""Who is calling: verified access tokens and the principal that scopes tasks."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


class InvalidTokenError(Exception):
    """Raised by a ``TOKEN_VERIFIER`` to refuse a token with a reason the client should
    read: the 401 challenge carries ``error="invalid_token"`` and this message as its
    ``error_description`` (RFC 6750 §3). Returning None refuses with a generic message."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


@dataclass(frozen=True)
class AccessToken:
    """A bearer token accepted by the configured ``TOKEN_VERIFIER``.

    ``expires_at`` is a Unix timestamp (seconds) or None for no expiry. ``user`` may carry
    the Django user the token stands for. ``audience``: the resources (RFC 8707) the token
    was issued for; when not empty, a token whose audience does not name this server's
    ``RESOURCE`` is refused. Empty: not bound to a resource."""

    token: str
    client_id: str
    scopes: list[str] = field(default_factory=list)
    expires_at: int | None = None
    claims: dict[str, Any] = field(default_factory=dict)
    user: Any = None
    audience: tuple[str, ...] = ()

    def is_expired(self, now: float | None = None) -> bool:
        """True when ``expires_at`` has passed."""
        return self.expires_at is not None and self.expires_at <= (
            time.time() if now is None else now
        )

    @property
    def subject(self) -> str | None:
        sub = self.claims.get("sub")
        return str(sub) if sub is not None else None

    def to_record(self) -> dict[str, Any]:
        """What a task's sealed snapshot keeps of the token (not its user or audience)."""
        return {
            "token": self.token,
            "client_id": self.client_id,
            "scopes": list(self.scopes),
            "expires_at": self.expires_at,
            "claims": self.claims,
        }

    @classmethod
    def from_record(cls, record: Any) -> AccessToken | None:
        """The token :meth:`to_record` kept (None when there was none)."""
        if not isinstance(record, dict):
            return None
        return cls(
            token=record.get("token", ""),
            client_id=record.get("client_id", ""),
            scopes=list(record.get("scopes") or []),
            expires_at=record.get("expires_at"),
            claims=dict(record.get("claims") or {}),
        )


@dataclass(frozen=True)
class Principal:
    """The identity a request runs as; ``scope`` is what tasks and request states bind to."""

    scope: str
    access_token: AccessToken | None = None
    user: Any = None


ANONYMOUS = Principal(scope="anonymous")


def principal_for(access_token: AccessToken | None, user: Any = None) -> Principal:
    """Derive the principal (and its stable scope string) from a token and/or Django user."""
    if access_token is not None:
        token_user = access_token.user or user
        if token_user is not None and getattr(token_user, "is_authenticated", False):
            scope = f"user:{token_user.pk}"
        else:
            scope = f"client:{access_token.client_id}:{access_token.subject or ''}"
        return Principal(scope=scope, access_token=access_token, user=token_user)
    if user is not None and getattr(user, "is_authenticated", False):
        return Principal(scope=f"user:{user.pk}", user=user)
    return ANONYMOUS

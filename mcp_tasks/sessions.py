"""Legacy sessions stored in the database, shared by every ASGI process."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from .auth import Principal
from .conf import get_config
from .core.db import db
from .models import LegacySession

#: Don't write ``last_seen_at`` more often than this.
_TOUCH_EVERY = timedelta(seconds=60)


class StoredSession:
    """A legacy session as the protocol layer sees it (implements ``SessionHandle``)."""

    def __init__(self, row: LegacySession) -> None:
        self.id = row.id
        self.principal_scope = row.principal_scope
        self.protocol_version = row.protocol_version
        self.client_capabilities: dict[str, Any] = dict(row.client_capabilities or {})
        self.client_info: dict[str, Any] = dict(row.client_info or {})
        self.log_level: str | None = row.log_level or None
        self.subscriptions: list[str] = list(row.subscriptions or [])
        #: Called after a change, so that processes that keep sessions forget this one.
        self.on_change: Callable[[], Awaitable[None]] | None = None

    async def set_log_level(self, level: str) -> None:
        self.log_level = level
        await LegacySession.objects.filter(pk=self.id).aupdate(log_level=level)
        await self._changed()

    async def subscribe(self, uri: str) -> None:
        await db(self._change_subscriptions)(add=uri)
        await self._changed()

    async def unsubscribe(self, uri: str) -> None:
        await db(self._change_subscriptions)(remove=uri)
        await self._changed()

    async def _changed(self) -> None:
        if self.on_change is not None:
            await self.on_change()

    def _change_subscriptions(self, add: str | None = None, remove: str | None = None) -> None:
        with transaction.atomic():
            row = LegacySession.objects.select_for_update().get(pk=self.id)
            uris = [uri for uri in row.subscriptions if uri != remove]
            if add and add not in uris:
                uris.append(add)
            row.subscriptions = uris
            row.save(update_fields=["subscriptions"])
            self.subscriptions = uris


async def create_session(
    principal: Principal, protocol_version: str, client_info: Any, client_capabilities: Any
) -> StoredSession:
    """Start a session for ``principal`` after a successful ``initialize``."""
    row = await LegacySession.objects.acreate(
        id=secrets.token_hex(32),
        principal_scope=principal.scope,
        protocol_version=protocol_version,
        client_info=client_info if isinstance(client_info, dict) else {},
        client_capabilities=client_capabilities if isinstance(client_capabilities, dict) else {},
    )
    return StoredSession(row)


def _idle_cutoff() -> Any:
    return timezone.now() - timedelta(seconds=get_config().SESSION_IDLE_TIMEOUT)


async def load_session(session_id: str, principal: Principal) -> StoredSession | None:
    """The live session with this id owned by ``principal``, or None."""
    if not session_id or len(session_id) > 64 or "\x00" in session_id:
        return None  # names no session (and PostgreSQL cannot compare a NUL)
    row = await LegacySession.objects.filter(
        pk=session_id, principal_scope=principal.scope, last_seen_at__gte=_idle_cutoff()
    ).afirst()
    if row is None:
        return None
    now = timezone.now()
    if now - row.last_seen_at > _TOUCH_EVERY:
        await LegacySession.objects.filter(pk=row.pk).aupdate(last_seen_at=now)
    return StoredSession(row)


async def session_by_id(session_id: str | None) -> StoredSession | None:
    """The session as it is stored now, whoever owns it (a task restores its creator's)."""
    row = await LegacySession.objects.filter(pk=session_id).afirst() if session_id else None
    return StoredSession(row) if row is not None else None


async def subscriptions_of(session_id: str) -> list[str]:
    """The resource URIs the session subscribes to now (any process may have changed them)."""
    uris = (
        await LegacySession.objects.filter(pk=session_id)
        .values_list("subscriptions", flat=True)
        .afirst()
    )
    return list(uris or [])


async def log_level_of(session_id: str | None) -> str | None:
    """The session's log level now: ``""`` when none was set, None when it has ended."""
    if session_id is None:
        return None
    return (
        await LegacySession.objects.filter(pk=session_id)
        .values_list("log_level", flat=True)
        .afirst()
    )


async def end_session(session_id: str, principal: Principal) -> bool:
    """Forget a session (HTTP ``DELETE``); False when there was none."""
    deleted, _ = await LegacySession.objects.filter(
        pk=session_id, principal_scope=principal.scope
    ).adelete()
    return bool(deleted)


def purge_idle_sessions() -> int:
    """Delete sessions idle for longer than ``SESSION_IDLE_TIMEOUT``; returns the count."""
    deleted, _ = LegacySession.objects.filter(last_seen_at__lt=_idle_cutoff()).delete()
    return deleted

"""Legacy sessions read once per process, then kept for ``SESSION_CACHE_TTL`` s. Their only
changes (log level, end) drop them from every cache through the process bus before they
are answered (:mod:`.process_bus`); the TTL bounds a lost change."""

from __future__ import annotations

import functools
import time

from ..auth import Principal
from ..conf import get_config
from ..sessions import StoredSession, end_session, load_session
from .process_bus import process_bus

#: Sessions kept per process at most; past it, the expired ones go, or all.
MAX_CACHED = 10_000


async def cached_session(session_id: str, principal: Principal) -> StoredSession | None:
    """The live session ``session_id`` owned by ``principal``, or None."""
    bus = process_bus()
    ttl = get_config().SESSION_CACHE_TTL
    if bus is None or not ttl:
        return await load_session(session_id, principal)
    await bus.start()  # first, so that no change after this read goes unheard
    now = time.monotonic()
    hit = bus.sessions.get(session_id)
    if hit is not None and now - hit[0] < ttl and (hit[2] or await bus.caught_up()):
        # a listed copy is dropped before any change is answered; an unlisted one is valid
        # once this process caught up on what other processes changed before this request
        hit = bus.sessions.get(session_id)
        if hit is not None:
            kept = hit[1]
            return kept if kept.principal_scope == principal.scope else None
    changes = bus.changes
    listed = await bus.list_as_cacher(session_id)  # before the read (process_bus: "Order")
    session = await load_session(session_id, principal)
    if session is None or bus.changes != changes:  # a change during the read: don't keep it
        return session
    if len(bus.sessions) >= MAX_CACHED:
        fresh = {key: kept for key, kept in bus.sessions.items() if now - kept[0] < ttl}
        bus.sessions = fresh if len(fresh) < MAX_CACHED else {}
    session.on_change = functools.partial(bus.session_changed, session.id)
    bus.sessions[session_id] = (now, session, listed)
    return session


async def end_cached_session(session_id: str, principal: Principal) -> bool:
    """Forget a session (HTTP ``DELETE``) in the database and in every process."""
    ended = await end_session(session_id, principal)
    bus = process_bus()
    if ended and bus is not None:
        await bus.session_changed(session_id)
    return ended

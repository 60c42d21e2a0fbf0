"""``db(fn)``: run a synchronous ORM function from async code in Django's thread, with the
connection hygiene of Channels' ``database_sync_to_async`` (each call is a "request" to
Django's connection handling). ``CONN_HEALTH_CHECKS`` pings only a connection idle for
:data:`IDLE_CHECK_AFTER` s, and one its server closed is replaced before the call
(:func:`quiet`), so a database restart costs no call its answer."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import select
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections, connections

logger = logging.getLogger("mcp_tasks.tasks")

P = ParamSpec("P")
R = TypeVar("R")

#: What SQLite needs when several threads or processes share the file: wait for locks, take
#: the write lock up front, let readers run beside a writer (check mcp_tasks.W009).
SQLITE_OPTIONS: dict[str, Any] = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
#: Seconds a kept connection may sit unused before it is checked again.
IDLE_CHECK_AFTER = 30.0

_caller = threading.local()


def calling_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop awaiting the ``db()`` call running on this thread (None elsewhere):
    code deep in a call (an ``on_commit`` hook) can hand async work back to it."""
    return getattr(_caller, "loop", None)


def _check_idle_connections_only() -> None:
    """Mark recently used connections as health-checked: Django pings only those idle for
    :data:`IDLE_CHECK_AFTER` s."""
    now = time.monotonic()
    last = getattr(_caller, "used_at", None)
    _caller.used_at = now
    if last is None or now - last >= IDLE_CHECK_AFTER:
        return
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            connection.health_check_done = True  # type: ignore[attr-defined]


def _drop_closed_connections() -> None:
    """Close the kept connections their server closed since their last use, so the call
    connects afresh instead of failing (no round trip)."""
    for connection in connections.all(initialized_only=True):
        raw = connection.connection
        if raw is not None and not connection.in_atomic_block and not quiet(raw):
            with contextlib.suppress(Exception):
                connection.close()


def quiet(raw: Any) -> bool:
    """Whether an idle psycopg 3 connection's socket has nothing to read (a server that went
    away closed it, most often with a last message); True for other drivers."""
    pgconn = getattr(raw, "pgconn", None)
    if pgconn is None:
        return True
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except Exception:  # closed, or no socket: let the ping decide
        return False
    return not readable


def _run(loop: asyncio.AbstractEventLoop, fn: Callable[..., R], args: Any, kwargs: Any) -> R:
    _caller.loop = loop
    _drop_closed_connections()
    close_old_connections()
    _check_idle_connections_only()
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()
        _caller.loop = None


#: One ``sync_to_async`` for every ``db()`` call: building one cost more than a query.
_in_thread = sync_to_async(_run, thread_sensitive=True)


def db(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """The async version of ``fn``, run with database connection hygiene."""

    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        result: R = await _in_thread(asyncio.get_running_loop(), fn, args, kwargs)
        return result

    return call


@functools.cache
def unreachable_errors() -> tuple[type[BaseException], ...]:
    """What an unreachable database raises: Django's ``OperationalError`` and
    ``InterfaceError``, and psycopg's own (:mod:`mcp_tasks.tasks.state.loop_database`)."""
    try:
        import psycopg
    except ImportError:
        return (OperationalError, InterfaceError)
    return (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)


async def persistently(call: Callable[[], Awaitable[R]], within: float, what: str) -> R:
    """``await call()``, again while the database is unreachable (backing off from 0.1 s to
    2 s, on new connections) for up to ``within`` s; then its error. Only for writes safe
    to send twice (a commit whose answer was lost). ``what`` names it in the log."""
    deadline = time.monotonic() + within
    pause = 0.1
    while True:
        try:
            return await call()
        except unreachable_errors() as exc:
            if time.monotonic() + pause > deadline:
                raise
            if pause == 0.1:
                logger.warning(
                    "database unreachable (%s: %s) for %s; trying again for up to %g s",
                    type(exc).__name__,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else "",
                    what,
                    within,
                )
        await asyncio.sleep(pause)
        pause = min(2.0, pause * 2)


def in_memory_sqlite(alias: str = "default") -> bool:
    """Whether the database ``alias`` is SQLite in memory, whose table locks fail at once
    ("database table is locked"): no other thread may write beside it."""
    connection = connections[alias]
    return connection.vendor == "sqlite" and in_memory_name(connection.settings_dict.get("NAME"))


def in_memory_name(name: Any) -> bool:
    """Whether a SQLite ``NAME`` is in memory: unnamed, ``:memory:`` or a ``mode=memory``
    URI (Django's test databases)."""
    return not name or str(name) == ":memory:" or "mode=memory" in str(name)

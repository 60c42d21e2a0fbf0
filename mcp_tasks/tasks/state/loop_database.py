"""The hot path's statements (:mod:`mcp_tasks.tasks.state.rows`) sent from the event loop
with psycopg's ``AsyncConnection`` (PostgreSQL only), cheaper than the hop to Django's thread
(:func:`mcp_tasks.core.db.db`). One autocommit connection per loop, from Django's parameters
(adapters, ``assume_role``, its session time zone); a broken one is replaced and the
statement resent (updates are conditional; a committed INSERT is found by id,
:func:`~.rows.ainsert_task`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import weakref
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..queues.coalesce import Coalesced, Outcome, awaited

logger = logging.getLogger("mcp_tasks.tasks")


#: Each event loop's connection (None: the database is not PostgreSQL through psycopg 3).
_of_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopDatabase | None] = (
    weakref.WeakKeyDictionary()
)
_every: weakref.WeakSet[LoopDatabase] = weakref.WeakSet()


class LoopDatabase:
    """One ``AsyncConnection`` to the database ``alias``, for one event loop."""

    def __init__(self, alias: str = "default") -> None:
        self.alias = alias
        #: Django's wrapper: SQL dialect, value preparation, converters (never connects).
        self.wrapper: BaseDatabaseWrapper = connections[alias]
        self._connection: Any = None
        self._connecting = asyncio.Lock()
        self._batches: dict[str, Coalesced[Sequence[Any], tuple[int, Any]]] = {}
        _every.add(self)

    @classmethod
    def of_running_loop(cls) -> LoopDatabase | None:
        """The running loop's connection (made on first use); None if not :meth:`available`."""
        loop = asyncio.get_running_loop()
        try:
            return _of_loop[loop]
        except KeyError:
            database = _of_loop[loop] = cls() if cls.available() else None
            return database

    @classmethod
    def available(cls, alias: str = "default") -> bool:
        """Whether ``alias`` is PostgreSQL through psycopg 3 (else: Django's thread)."""
        wrapper = connections[alias]
        if wrapper.vendor != "postgresql":
            return False
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return False
        from django.db.backends.postgresql.psycopg_any import is_psycopg3

        return bool(is_psycopg3)

    async def fetch_one(self, sql: str, params: Sequence[Any]) -> tuple[int, Any]:
        """Run one statement: its row count and first row (or None). Calls made during a round
        trip share the next, in one transaction; a failed batch is resent one by one."""
        batch = self._batches.get(sql)
        if batch is None:
            batch = self._batches[sql] = Coalesced(functools.partial(self._each, sql), awaited)
        result: tuple[int, Any] = await batch(params)
        return result

    async def _each(self, sql: str, batch: list[Sequence[Any]]) -> list[Outcome]:
        if len(batch) > 1:
            try:
                return [(True, result) for result in await self._retried(self._many, sql, batch)]
            except Exception:
                logger.debug("task rows: a batch of %d failed; one by one", len(batch))
        outcomes: list[Outcome] = []
        for params in batch:
            try:
                outcomes.append((True, await self._retried(self._one, sql, params)))
            except Exception as exc:
                outcomes.append((False, exc))
        return outcomes

    async def _retried(self, send: Any, sql: str, params: Any) -> Any:
        """``send(connection, sql, params)``, resent once on a new connection if it broke."""
        import psycopg

        for attempt in range(2):
            connection, fresh = await self._connect()
            try:
                return await send(connection, sql, params)
            except psycopg.OperationalError:
                await self.close()
                if fresh or attempt:
                    raise
                logger.info("task rows: the database connection broke; reconnecting")
        raise AssertionError("unreachable")

    @staticmethod
    async def _one(connection: Any, sql: str, params: Sequence[Any]) -> tuple[int, Any]:
        async with connection.cursor() as cursor:
            await cursor.execute(sql, params)
            row = await cursor.fetchone() if _returns_rows(cursor) else None
            return cursor.rowcount, row

    @staticmethod
    async def _many(connection: Any, sql: str, batch: list[Sequence[Any]]) -> list[tuple[int, Any]]:
        results = []
        async with connection.cursor() as cursor:
            await cursor.executemany(sql, batch, returning=True)
            while True:
                row = await cursor.fetchone() if _returns_rows(cursor) else None
                results.append((cursor.rowcount, row))
                if not cursor.nextset():
                    break
        if len(results) != len(batch):
            raise AssertionError(f"{len(results)} results for {len(batch)} statements")
        return results

    async def _connect(self) -> tuple[Any, bool]:
        """The connection, and whether it was made just now."""
        if self._connection is not None and not self._connection.closed:
            return self._connection, False
        async with self._connecting:
            if self._connection is not None and not self._connection.closed:
                return self._connection, False
            import psycopg

            params = dict(self.wrapper.get_connection_params())
            params.pop("cursor_factory", None)  # Django's are synchronous
            connection = await psycopg.AsyncConnection.connect(**params, autocommit=True)
            role = self.wrapper.settings_dict["OPTIONS"].get("assume_role")
            if role:
                await connection.execute(
                    psycopg.sql.SQL("SET ROLE {}").format(psycopg.sql.Identifier(role))
                )
            # As Django's ensure_timezone: its loaders label each time with Django's zone,
            # so the session must speak that zone (the server's default may be another).
            zone = self.wrapper.timezone_name
            if zone and connection.info.parameter_status("TimeZone") != zone:
                await connection.execute(self.wrapper.ops.set_time_zone_sql(), [zone])
            if (
                self.wrapper.timezone is UTC
                and connection.info.parameter_status("TimeZone") == "UTC"
            ):
                # Django's loader (Python) relabels psycopg's times with UTC; psycopg's default
                # (C when built) already gives exactly those in a UTC session.
                timestamptz = psycopg.postgres.types["timestamptz"].oid
                default = psycopg.adapters.get_loader(timestamptz, psycopg.pq.Format.TEXT)
                if default is not None:
                    connection.adapters.register_loader("timestamptz", default)
            self._connection = connection
            return connection, True

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                await connection.close()
            except Exception:
                logger.debug("task rows: closing the connection failed", exc_info=True)

    def close_now(self) -> None:
        """Close the connection from any thread, even with its loop gone (tests)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.pgconn.finish()


def _returns_rows(cursor: Any) -> bool:
    """The statement returns rows (``cursor.description`` would build its columns to say so)."""
    result = cursor.pgresult
    return result is not None and result.nfields > 0


def close_all_now() -> None:
    """:meth:`LoopDatabase.close_now` of every connection of this process."""
    for database in list(_every):
        database.close_now()
    _of_loop.clear()

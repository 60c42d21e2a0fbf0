"""Fixtures of the in-process tests: task tools run on the embedded worker (a thread of
this process, on the fake Redis), started before and stopped after each test.

The suite's database is an in-memory SQLite database by default, and SQLite shares one
in memory between connections with table locks that fail at once ("database table is
locked") instead of waiting: a tool's write in the worker thread beside a request's read
fails. So the connections read uncommitted (no read locks), and the tests write from the
client only while the worker writes nothing (its tool waits for an answer, or has ended).
On PostgreSQL (``DATABASE_URL``) none of this matters.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.test import override_settings
from django.utils.module_loading import import_string

from mcp_tasks.core.db import db
from mcp_tasks.tasks import embedded, embedded_worker
from mcp_tasks.testing import McpClient

#: The in-process task tests' settings: the embedded worker; a long hold, so that an answer
#: reaches the job that asked (which writes nothing while it waits) and no resume job runs
#: beside the test; quick polls; no heartbeat writes during a test.
EMBEDDED = {
    "EMBEDDED_WORKER": True,
    "INPUT_HOLD_WINDOW": 10.0,
    "TASK_POLL_INTERVAL": 0.1,
    "TASK_HEARTBEAT_INTERVAL": 60.0,
    "TASK_LOST_AFTER": 120.0,
}
IN_PROCESS_LAYER = {"default": {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}


def _in_memory_sqlite(connection: BaseDatabaseWrapper) -> bool:
    return connection.vendor == "sqlite" and connection.is_in_memory_db()  # type: ignore[attr-defined]


def _read_uncommitted(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    _pragma(connection, 1)


def _pragma(connection: BaseDatabaseWrapper, value: int) -> None:
    if _in_memory_sqlite(connection):
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA read_uncommitted = {value}")


def read_uncommitted(value: int) -> None:
    """Set it on the connections that exist: this thread's, and the ORM thread's (Django
    never closes a connection to an in-memory database)."""
    _pragma_here(value)
    asyncio.run(_on_the_orm_thread(functools.partial(_pragma_here, value)))


async def _on_the_orm_thread(fn: Callable[[], None]) -> None:
    """``fn`` in Django's thread for sync code, which ``mcp_tasks.core.db.db`` calls run in."""
    await db(fn)()


def _pragma_here(value: int) -> None:
    _pragma(connections["default"], value)


def start_embedded_worker(timeout: float = 30.0) -> None:
    """Start the worker thread and wait until its start-up housekeeping is done."""
    (thread,) = embedded_worker.start_worker(["mcp_tasks"])
    worker = thread._args[0]  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while worker.get_state() != "idle":
        assert time.monotonic() < deadline, "the embedded worker did not start"
        time.sleep(0.01)


def stop_embedded_workers(timeout: float = 30.0) -> None:
    """Stop the embedded worker threads (the next test starts them afresh)."""
    threads = list(embedded_worker._threads)
    embedded_worker.stop_workers(timeout)
    assert not any(thread.is_alive() for thread in threads), "an embedded worker did not stop"


@pytest.fixture(scope="module")
def in_process_layer() -> Iterator[None]:
    """One channel layer per module that the worker thread may share (check W008)."""
    with override_settings(CHANNEL_LAYERS=IN_PROCESS_LAYER):
        yield


@pytest.fixture
def embedded_tasks(settings: Any, transactional_db: None, in_process_layer: None) -> Iterator[None]:
    """Task tools run in this process, as a project's tests would run them."""
    settings.MCP_TASKS = EMBEDDED
    # The application freezes what is alive when it is built (gc.freeze): before the worker,
    # or the connection of the worker's thread would outlive it.
    import_string(settings.ASGI_APPLICATION)
    connection_created.connect(_read_uncommitted)
    read_uncommitted(1)
    embedded.connection().flushall()
    start_embedded_worker()
    yield
    stop_embedded_workers()
    embedded.connection().flushall()
    connection_created.disconnect(_read_uncommitted)
    read_uncommitted(0)
    close_worker_connections()


def close_worker_connections() -> None:
    """Close what the stopped worker's threads left open (PostgreSQL): the test database
    is dropped at the end."""
    gc.collect()  # the connections of its dead threads
    asyncio.run(_on_the_orm_thread(connections.close_all))


@pytest.fixture
def client() -> Iterator[McpClient]:
    with McpClient.in_process() as mcp_client:
        yield mcp_client

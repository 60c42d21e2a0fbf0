"""The embedded task worker around a test (:func:`task_worker`), and test databases a
worker thread can share with the test's requests (:func:`move_test_databases_to_files`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.module_loading import import_string

from ..checks.workers import module_available
from ..conf import get_config
from ..core.db import SQLITE_OPTIONS, db
from ..tasks.queues import embedded
from ..tasks.state.loop_database import close_all_now
from ..tasks.worker import embedded_worker


@contextlib.contextmanager
def task_worker(timeout: float = 30.0) -> Iterator[None]:
    """Run the embedded task worker threads of this process for the block (a test): started
    once their start-up housekeeping is done, stopped at the end once their running tasks
    ended, with the database connections they opened closed (so the test database can be
    dropped) and the in-process fake Redis emptied before and after.

    Needs ``MCP_TASKS["EMBEDDED_WORKER"]``, the ``embedded`` extra, rows the other threads
    can see (``TransactionTestCase``, ``django_db(transaction=True)``) and a database the
    threads may share: not SQLite in memory (``ImproperlyConfigured`` says what to do)."""
    if not get_config().EMBEDDED_WORKER:
        raise ImproperlyConfigured(
            "task_worker() runs the embedded worker: set MCP_TASKS['EMBEDDED_WORKER'] = True "
            "for the test (the mcp_tasks_worker fixture does)"
        )
    missing = [name for name in ("fakeredis", "lupa") if not module_available(name)]
    if missing:
        raise ImproperlyConfigured(
            f'task_worker() needs {" and ".join(missing)}: pip install "django-mcp-tasks[embedded]"'
        )
    if getattr(settings, "ASGI_APPLICATION", None):
        # Built first: building it freezes what is alive then (gc.freeze), which must not
        # take in the worker's threads and their connections.
        import_string(settings.ASGI_APPLICATION)
    embedded.connection().flushall()
    embedded_worker.start_worker(embedded_worker.task_queues(), get_config().EMBEDDED_WORKERS)
    try:
        _wait_until_idle(timeout)
        yield
    finally:
        embedded_worker.stop_workers(timeout)
        embedded.connection().flushall()
        close_worker_connections()


def _wait_until_idle(timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(worker.get_state() != "idle" for worker in embedded_worker.workers()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the embedded task worker did not start within {timeout:g} s")
        time.sleep(0.005)


def close_worker_connections() -> None:
    """Close the database connections a stopped worker leaves: its tool threads' (gone with
    them), the ORM thread's its calls went to, its event loop's own (PostgreSQL)."""
    gc.collect()

    async def close_on_the_orm_thread() -> None:
        await db(connections.close_all)()

    # From a new thread (the caller may be async): outside an async_to_sync run, db() calls
    # go to Django's thread for sync code.
    with ThreadPoolExecutor(1, thread_name_prefix="mcp_tasks-close-connections") as pool:
        pool.submit(asyncio.run, close_on_the_orm_thread()).result()
    close_all_now()


def move_test_databases_to_files(directory: Path) -> list[str]:
    """Before the test databases exist, give each SQLite one that would be in memory a file
    in ``directory`` and the ``OPTIONS`` threads need (the project's win); the aliases."""
    moved = []
    for alias in connections:
        settings_dict = connections[alias].settings_dict
        test = settings_dict.setdefault("TEST", {})
        if connections[alias].vendor != "sqlite" or test.get("MIRROR"):
            continue
        name = test.get("NAME")
        if name and str(name) != ":memory:" and "mode=memory" not in str(name):
            continue
        test["NAME"] = str(directory / f"test_{alias}.sqlite3")
        settings_dict["OPTIONS"] = {**SQLITE_OPTIONS, **(settings_dict.get("OPTIONS") or {})}
        moved.append(alias)
    return moved

"""Embedded mode's task workers: ASGI-process threads on the fake Redis (:mod:`.embedded`)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from channels.layers import get_channel_layer
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router
from rq import Queue

from ...authoring.registry import mcp
from ...conf import get_config
from ...core.db import in_memory_sqlite
from ...models import Task
from ..queues import embedded
from .task_worker import EmbeddedTaskWorker

logger = logging.getLogger("mcp_tasks.tasks")

_lock = threading.Lock()
_workers: list[EmbeddedTaskWorker] = []


def start_worker(queues: list[str], count: int = 1) -> list[threading.Thread]:
    """Start ``count`` worker threads once per process; refuses an in-memory SQLite database."""
    with _lock:
        if embedded.workers_running():
            return embedded.threads
        refuse_in_memory_database()
        # Made once before the threads: channels caches the layer without a lock, and two
        # in-process layers would not hear each other (answers only at the heartbeat).
        get_channel_layer(get_config().CHANNEL_LAYER)
        for number in range(count):
            conn = embedded.connection()
            worker = EmbeddedTaskWorker(
                [Queue(name, connection=conn) for name in queues], connection=conn
            )
            thread = threading.Thread(
                target=_run, args=(worker,), name=f"mcp_tasks-embedded-worker-{number}", daemon=True
            )
            thread.start()
            embedded.threads.append(thread)
            _workers.append(worker)
        logger.info("%d embedded task workers started for queues %s", count, ", ".join(queues))
        return embedded.threads


def workers() -> list[EmbeddedTaskWorker]:
    """The workers of the threads started (until :func:`stop_workers`)."""
    with _lock:
        return list(_workers)


def autostart() -> None:
    """Start the workers for every task queue, unless :func:`.embedded.no_autostart`."""
    if embedded.autostarts():
        start_worker(task_queues(), get_config().EMBEDDED_WORKERS)


def task_queues() -> list[str]:
    """The queues task jobs go to: ``TASK_QUEUE`` and the tools' own."""
    queues = {get_config().TASK_QUEUE}
    queues.update(tool.task.queue for tool in mcp.tools.values() if tool.task.queue)
    return sorted(queues)


def refuse_in_memory_database() -> None:
    """``ImproperlyConfigured`` when tasks' rows live in an in-memory SQLite database."""
    alias = router.db_for_write(Task)
    if in_memory_sqlite(alias):
        raise ImproperlyConfigured(
            f"The embedded task worker cannot use the in-memory SQLite database {alias!r} "
            "(Django's test database for SQLite, unless TEST['NAME'] names a file): SQLite "
            "locks its tables between the worker's connection and the requests' and fails at "
            "once ('database table is locked'), so tasks would fail at random. In tests, use "
            "the `mcp_tasks_worker` fixture of the mcp_tasks pytest plugin (it moves the test "
            f"database to a temporary file), or set DATABASES[{alias!r}]['TEST'] = "
            "{'NAME': BASE_DIR / 'test.sqlite3'}; elsewhere, give DATABASES a file's NAME."
        )


def _run(worker: Any) -> None:
    try:
        worker.work(with_scheduler=False, logging_level="WARNING")
    except Exception:
        logger.exception("an embedded task worker stopped")
    finally:
        connections.close_all()  # this thread's (the worker's housekeeping)


def stop_workers(timeout: float = 30.0) -> None:
    """Stop the worker threads once their jobs end; the next request restarts them."""
    with _lock:
        workers, threads = list(_workers), list(embedded.threads)
        _workers.clear()
        embedded.threads.clear()
    for worker in workers:
        worker.request_stop()
    for thread in threads:
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("embedded task worker %s did not stop within %g s", thread.name, timeout)

"""Embedded development mode: an in-process fake Redis and a task worker thread, so that
``manage.py runserver`` runs background tasks with no services installed.

Single process only; production uses Redis and ``manage.py rqworker``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

logger = logging.getLogger("mcp_tasks.tasks")

_lock = threading.RLock()
_server: Any = None
_threads: list[threading.Thread] = []


def connection() -> Any:
    """A client of the process-wide fake Redis server."""
    global _server
    import fakeredis

    with _lock:
        if _server is None:
            _server = fakeredis.FakeServer()
    return fakeredis.FakeStrictRedis(server=_server)


def start_worker(queues: list[str], count: int = 1) -> list[threading.Thread]:
    """Start ``count`` worker threads once per process (idempotent); each runs up to
    ``TASK_CONCURRENCY`` tasks at once."""
    with _lock:
        if any(thread.is_alive() for thread in _threads):
            return _threads
        from rq import Queue

        from .worker import EmbeddedTaskWorker

        for number in range(count):
            conn = connection()
            worker = EmbeddedTaskWorker(
                [Queue(name, connection=conn) for name in queues], connection=conn
            )
            thread = threading.Thread(
                target=_run, args=(worker,), name=f"mcp_tasks-embedded-worker-{number}", daemon=True
            )
            thread.start()
            _threads.append(thread)
        logger.info("%d embedded task workers started for queues %s", count, ", ".join(queues))
        return _threads


def _run(worker: Any) -> None:
    try:
        worker.work(with_scheduler=False, logging_level="WARNING")
    except Exception:
        logger.exception("an embedded task worker stopped")

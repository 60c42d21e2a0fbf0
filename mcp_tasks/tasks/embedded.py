"""Embedded development mode: an in-process fake Redis and a worker thread, so that
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
_thread: threading.Thread | None = None


def connection() -> Any:
    """A client of the process-wide fake Redis server."""
    global _server
    import fakeredis

    with _lock:
        if _server is None:
            _server = fakeredis.FakeServer()
    return fakeredis.FakeStrictRedis(server=_server)


def start_worker(queues: list[str]) -> threading.Thread:
    """Start the worker thread once per process (idempotent)."""
    global _thread
    with _lock:
        if _thread is not None and _thread.is_alive():
            return _thread
        from rq import Queue

        from .worker import ThreadWorker

        conn = connection()
        worker = ThreadWorker([Queue(name, connection=conn) for name in queues], connection=conn)

        def run() -> None:
            try:
                worker.work(with_scheduler=False, logging_level="WARNING")
            except Exception:
                logger.exception("the embedded task worker stopped")

        _thread = threading.Thread(target=run, name="mcp_tasks-embedded-worker", daemon=True)
        _thread.start()
        logger.info("embedded task worker started for queues %s", ", ".join(queues))
        return _thread

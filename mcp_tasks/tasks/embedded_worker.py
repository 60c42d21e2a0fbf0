"""Embedded development mode's task workers: threads of the ASGI process that work the
queues on the in-process fake Redis (:mod:`.embedded`)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from channels.layers import get_channel_layer
from rq import Queue

from ..conf import get_config
from .embedded import connection
from .worker import EmbeddedTaskWorker

logger = logging.getLogger("mcp_tasks.tasks")

_lock = threading.Lock()
_threads: list[threading.Thread] = []
_workers: list[EmbeddedTaskWorker] = []


def start_worker(queues: list[str], count: int = 1) -> list[threading.Thread]:
    """Start ``count`` worker threads once per process (idempotent); each runs up to
    ``TASK_CONCURRENCY`` tasks at once."""
    with _lock:
        if any(thread.is_alive() for thread in _threads):
            return _threads
        # The layer is made here, once, before any worker thread asks for it: channels'
        # layer manager caches it without a lock, so two threads asking at once could each
        # make one, and a worker listening on one in-process layer would never hear what
        # is sent on the other (an answer then reached its task only at the heartbeat).
        get_channel_layer(get_config()["CHANNEL_LAYER"])
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
            _workers.append(worker)
        logger.info("%d embedded task workers started for queues %s", count, ", ".join(queues))
        return _threads


def _run(worker: Any) -> None:
    try:
        worker.work(with_scheduler=False, logging_level="WARNING")
    except Exception:
        logger.exception("an embedded task worker stopped")


def stop_workers(timeout: float = 30.0) -> None:
    """Stop the embedded worker threads (a project's tests, or its own shutdown): each stops
    taking jobs within a second, lets its running jobs finish, and ends. The next request
    starts them again."""
    with _lock:
        workers, threads = list(_workers), list(_threads)
        _workers.clear()
        _threads.clear()
    for worker in workers:
        worker.request_stop()
    for thread in threads:
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("embedded task worker %s did not stop within %g s", thread.name, timeout)

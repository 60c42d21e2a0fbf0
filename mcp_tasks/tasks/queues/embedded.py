"""Embedded development mode's in-process parts: one fake Redis server (fakeredis) for the
queues, the workers and the wake-ups, so that ``manage.py runserver`` runs background tasks
with no services installed; and the register of the worker threads running in this process
(:mod:`.embedded_worker` starts them).

Single process only; production uses Redis and ``manage.py rqworker``. Imports nothing of
Django's models: a test client may ask whether a worker runs before Django is set up.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.RLock()
_server: Any = None
#: The worker threads started in this process (:mod:`.embedded_worker`).
threads: list[threading.Thread] = []
#: The process in which requests do not start the workers (:func:`no_autostart`).
_no_autostart_in: int | None = None


def connection() -> Any:
    """A client of the process-wide fake Redis server."""
    global _server
    import fakeredis

    with _lock:
        if _server is None:
            _server = fakeredis.FakeServer()
    return fakeredis.FakeStrictRedis(server=_server)


def workers_running() -> bool:
    """Whether an embedded worker thread runs in this process."""
    return any(thread.is_alive() for thread in threads)


def no_autostart() -> None:
    """Requests of this process no longer start the workers: a test does, around the
    tests that run tasks (the pytest plugin's ``mcp_tasks_worker`` fixture). A process
    forked from this one (a live server) still starts them."""
    global _no_autostart_in
    _no_autostart_in = os.getpid()


def autostarts() -> bool:
    """Whether a request of this process starts the workers (see :func:`no_autostart`)."""
    return _no_autostart_in != os.getpid()

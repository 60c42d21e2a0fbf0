"""Embedded development mode: one in-process fakeredis server, so ``runserver`` runs tasks
with no services, and the worker threads of this process (:mod:`.embedded_worker`).

Single process only. Imports no Django models: a test client may ask before Django is set up."""

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
    """This process's requests stop starting workers (a forked live server's still do)."""
    global _no_autostart_in
    _no_autostart_in = os.getpid()


def autostarts() -> bool:
    """Whether a request of this process starts the workers (see :func:`no_autostart`)."""
    return _no_autostart_in != os.getpid()

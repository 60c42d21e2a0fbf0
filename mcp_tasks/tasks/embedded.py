"""Embedded development mode's Redis: one in-process fake Redis server (fakeredis) for the
queues, the workers (:mod:`.embedded_worker`) and the wake-ups, so that ``manage.py
runserver`` runs background tasks with no services installed.

Single process only; production uses Redis and ``manage.py rqworker``.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.RLock()
_server: Any = None


def connection() -> Any:
    """A client of the process-wide fake Redis server."""
    global _server
    import fakeredis

    with _lock:
        if _server is None:
            _server = fakeredis.FakeServer()
    return fakeredis.FakeStrictRedis(server=_server)

"""Whether a live admin page is open anywhere: admin events are published only then (a
publish to nobody still costs a Redis round trip per task change). An open page's consumer
keeps a mark in the task queue's Redis, renewed every :data:`RENEW_EVERY` s and expiring
:data:`MARK_LASTS` s later; processes read it at most every :data:`CHECK_EVERY` s, and
publish when Redis cannot say."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..conf import get_config
from ..tasks.queues.queue import get_queue

logger = logging.getLogger("mcp_tasks.admin")

#: Seconds a page's mark lasts after it was last renewed.
MARK_LASTS = 30
#: Seconds between a page's renewals of its mark.
RENEW_EVERY = 10.0
#: Seconds a process trusts what it last read of the mark.
CHECK_EVERY = 1.0

_lock = threading.Lock()
_read: dict[str, tuple[float, bool]] = {}  # key → (when it was read, whether a page is open)


def _key() -> str:
    return f"mcp_tasks:admin-live-open:{get_config().TASK_QUEUE}"


def _connection() -> Any:
    return get_queue(get_config().TASK_QUEUE).connection


def mark_open() -> None:
    """A live admin page is open: call when it connects and every :data:`RENEW_EVERY`
    seconds while it stays (blocking: call it off the event loop)."""
    key = _key()
    _connection().set(key, "1", ex=MARK_LASTS)
    with _lock:
        _read[key] = (time.monotonic(), True)


def pages_open() -> bool:
    """True when a live admin page may be open somewhere (blocking at most once per
    :data:`CHECK_EVERY` seconds: call it off the event loop)."""
    key = _key()
    with _lock:
        read_at, is_open = _read.get(key, (-CHECK_EVERY, False))
    if time.monotonic() - read_at < CHECK_EVERY:
        return is_open
    try:
        is_open = bool(_connection().exists(key))
    except Exception:
        logger.warning("could not read the live admin's mark: publishing", exc_info=True)
        is_open = True
    with _lock:
        _read[key] = (time.monotonic(), is_open)
    return is_open


def may_be_open() -> bool:
    """:func:`pages_open` without reading Redis: False only when the last read, still
    trusted, found no page open."""
    with _lock:
        read_at, is_open = _read.get(_key(), (-CHECK_EVERY, False))
    return is_open or time.monotonic() - read_at >= CHECK_EVERY


def forget(**kwargs: Any) -> None:
    """Forget what was read (tests; ``setting_changed``)."""
    with _lock:
        _read.clear()

"""Channel-layer group names used to reach streams in any ASGI process."""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Every stream that forwards server-wide notifications (list changed, resource updated).
BROADCAST = "mcp_tasks.broadcast"
#: The live admin pages (new tasks, status changes, questions asked and answered).
ADMIN = "mcp_tasks.admin"


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:40]


def session_group(session_id: str) -> str:
    """A legacy session's GET streams."""
    return f"mcp_tasks.session.{_digest(session_id)}"


def reply_group(key: str) -> str:
    """The call waiting for the client's reply to server request ``key``."""
    return f"mcp_tasks.reply.{_digest(key)}"


def call_group(session_id: str, request_id: Any) -> str:
    """A legacy request in flight, for ``notifications/cancelled``."""
    return f"mcp_tasks.call.{_digest(session_id, request_id)}"


#: Task changes go to one of this many shard groups: a watcher joins a task's shard (a
#: process once for all its waits) and drops the other tasks' changes.
TASK_SHARDS = 64


def task_shard_group(task_id: str) -> str:
    """Everyone watching a task of ``task_id``'s shard (one of :data:`TASK_SHARDS`):
    waiting requests, ``subscriptions/listen`` streams, live admin pages."""
    shard = int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:4], "big") % TASK_SHARDS
    return f"mcp_tasks.tasks.{shard}"


def worker_group(worker_name: str) -> str:
    """The task runtime of one worker process (wake-ups for the tasks it runs)."""
    return f"mcp_tasks.worker.{_digest(worker_name)}"


def stream_group(stream_id: str) -> str:
    """A resumed legacy stream (``GET`` with ``Last-Event-ID``)."""
    return f"mcp_tasks.stream.{_digest(stream_id)}"

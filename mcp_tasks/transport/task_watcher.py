"""Task changes for a process's waiting requests, on one channel per process (pub/sub subscriptions
cost Redis trips) that joins a task's shard group (:func:`~mcp_tasks.core.groups.task_shard_group`)
and stays, so later waits cost no layer call; unwatched tasks' changes are dropped."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..core import groups
from .layer_listener import LayerListener

logger = logging.getLogger("mcp_tasks.transport")


class TaskWait:
    """One request's wait on one task: :meth:`changed` is set by each change after
    :meth:`TaskWatcher.watch` returned it."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.changed = asyncio.Event()
        #: The task's fields as the change left it, when the one change since the last
        #: wait carried them (an ended task's, an asking task's).
        self.fields: dict[str, Any] | None = None


class TaskWatcher(LayerListener):
    """The waits of one process and event loop (see the module docstring)."""

    label = "task watcher"

    def __init__(self, layer: Any) -> None:
        super().__init__(layer)
        self.channel: str | None = None
        self.waits: dict[str, set[TaskWait]] = {}
        self.shards: set[str] = set()  # shard groups the channel joined
        self._lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None

    async def watch(self, task_id: str) -> TaskWait | None:
        """Start hearing ``task_id``'s changes; call :meth:`unwatch` when done. None when the
        channel layer cannot be reached (Redis restarting): the caller polls instead."""
        shard = groups.task_shard_group(task_id)
        if shard not in self.shards:
            async with self._lock:
                if self.channel is None:
                    self.channel = await self.layer.new_channel()
                    self._reader = asyncio.ensure_future(self._read(self.channel))
                if shard not in self.shards:
                    try:
                        await self.layer.group_add(shard, self.channel)
                    except Exception:
                        logger.warning("task watcher: could not watch %s", task_id, exc_info=True)
                        return None
                    self.shards.add(shard)
        wait = TaskWait(task_id)
        self.waits.setdefault(task_id, set()).add(wait)
        return wait

    def unwatch(self, wait: TaskWait) -> None:
        waiting = self.waits.get(wait.task_id)
        if waiting is None:
            return
        waiting.discard(wait)
        if not waiting:
            del self.waits[wait.task_id]

    def heard(self, message: dict[str, Any]) -> None:
        if message.get("type") == "mcp.task":
            fields = message.get("fields")
            carried = fields if isinstance(fields, dict) else None
            for wait in self.waits.get(str(message.get("task_id")), ()):
                # Two changes before the request looked: what the first changed (progress)
                # is not in the second's fields, so it reads the task back.
                wait.fields = None if wait.changed.is_set() else carried
                wait.changed.set()

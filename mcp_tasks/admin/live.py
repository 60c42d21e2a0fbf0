"""The live admin's WebSocket (``ADMIN_LIVE_PATH``), for staff who may see tasks (others
are refused: HTTP 403). It forwards events, never rows: ``{"event", "task_id"}`` of the
:data:`~mcp_tasks.core.groups.ADMIN` group, and ``task_changed`` for the tasks the page
watches (``{"watch": [ids]}``); the page then fetches itself through the admin's views.
While open it keeps the page marked (:mod:`.watchers`) and, once every process saw the
mark, sends ``{"event": "ready"}`` so the page fetches what changed before."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from ..conf import get_config
from ..core.db import db
from ..core.groups import ADMIN, task_shard_group
from . import watchers
from .model_admins import sees_tasks

logger = logging.getLogger("mcp_tasks.admin")

#: A refused connection's close code: closed before it is accepted, the handshake gets
#: HTTP 403 and only Channels' test communicator sees the code.
REFUSED = 4403
#: The most tasks one page may watch.
MAX_WATCHED = 200


def may_watch(user: Any) -> bool:
    """An active staff user who may see tasks or their questions."""
    authenticated = getattr(user, "is_authenticated", False)
    return bool(authenticated and user.is_active and user.is_staff and sees_tasks(user))


class AdminLiveConsumer(AsyncJsonWebsocketConsumer):
    """Tells an admin page that what it shows changed."""

    @property
    def channel_layer_alias(self) -> str:
        return get_config().CHANNEL_LAYER

    async def connect(self) -> None:
        self.watched: set[str] = set()
        self.marking: asyncio.Task[None] | None = None
        if self.channel_layer is None or not await db(may_watch)(self.scope.get("user")):
            await self.close(code=REFUSED)
            return
        await self.channel_layer.group_add(ADMIN, self.channel_name)
        await _mark_open()  # before the page hears it is connected: this process knows
        await self.accept()
        self.marking = asyncio.ensure_future(self._keep_marked())

    async def _keep_marked(self) -> None:
        """Keep the page marked open until it closes; ``ready`` once every process saw it."""
        await asyncio.sleep(watchers.CHECK_EVERY)
        await self.send_json({"event": "ready"})
        while True:
            await asyncio.sleep(watchers.RENEW_EVERY)
            await _mark_open()

    async def disconnect(self, code: int) -> None:
        marking = getattr(self, "marking", None)
        if marking is not None:
            marking.cancel()
        if self.channel_layer is None:
            return
        await self.channel_layer.group_discard(ADMIN, self.channel_name)
        for shard in _shards(getattr(self, "watched", set())):
            await self.channel_layer.group_discard(shard, self.channel_name)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """A frame that is not JSON text is ignored, as JSON that says nothing is: raised,
        its error would end the consumer without ``disconnect``, the page marked open."""
        if not text_data:
            return
        try:
            content = await self.decode_json(text_data)
        except (ValueError, RecursionError):
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """``{"watch": [task ids]}``: the tasks the page shows (replaces the last list)."""
        ids = content.get("watch") if isinstance(content, dict) else None
        if not isinstance(ids, list):
            return
        wanted = {i for i in ids[:MAX_WATCHED] if isinstance(i, str) and 0 < len(i) <= 64}
        joined, needed = _shards(self.watched), _shards(wanted)
        for shard in joined - needed:
            await self.channel_layer.group_discard(shard, self.channel_name)
        for shard in needed - joined:
            await self.channel_layer.group_add(shard, self.channel_name)
        self.watched = wanted
        await self.send_json({"event": "watching", "count": len(wanted)})

    async def mcp_admin(self, message: dict[str, Any]) -> None:
        await self.send_json({"event": message["event"], "task_id": message["task_id"]})

    async def mcp_task(self, message: dict[str, Any]) -> None:
        if message["task_id"] not in self.watched:
            return  # another task of a shard this page joined
        await self.send_json(
            {"event": "task_changed", "task_id": message["task_id"], "status": message["status"]}
        )


def _shards(task_ids: set[str]) -> set[str]:
    """The shard groups the changes of ``task_ids`` go to."""
    return {task_shard_group(task_id) for task_id in task_ids}


async def _mark_open() -> None:
    try:
        await sync_to_async(watchers.mark_open, thread_sensitive=False)()
    except Exception:  # Redis restarting: processes publish while they cannot tell
        logger.warning("could not mark the live admin page open", exc_info=True)

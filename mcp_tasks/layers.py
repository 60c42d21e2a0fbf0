"""Channel-layer helpers.

- :class:`InProcessChannelLayer`: an in-memory channel layer that several threads of one
  process may share. Channels' ``InMemoryChannelLayer`` keeps asyncio queues bound to one
  event loop, so a sender on another thread's loop (the embedded task worker) corrupts it;
  this layer runs every operation on one private loop in a background thread.
- :func:`keep_reading`: keeps channels_redis' pub/sub layer reading at once.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from channels.layers import InMemoryChannelLayer

T = TypeVar("T")


class InProcessChannelLayer(InMemoryChannelLayer):
    """``InMemoryChannelLayer`` that is safe across threads and event loops (one process)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=self._loop.run_forever, name="mcp_tasks-channel-layer", daemon=True
        )
        thread.start()

    async def _home(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self._home(super().send(channel, message))

    async def receive(self, channel: str) -> dict[str, Any]:
        return await self._home(super().receive(channel))

    async def new_channel(self, prefix: str = "specific.") -> str:
        return await self._home(super().new_channel(prefix))

    async def group_add(self, group: str, channel: str) -> None:
        await self._home(super().group_add(group, channel))

    async def group_discard(self, group: str, channel: str) -> None:
        await self._home(super().group_discard(group, channel))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self._home(super().group_send(group, message))

    async def flush(self) -> None:
        await self._home(super().flush())


_reading: set[tuple[int, int]] = set()


async def keep_reading(layer: Any) -> None:
    """Subscribe this process (once per layer and event loop) to a group nobody sends to.

    channels_redis' ``RedisPubSubChannelLayer`` looks at its connection only every 100 ms
    while it has no subscription at all, so a request that subscribes first in an idle
    process would hear its first message up to 100 ms late. With one lasting subscription
    the layer keeps reading and delivers at once.
    """
    key = (id(layer), id(asyncio.get_running_loop()))
    if key in _reading:
        return
    _reading.add(key)
    try:
        channel = await layer.new_channel()
        await layer.group_add(f"mcp_tasks.reading.{os.getpid()}", channel)
    except Exception:
        _reading.discard(key)
        raise

"""Channel-layer helpers: :class:`InProcessChannelLayer`, an in-memory layer the threads of one
process may share (Channels' ``InMemoryChannelLayer`` binds its asyncio queues to one event
loop, so a sender on another thread's loop, the embedded task worker's, corrupts it: this
one runs every operation on one private loop in a background thread); :func:`keep_reading`
keeps channels_redis' pub/sub layer reading at once."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from channels.layers import InMemoryChannelLayer

T = TypeVar("T")

_lock = threading.Lock()
#: The process's one loop that every in-process layer's operations run on.
_loop: asyncio.AbstractEventLoop | None = None
#: The channels and groups of the process's in-process layers, by their options.
_stores: dict[str, InMemoryChannelLayer] = {}


def _home_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=_loop.run_forever, name="mcp_tasks-channel-layer", daemon=True
            )
            thread.start()
        return _loop


class InProcessChannelLayer(InMemoryChannelLayer):
    """``InMemoryChannelLayer`` that is safe across threads and event loops (one process).

    Its instances with the same options share one set of channels and groups: a layer
    made again after ``CHANNEL_LAYERS`` changed (``override_settings`` in a test) still
    reaches the embedded worker, which listens on the layer it was started with."""

    def __init__(
        self,
        expiry: int = 60,
        group_expiry: int = 86400,
        capacity: int = 100,
        channel_capacity: Any = None,
        **kwargs: Any,
    ) -> None:
        options = {
            "expiry": expiry,
            "group_expiry": group_expiry,
            "capacity": capacity,
            "channel_capacity": channel_capacity,
            **kwargs,
        }
        super().__init__(**options)
        key = repr(sorted(options.items()))
        with _lock:
            store = _stores.get(key)
            if store is None:
                store = _stores[key] = InMemoryChannelLayer(**options)
        self._store = store
        self._loop = _home_loop()

    async def _home(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self._home(self._store.send(channel, message))

    async def receive(self, channel: str) -> dict[str, Any]:
        return await self._home(self._store.receive(channel))

    async def new_channel(self, prefix: str = "specific.") -> str:
        return await self._home(self._store.new_channel(prefix))

    async def group_add(self, group: str, channel: str) -> None:
        await self._home(self._store.group_add(group, channel))

    async def group_discard(self, group: str, channel: str) -> None:
        await self._home(self._store.group_discard(group, channel))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self._home(self._store.group_send(group, message))

    async def flush(self) -> None:
        """Empty the channels and groups of every instance with these options."""
        await self._home(self._store.flush())


_reading: set[tuple[int, int]] = set()


async def keep_reading(layer: Any) -> None:
    """Subscribe this process (once per layer and event loop) to a group nobody sends to:
    channels_redis' ``RedisPubSubChannelLayer`` reads its connection only every 100 ms while it
    has no subscription, so the first request to subscribe in an idle process would hear its
    first message up to 100 ms late. One lasting subscription keeps it reading."""
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

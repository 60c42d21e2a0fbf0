"""A request's channel-layer groups and the pump reading its channel (most requests join none)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..core import background
from ..layers import keep_reading

logger = logging.getLogger("mcp_tasks.transport")

#: Reads channel-layer messages and hands each one on, until cancelled.
Pump = Callable[[Callable[[], Awaitable[dict[str, Any]]]], Awaitable[None]]


class Membership:
    """Joins groups on ``layer`` (None: no channel layer, joining does nothing); the first
    join names the channel and starts ``pump`` reading it."""

    def __init__(self, layer: Any, pump: Pump, on_failure: Callable[[], None]) -> None:
        self.layer = layer
        self._pump = pump
        self._on_failure = on_failure
        self.channel_name: str | None = None
        self._joined: set[str] = set()
        self._reader: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()

    async def join(self, group: str) -> None:
        if self.layer is None:
            return
        async with self._lock:
            if group in self._joined:
                return
            if self._reader is None:
                await keep_reading(self.layer)
                self.channel_name = await self.layer.new_channel()
                read = functools.partial(self.layer.receive, self.channel_name)
                self._reader = asyncio.ensure_future(self._pump(read))
                self._reader.add_done_callback(self._reader_ended)
            await self.layer.group_add(group, self.channel_name)
            self._joined.add(group)

    async def leave(self, group: str) -> None:
        if group in self._joined:
            self._joined.discard(group)
            await self.layer.group_discard(group, self.channel_name)

    async def send(self, group: str, message: dict[str, Any]) -> None:
        """``group_send`` on the layer (nothing without one)."""
        if self.layer is not None:
            await self.layer.group_send(group, message)

    def _reader_ended(self, reader: asyncio.Future[None]) -> None:
        if not reader.cancelled() and reader.exception() is not None:
            logger.error("handling a channel-layer message failed", exc_info=reader.exception())
            self._on_failure()

    async def close(self) -> None:
        """Stop reading and leave every group (the layer may be gone at shutdown)."""
        if self._reader is not None:
            self._reader.cancel()
            self._reader.add_done_callback(background.ignore_outcome)
        for group in list(self._joined):
            try:
                await self.layer.group_discard(group, self.channel_name)
            except Exception:
                logger.debug("could not leave %s", group, exc_info=True)
        self._joined.clear()

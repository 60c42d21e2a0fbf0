"""One listener per event loop reading one channel (base of the task watcher and process bus)."""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, ClassVar, Self

from channels.layers import get_channel_layer

from ..conf import get_config

logger = logging.getLogger("mcp_tasks.transport")


class LayerListener:
    """Reads its channel in one task for its whole life; :meth:`heard` gets each message."""

    #: Names the listener in log lines.
    label: ClassVar[str] = "listener"
    _instances: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._instances = weakref.WeakKeyDictionary()

    def __init__(self, layer: Any) -> None:
        self.layer = layer

    @classmethod
    def of_running_loop(cls) -> Self | None:
        """The running event loop's listener; None without a channel layer."""
        layer = get_channel_layer(get_config().CHANNEL_LAYER)
        if layer is None:
            return None
        loop = asyncio.get_running_loop()
        listener: Self | None = cls._instances.get(loop)
        if listener is None or listener.layer is not layer:
            listener = cls._instances[loop] = cls(layer)
        return listener

    async def _read(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except Exception:  # Redis restarting: what is sent meanwhile is lost
                logger.warning("%s: channel layer read failed", self.label, exc_info=True)
                await asyncio.sleep(0.5)
                continue
            self.heard(message)

    def heard(self, message: dict[str, Any]) -> None:
        raise NotImplementedError

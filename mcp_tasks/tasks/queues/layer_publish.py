"""Group messages to a channels_redis pub/sub layer of one Redis server, coalesced per
event loop: the messages sent while a round trip is under way go together in the next,
one pipeline of ``PUBLISH`` commands
(:class:`~mcp_tasks.tasks.queues.coalesce.Coalesced`).

The layer itself publishes one message per round trip, each behind its connection's
lock; a worker ending many jobs at once spent a tenth of its time writing them. Only the
layer's wire format is shared: the group's channel is ``<prefix>__group__<group>`` and the
payload ``layer.serialize(message)`` (``tests/suite/test_dependency_contracts.py`` checks
both against channels_redis). Any other layer, or one of several servers (shards), gets
its own ``group_send``.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

import redis.asyncio
from django.conf import settings

from ...core import redis_clients
from .coalesce import Coalesced, Outcome, awaited

_PUBSUB_LAYER = "channels_redis.pubsub.RedisPubSubChannelLayer"
#: The layer's ``prefix`` when its ``CONFIG`` has none.
DEFAULT_PREFIX = "asgi"
P = ParamSpec("P")
R = TypeVar("R")

#: False on a loop made for one call (``async_to_sync`` from sync code): a client kept for
#: it would never be closed.
_coalescing: ContextVar[bool] = ContextVar("mcp_tasks_coalescing", default=True)

#: By loop: each layer's publisher (None: its own ``group_send``).
_publishers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Publisher | None]]
_publishers = weakref.WeakKeyDictionary()


class _Publisher:
    """One layer's server on one loop. Its client retries as those of
    :mod:`~mcp_tasks.core.redis_clients` do; past that, each message of the batch fails, as
    the layer's own publish would."""

    def __init__(self, client: redis.asyncio.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.publish: Coalesced[tuple[str, bytes], None] = Coalesced(self._publish_all, awaited)

    async def _publish_all(self, batch: list[tuple[str, bytes]]) -> list[Outcome]:
        try:
            async with self.client.pipeline(transaction=False) as pipeline:
                for channel, payload in batch:
                    pipeline.publish(channel, payload)
                await pipeline.execute()
        except Exception as exc:
            return [(False, exc)] * len(batch)
        return [(True, None)] * len(batch)


def _publisher(alias: str) -> _Publisher | None:
    by_alias = _publishers.setdefault(asyncio.get_running_loop(), {})
    if alias not in by_alias:
        by_alias[alias] = _new_publisher(alias)
    return by_alias[alias]


def _new_publisher(alias: str) -> _Publisher | None:
    config: dict[str, Any] = (getattr(settings, "CHANNEL_LAYERS", None) or {}).get(alias) or {}
    targets = redis_clients.layer_targets(alias)
    if config.get("BACKEND") != _PUBSUB_LAYER or len(targets) != 1 or targets[0].problem:
        return None
    prefix = str((config.get("CONFIG") or {}).get("prefix", DEFAULT_PREFIX))
    return _Publisher(redis_clients.async_client(targets[0]), prefix)


async def group_send(alias: str, layer: Any, group: str, message: dict[str, Any]) -> None:
    """``layer.group_send(group, message)``, coalesced when ``layer`` (the channel layer
    ``alias``) is channels_redis' pub/sub layer of one server."""
    publisher = _publisher(alias) if _coalescing.get() else None
    if publisher is None:
        await layer.group_send(group, message)
        return
    await publisher.publish((group_channel(publisher.prefix, group), layer.serialize(message)))


def group_channel(prefix: str, group: str) -> str:
    """The Redis channel of a group of the layer whose prefix is ``prefix``."""
    return f"{prefix}__group__{group}"


def one_off(send: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """``send`` for a loop made for it alone: its messages go through the layer itself."""

    @functools.wraps(send)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        # Reset after: async_to_sync copies the coroutine's context back to its caller's.
        token = _coalescing.set(False)
        try:
            return await send(*args, **kwargs)
        finally:
            _coalescing.reset(token)

    return run


def forget_publishers_on_change(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: publishers follow ``CHANNEL_LAYERS``."""
    if setting == "CHANNEL_LAYERS":
        _publishers.clear()

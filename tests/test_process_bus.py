"""The process bus on the real Redis pub/sub channel layer: a process that answers from its
session cache first hears every session change another process published before."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer

from mcp_tasks.transport.process_bus import PROCESSES, ProcessBus

pytestmark = pytest.mark.redis


def layer(redis_url: str) -> Any:
    return RedisPubSubChannelLayer(hosts=[redis_url], prefix="test-process-bus")


def publish_from_another_process(redis_url: str, message: dict[str, Any]) -> None:
    """``group_send`` on a layer of its own, in a thread with its own event loop, while the
    caller's loop stands still: the message is on the caller's socket, not yet read."""

    async def send() -> None:
        other = layer(redis_url)
        await other.group_send(PROCESSES, message)
        await other.flush()

    thread = threading.Thread(target=asyncio.run, args=(send(),))
    thread.start()
    thread.join()


async def test_caught_up_hears_a_change_published_before_it(redis_url: str) -> None:
    bus = ProcessBus(layer(redis_url))
    await bus.start()
    bus.sessions["s1"] = (0.0, object())  # type: ignore[assignment]
    bus.sessions["s2"] = (0.0, object())  # type: ignore[assignment]

    publish_from_another_process(redis_url, {"type": "mcp.session", "session": "s1"})

    assert "s1" in bus.sessions  # on the socket, not read: what a cache hit would trust
    assert await bus.caught_up() is True
    assert "s1" not in bus.sessions
    assert "s2" in bus.sessions
    await bus.layer.flush()


async def test_concurrent_requests_share_one_echo(redis_url: str) -> None:
    bus = ProcessBus(layer(redis_url))
    await bus.start()
    sent: list[dict[str, Any]] = []
    send = bus.layer.send

    async def counting_send(channel: str, message: dict[str, Any]) -> None:
        sent.append(message)
        await send(channel, message)

    bus.layer.send = counting_send
    assert await asyncio.gather(*(bus.caught_up() for _ in range(20))) == [True] * 20
    assert len(sent) == 1
    assert await bus.caught_up() is True  # a later request gets an echo sent after it
    assert len(sent) == 2
    bus.layer.send = send
    await bus.layer.flush()


async def test_an_unreachable_layer_is_not_caught_up(redis_url: str) -> None:
    bus = ProcessBus(layer(redis_url))
    await bus.start()
    send = bus.layer.send

    async def refused(channel: str, message: dict[str, Any]) -> None:
        raise ConnectionError("Redis restarting")

    bus.layer.send = refused
    assert await bus.caught_up() is False  # the caller reads the database instead
    bus.layer.send = send
    await bus.layer.flush()

"""The process bus on the real Redis pub/sub channel layer: a session change is answered
only once every process listed as keeping the session dropped its copy (so a listed copy is
used with no round trip), and a process that answers from an unlisted copy first hears every
change another process published before."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis.asyncio as aioredis
from channels_redis.pubsub import RedisPubSubChannelLayer

from mcp_tasks.auth import ANONYMOUS
from mcp_tasks.transport import process_bus as process_bus_module
from mcp_tasks.transport.process_bus import PROCESSES, ProcessBus, process_bus
from mcp_tasks.transport.session_cache import cached_session

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
    bus = ProcessBus(layer(redis_url), redis=False)
    await bus.start()
    bus.sessions["s1"] = (0.0, object(), False)  # type: ignore[assignment]
    bus.sessions["s2"] = (0.0, object(), False)  # type: ignore[assignment]

    publish_from_another_process(redis_url, {"type": "mcp.session", "session": "s1"})

    assert "s1" in bus.sessions  # on the socket, not read: what a cache hit would trust
    assert await bus.caught_up() is True
    assert "s1" not in bus.sessions
    assert "s2" in bus.sessions
    await bus.layer.flush()


async def test_concurrent_requests_share_one_echo(redis_url: str) -> None:
    bus = ProcessBus(layer(redis_url), redis=False)
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
    bus = ProcessBus(layer(redis_url), redis=False)
    await bus.start()
    send = bus.layer.send

    async def refused(channel: str, message: dict[str, Any]) -> None:
        raise ConnectionError("Redis restarting")

    bus.layer.send = refused
    assert await bus.caught_up() is False  # the caller reads the database instead
    bus.layer.send = send
    await bus.layer.flush()


# -- listed cachers ------------------------------------------------------------------------


@pytest.fixture
async def two_processes(redis_url: str) -> AsyncIterator[tuple[ProcessBus, ProcessBus]]:
    """Two buses, each on a channel layer and a Redis client of its own (two processes)."""
    buses = [ProcessBus(layer(redis_url), redis=aioredis.Redis.from_url(redis_url)) for _ in "ab"]
    for bus in buses:
        await bus.start()
    yield buses[0], buses[1]
    for bus in buses:
        await bus.layer.flush()
        assert bus.redis is not None
        await bus.redis.aclose()


async def test_a_change_returns_once_every_listed_cacher_dropped_its_copy(
    two_processes: tuple[ProcessBus, ProcessBus], caplog: pytest.LogCaptureFixture
) -> None:
    changer, keeper = two_processes
    session = f"s-{time.monotonic_ns()}"
    assert await keeper.list_as_cacher(session) is True
    keeper.sessions[session] = (0.0, object(), True)  # type: ignore[assignment]
    keeper.sessions["other"] = (0.0, object(), True)  # type: ignore[assignment]
    receive = keeper.layer.receive

    async def slow_receive(channel: str) -> dict[str, Any]:
        message: dict[str, Any] = await receive(channel)
        await asyncio.sleep(0.3)  # a busy process: it reads the change late
        return message

    keeper.layer.receive = slow_receive
    assert await keeper.caught_up()  # its reader now waits in slow_receive

    with caplog.at_level(logging.WARNING, logger="mcp_tasks.transport"):
        await changer.session_changed(session)

    assert session not in keeper.sessions  # dropped before the change was answered
    assert "other" in keeper.sessions
    assert "did not acknowledge" not in caplog.text  # acknowledged, not timed out


async def test_a_cacher_that_never_acknowledges_holds_a_change_up_only_for_the_bound(
    two_processes: tuple[ProcessBus, ProcessBus],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    changer, _ = two_processes
    session = f"s-{time.monotonic_ns()}"
    assert changer.redis is not None
    await changer.redis.sadd(  # a process that died after listing itself
        process_bus_module._cachers_key(session), "specific.gone!channel"
    )
    monkeypatch.setattr(process_bus_module, "ECHO_TIMEOUT", 0.2)
    with caplog.at_level(logging.WARNING, logger="mcp_tasks.transport"):
        await changer.session_changed(session)
    assert "1 process(es) did not acknowledge a session change" in caplog.text


async def test_without_redis_for_the_lists_a_process_is_not_listed(redis_url: str) -> None:
    bus = ProcessBus(layer(redis_url), redis=False)
    await bus.start()
    assert await bus.list_as_cacher("s1") is False  # its copies get an echo before each use
    await bus.layer.flush()


async def test_a_listed_copy_is_used_with_no_round_trip_an_unlisted_one_after_an_echo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bus = process_bus()  # this loop's, on the configured layer
    assert bus is not None
    await bus.start()
    echoes = 0

    async def counted_echo() -> bool:
        nonlocal echoes
        echoes += 1
        return True

    monkeypatch.setattr(bus, "caught_up", counted_echo)
    kept: Any = SimpleNamespace(principal_scope=ANONYMOUS.scope)  # a StoredSession to the cache
    bus.sessions["listed"] = (time.monotonic(), kept, True)
    bus.sessions["unlisted"] = (time.monotonic(), kept, False)

    assert await cached_session("listed", ANONYMOUS) is kept
    assert echoes == 0
    assert await cached_session("unlisted", ANONYMOUS) is kept
    assert echoes == 1

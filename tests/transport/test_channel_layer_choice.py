"""Why mcp_tasks runs on channels_redis' pub/sub layer (and system check W004 warns about
``RedisChannelLayer``), shown against a real Redis.

Every request's consumer that waits for channel-layer messages stops reading when the
request ends: its read is cancelled. ``RedisChannelLayer`` serves all consumers of a
process from one Redis key, popped by whichever read holds its per-process receive lock;
cancelling that read after its ``BZPOPMIN`` popped a message for *another* consumer, and
before the event loop read it, loses the message (django/channels_redis#366). Under load,
a GET stream misses a notification. ``RedisPubSubChannelLayer`` reads each process's
messages in one task that is never cancelled, and hands them to per-consumer queues.

The race, made deterministic: the test's event loop cannot run between the message being
popped and the cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from channels_redis.core import RedisChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer

pytestmark = pytest.mark.redis

#: How long a read that should get its message is given (a loss is permanent: a longer
#: wait would not change the outcome).
DELIVERY_WAIT = 3.0


@pytest.fixture
def prefix() -> str:
    return f"test-layer-choice-{uuid.uuid4().hex}"


def send_from_another_process(make_layer: Callable[[], Any], channel: str) -> None:
    """Send like a worker process does (its own layer, thread and event loop), blocking
    this thread, and so the test's event loop, until Redis has the message and has handed
    it to the reading connection."""

    async def send() -> None:
        sender = make_layer()
        await sender.send(channel, {"type": "test.message", "n": 1})
        if isinstance(sender, RedisChannelLayer):
            await sender.close_pools()
        else:
            await sender.flush()

    thread = threading.Thread(target=asyncio.run, args=(send(),))
    thread.start()
    thread.join()
    time.sleep(0.05)  # the message reaches the reading socket (the loop cannot run)


async def lock_holder_cancelled_as_a_message_arrives(
    layer: Any, make_sender: Callable[[], Any]
) -> bool:
    """A read that started first (``doomed``: with ``RedisChannelLayer`` it holds the
    receive lock, in ``BZPOPMIN``) is cancelled, as a request ends, right after a message
    for ``listener`` reached Redis. Whether the listener gets that message."""
    doomed_channel = await layer.new_channel()
    listener_channel = await layer.new_channel()
    doomed = asyncio.ensure_future(layer.receive(doomed_channel))
    await asyncio.sleep(0.2)
    listener = asyncio.ensure_future(layer.receive(listener_channel))
    await asyncio.sleep(0.2)
    send_from_another_process(make_sender, listener_channel)
    doomed.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await doomed
    try:
        message: dict[str, Any] = await asyncio.wait_for(listener, DELIVERY_WAIT)
    except TimeoutError:
        return False
    assert message["n"] == 1
    return True


async def delivered_despite_the_cancel(layer_class: type, redis_url: str, prefix: str) -> bool:
    """Run the race on a fresh layer of ``layer_class``, then clean up its Redis keys."""
    layer = layer_class(hosts=[redis_url], prefix=prefix)
    try:
        return await lock_holder_cancelled_as_a_message_arrives(
            layer, lambda: layer_class(hosts=[redis_url], prefix=prefix)
        )
    finally:
        await layer.flush()
        if isinstance(layer, RedisChannelLayer):
            await layer.close_pools()


async def test_core_layer_loses_the_message_when_the_lock_holder_is_cancelled(
    redis_url: str, prefix: str
) -> None:
    assert not await delivered_despite_the_cancel(RedisChannelLayer, redis_url, prefix), (
        "channels_redis' RedisChannelLayer no longer loses this message: check "
        "mcp_tasks.W004 and the README's channel-layer advice"
    )


async def test_pubsub_layer_delivers_the_message(redis_url: str, prefix: str) -> None:
    assert await delivered_despite_the_cancel(RedisPubSubChannelLayer, redis_url, prefix)

"""Group messages published by ``mcp_tasks.tasks.queues.layer_publish`` reach the channel
layer's groups as the layer's own ``group_send`` would, on the real Redis: several sent at
once go in one pipeline, in order; any other layer, and a loop made for one call, go
through the layer itself."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import channel_layers, get_channel_layer

from mcp_tasks.tasks.queues import layer_publish

pytestmark = pytest.mark.redis


@pytest.fixture
def pubsub_layer(redis_url: str, settings: Any) -> Iterator[str]:
    """A channels_redis pub/sub layer of its own on the real Redis: its alias."""
    alias = f"publish-{secrets.token_hex(4)}"
    settings.CHANNEL_LAYERS = {
        **settings.CHANNEL_LAYERS,
        alias: {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": f"p{secrets.token_hex(4)}"},
        },
    }
    yield alias
    channel_layers.backends.pop(alias, None)


async def heard(layer: Any, channel: str, count: int) -> list[dict[str, Any]]:
    return [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(count)]


def test_messages_sent_at_once_arrive_in_order_through_one_pipeline(
    pubsub_layer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = [
        {"type": "mcp.task", "task_id": f"t{n}", "status": "completed", "fields": {"n": n}}
        for n in range(20)
    ]

    async def scenario() -> tuple[list[dict[str, Any]], int]:
        layer = get_channel_layer(pubsub_layer)
        channel = await layer.new_channel()
        await layer.group_add("watchers", channel)
        pipelines = 0
        publisher = layer_publish._publisher(pubsub_layer)
        assert publisher is not None
        original = publisher.client.pipeline

        def counted(**kwargs: Any) -> Any:
            nonlocal pipelines
            pipelines += 1
            return original(**kwargs)

        monkeypatch.setattr(publisher.client, "pipeline", counted)
        await asyncio.gather(
            *(layer_publish.group_send(pubsub_layer, layer, "watchers", m) for m in sent)
        )
        received = await heard(layer, channel, len(sent))
        await layer.flush()
        await publisher.client.aclose()
        return received, pipelines

    received, pipelines = asyncio.run(scenario())
    assert received == sent
    assert pipelines == 1  # all 20 were sent before the loop ran the first round trip


def test_a_layer_that_is_not_redis_pubsub_gets_its_own_group_send(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {
        **settings.CHANNEL_LAYERS,
        "memory": {"BACKEND": "channels.layers.InMemoryChannelLayer"},
    }

    async def scenario() -> dict[str, Any]:
        layer = get_channel_layer("memory")
        channel = await layer.new_channel()
        await layer.group_add("watchers", channel)
        await layer_publish.group_send("memory", layer, "watchers", {"type": "x", "n": 1})
        assert layer_publish._publisher("memory") is None
        return (await heard(layer, channel, 1))[0]

    try:
        assert asyncio.run(scenario()) == {"type": "x", "n": 1}
    finally:
        channel_layers.backends.pop("memory", None)


def test_a_loop_made_for_one_call_keeps_no_client(pubsub_layer: str) -> None:
    """Sync code's ``async_to_sync`` runs its coroutine on a loop of its own: nothing is
    kept for that loop, and the message still arrives."""
    message = {"type": "mcp.task", "task_id": "t", "status": "working"}
    kept: list[bool] = []

    async def send() -> None:
        layer = get_channel_layer(pubsub_layer)
        await layer_publish.group_send(pubsub_layer, layer, "watchers", message)
        kept.append(asyncio.get_running_loop() in layer_publish._publishers)

    async def scenario() -> dict[str, Any]:
        layer = get_channel_layer(pubsub_layer)
        channel = await layer.new_channel()
        await layer.group_add("watchers", channel)
        await asyncio.get_running_loop().run_in_executor(
            None, async_to_sync(layer_publish.one_off(send))
        )
        received = (await heard(layer, channel, 1))[0]
        await layer.flush()
        return received

    assert asyncio.run(scenario()) == message
    assert kept == [False]
    # async_to_sync copies the call's context back to its caller: nothing of it stays.
    async_to_sync(layer_publish.one_off(send))()
    assert layer_publish._coalescing.get()

"""A process's waits on tasks (``tasks/get`` holds, 2025-11-25 ``tasks/result``), on the real
Redis pub/sub channel layer: the watcher joins a task's shard group once and stays in it, so
later waits on tasks of that shard cost no channel-layer call; a change wakes exactly the
waits on that task, published from another process."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.utils import timezone

from mcp_tasks.core import groups
from mcp_tasks.tasks.state import service
from mcp_tasks.transport.task_watcher import TaskWatcher
from tests.support.worker_fixtures import task_id_in_shard_of

pytestmark = pytest.mark.redis


def counting_layer(redis_url: str, prefix: str) -> Any:
    """The real layer, recording the groups it was asked to join and leave."""
    layer = RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix)
    layer.joined, layer.left = [], []
    group_add, group_discard = layer.group_add, layer.group_discard

    async def add(group: str, channel: str) -> None:
        layer.joined.append(group)
        await group_add(group, channel)

    async def discard(group: str, channel: str) -> None:
        layer.left.append(group)
        await group_discard(group, channel)

    layer.group_add, layer.group_discard = add, discard
    return layer


def task_ids_by_shard(count: int) -> tuple[list[str], str]:
    """``count`` task ids of one shard, and one of another shard."""
    first = secrets.token_urlsafe(32)
    same = [first, *(task_id_in_shard_of(first) for _ in range(count - 1))]
    return same, task_id_in_shard_of(first, same=False)


async def send_change(redis_url: str, prefix: str, task_id: str) -> None:
    """What the worker sends when it finishes a task, from a layer of its own (another
    process's connection)."""
    other = RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix)
    message = {"type": "mcp.task", "task_id": task_id, "status": "completed"}
    await other.group_send(groups.task_shard_group(task_id), message)
    await other.flush()


async def test_waits_on_tasks_of_one_shard_join_its_group_once_and_never_leave(
    redis_url: str,
) -> None:
    prefix = f"test-watcher-{secrets.token_hex(4)}"
    layer = counting_layer(redis_url, prefix)
    watcher = TaskWatcher(layer)
    (first, second, third), elsewhere = task_ids_by_shard(3)

    wait_first = await watcher.watch(first)
    wait_second = await watcher.watch(second)
    assert wait_first is not None and wait_second is not None
    assert layer.joined == [groups.task_shard_group(first)]

    watcher.unwatch(wait_first)
    watcher.unwatch(wait_second)
    assert watcher.waits == {}
    assert await watcher.watch(third) is not None
    assert layer.joined == [groups.task_shard_group(first)]  # still joined: no call

    assert await watcher.watch(elsewhere) is not None
    assert layer.joined == [groups.task_shard_group(first), groups.task_shard_group(elsewhere)]
    assert layer.left == []
    await layer.flush()


async def test_a_change_wakes_the_waits_on_that_task_only(redis_url: str) -> None:
    prefix = f"test-watcher-{secrets.token_hex(4)}"
    watcher = TaskWatcher(RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix))
    (changed, unchanged), elsewhere = task_ids_by_shard(2)
    first_wait, second_wait = await watcher.watch(changed), await watcher.watch(changed)
    bystander, far = await watcher.watch(unchanged), await watcher.watch(elsewhere)
    assert first_wait and second_wait and bystander and far

    await send_change(redis_url, prefix, changed)
    await asyncio.wait_for(first_wait.changed.wait(), 5)
    await asyncio.wait_for(second_wait.changed.wait(), 5)
    await send_change(redis_url, prefix, elsewhere)  # heard after the first (one channel)
    await asyncio.wait_for(far.changed.wait(), 5)
    assert not bystander.changed.is_set()

    watcher.unwatch(first_wait)  # a change of a task nobody waits on any more is dropped
    watcher.unwatch(second_wait)
    first_wait.changed.clear()
    await send_change(redis_url, prefix, changed)
    await send_change(redis_url, prefix, unchanged)  # heard after the one before it
    await asyncio.wait_for(bystander.changed.wait(), 5)
    assert not first_wait.changed.is_set()
    await watcher.layer.flush()


async def test_the_fields_an_ended_task_carries_reach_every_wait_on_it(redis_url: str) -> None:
    """``fields`` go through the layer's serialisation whole; a change without them leaves
    none, so the waiting request reads the task back."""
    prefix = f"test-watcher-{secrets.token_hex(4)}"
    watcher = TaskWatcher(RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix))
    (ended, other), _ = task_ids_by_shard(2)
    waits = [await watcher.watch(ended), await watcher.watch(ended)]
    plain = await watcher.watch(other)
    final = service.final_fields(
        {
            "status": "completed",
            "status_message": "Completed",
            "result": {"content": [{"type": "text", "text": "é"}], "structuredContent": 10**30},
            "updated_at": timezone.now(),
        }
    )
    sender = RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix)
    message = {"type": "mcp.task", "task_id": ended, "status": "completed", "fields": final}
    await sender.group_send(groups.task_shard_group(ended), message)
    await send_change(redis_url, prefix, other)
    await sender.flush()
    for wait in (*waits, plain):
        assert wait is not None
        await asyncio.wait_for(wait.changed.wait(), 5)
    assert [wait.fields for wait in waits if wait] == [final, final]
    assert plain is not None and plain.fields is None
    await watcher.layer.flush()


async def test_fields_that_follow_a_change_not_yet_looked_at_are_not_carried(
    redis_url: str,
) -> None:
    """Progress, then a question, before the waiting request looked: the question's
    fields lack the progress, so the request gets none and reads the task back."""
    prefix = f"test-watcher-{secrets.token_hex(4)}"
    watcher = TaskWatcher(RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix))
    (task_id,), _ = task_ids_by_shard(1)
    heard: list[dict[str, Any]] = []
    hear = watcher.heard

    def counted(message: dict[str, Any]) -> None:
        heard.append(message)
        hear(message)

    watcher.heard = counted  # type: ignore[method-assign]
    wait = await watcher.watch(task_id)
    assert wait is not None
    sender = RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix)
    fields = {"status": "input_required", "status_message": "Name?", "questions": "[]"}
    for message in (
        {"type": "mcp.task", "task_id": task_id, "status": "working"},
        {"type": "mcp.task", "task_id": task_id, "status": "input_required", "fields": fields},
    ):
        await sender.group_send(groups.task_shard_group(task_id), message)
    await sender.flush()
    await asyncio.wait_for(wait.changed.wait(), 5)
    for _ in range(250):  # both heard (the second one right after the first)
        if len(heard) == 2:
            break
        await asyncio.sleep(0.02)
    assert len(heard) == 2 and wait.fields is None
    wait.changed.clear()  # looked at: the next change's fields are carried
    await sender.group_send(
        groups.task_shard_group(task_id),
        {"type": "mcp.task", "task_id": task_id, "status": "input_required", "fields": fields},
    )
    await sender.flush()
    await asyncio.wait_for(wait.changed.wait(), 5)
    assert wait.fields == fields
    await watcher.layer.flush()

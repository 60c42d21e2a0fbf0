"""A job run by rq's own worker classes (``mcp_tasks.tasks.worker.job.run_task``: the forking
worker's work-horse runs one job on a loop of its own and exits) still tells the task's
watchers of its last change: on the real Redis pub/sub channel layer, whose send needs the
loop after the job's last statement."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections
from django.test import override_settings

from mcp_tasks.core import groups
from mcp_tasks.tasks.state import service
from mcp_tasks.tasks.worker.job import run_task
from tests.support.rows import new_record

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]

#: Seconds the watcher waits for a message at most (a bound on a hang, not a timing check).
WAIT = 20.0


class Watcher:
    """Joins a task's shard group on a loop and thread of its own; keeps what it hears of
    the task until it hears the task end."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.heard: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=asyncio.run, args=(self._listen(),))
        self.thread.start()
        assert self.ready.wait(WAIT), "the watcher could not join the task's group"

    async def _listen(self) -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(groups.task_shard_group(self.task_id), channel)
        self.ready.set()
        try:
            while not any(m.get("status") == "completed" for m in self.heard):
                message = await asyncio.wait_for(layer.receive(channel), WAIT)
                if message.get("task_id") == self.task_id:  # not another task of its shard
                    self.heard.append(message)
        except TimeoutError:
            pass
        finally:
            await layer.group_discard(groups.task_shard_group(self.task_id), channel)
            await layer.flush()


@pytest.fixture(autouse=True)
def close_orm_thread_connections() -> Any:
    """``db()`` keeps its thread's connection: close it, or the test database cannot be
    dropped."""
    yield
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def test_the_last_change_of_a_job_run_alone_reaches_its_watchers(redis_url: str) -> None:
    layer = {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [redis_url], "prefix": f"test-run-alone-{uuid.uuid4().hex[:8]}"},
    }
    with override_settings(CHANNEL_LAYERS={"default": layer}):
        task = service.create_task(new_record("slow_compute", arguments={"seconds": 0}))
        watcher = Watcher(task.id)
        run_task(task.id, task.runs)  # what the work-horse runs before it exits
        watcher.thread.join()
    assert service.find_task(task.id).status == "completed"  # type: ignore[union-attr]
    assert [message.get("status") for message in watcher.heard] == ["completed"]

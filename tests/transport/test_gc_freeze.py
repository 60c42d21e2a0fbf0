"""``GC_FREEZE``: processes move their start-up objects out of the cyclic collector's reach
once started (the ASGI application built, a task worker bootstrapped)."""

from __future__ import annotations

import gc
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings
from redis import Redis
from rq import Queue

from mcp_tasks.asgi import mcp_application
from mcp_tasks.core.gc_freeze import freeze_startup_objects
from mcp_tasks.tasks.worker.task_worker import EmbeddedTaskWorker, TaskWorker


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test run keeps its ordinary collector


def tracked(thing: Any) -> bool:
    """``thing`` is in one of the collector's generations (not the permanent one)."""
    return any(other is thing for other in gc.get_objects())


def test_freezing_takes_what_is_alive_out_of_the_generations_and_nothing_made_later() -> None:
    before = [object()]
    assert freeze_startup_objects() is True
    after = [object()]
    assert gc.get_freeze_count() > 1000  # Django, the app, its tools
    assert not tracked(before)
    assert tracked(after)


def test_gc_freeze_off_leaves_the_collector_alone() -> None:
    with override_settings(MCP_TASKS={"GC_FREEZE": False}):
        assert freeze_startup_objects() is False
        mcp_application(object())
    assert gc.get_freeze_count() == 0


def test_building_the_asgi_application_freezes() -> None:
    mcp_application(object())
    assert gc.get_freeze_count() > 1000


def test_the_embedded_worker_leaves_it_to_its_asgi_process() -> None:
    EmbeddedTaskWorker.freeze_startup_objects(None)  # type: ignore[arg-type]
    assert gc.get_freeze_count() == 0


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_task_worker_freezes_once_bootstrapped(redis_url: str) -> None:
    connection = Redis.from_url(redis_url)
    queue = Queue(f"gc-freeze-{secrets.token_hex(4)}", connection=connection)
    worker = TaskWorker([queue], connection=connection, concurrency=1)
    try:
        worker.work(burst=True, with_scheduler=False)  # bootstraps, finds nothing, stops
    finally:
        connections.close_all()
    assert gc.get_freeze_count() > 1000

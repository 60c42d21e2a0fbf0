"""A task's question whose row cannot be written, or whose answer cannot be read back, ends
the task ``failed`` with the reason: the tool never goes on as if the question had been
dismissed (``CancelledElicitation``), which gave a wrong result that looked right.

The job runs in this process (``run_task``, rq's entry point) on the suite's database; only
the one service call under test is made to fail."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, connections
from django.test import override_settings

from mcp_tasks.models import InputRequest
from mcp_tasks.tasks.state import service
from mcp_tasks.tasks.worker.job import run_task
from tests.support.rows import new_task

pytestmark = pytest.mark.django_db(transaction=True)

ELICITING: dict[str, Any] = {"elicitation": {"form": {}}}
LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture(autouse=True)
def quick_tasks(settings: Any) -> Iterator[None]:
    # A short TASK_LOST_AFTER: a job tries its writes again for that long before it gives up.
    settings.MCP_TASKS = {"INPUT_HOLD_WINDOW": 0.2, "TASK_LOST_AFTER": 0.5}
    with override_settings(CHANNEL_LAYERS=LAYER):
        yield
    # ``db()`` keeps its thread's connection: close it, or the test database cannot be dropped.
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise OperationalError("database table is locked: mcp_tasks_inputrequest")


def test_a_question_that_cannot_be_recorded_fails_the_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = new_task(
        "long_report", arguments={"quarter": "Q3", "steps": 1}, client_capabilities=ELICITING
    )
    monkeypatch.setattr(service, "ask_all", _refuse)
    run_task(task.id, task.runs)
    ended = service.find_task(task.id)
    assert ended is not None
    assert ended.status == "failed"
    assert ended.result is None  # the tool did not go on to a result
    message = str((ended.error or {}).get("message"))
    assert "could not be recorded" in message
    assert "database table is locked" in message


def test_an_answer_that_cannot_be_read_back_fails_the_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = new_task(
        "long_report", arguments={"quarter": "Q3", "steps": 1}, client_capabilities=ELICITING
    )
    monkeypatch.setattr(service, "release", _refuse)  # the hold window's end reads the rows
    run_task(task.id, task.runs)
    ended = service.find_task(task.id)
    assert ended is not None
    assert ended.status == "failed"
    assert "answer could not be read" in str((ended.error or {}).get("message"))
    assert InputRequest.objects.filter(task_id=task.id).count() == 1  # it was asked

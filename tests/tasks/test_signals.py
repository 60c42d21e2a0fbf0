"""The task service's signals (``mcp_tasks.signals``): each sent once per event, after the
transaction commits, never for a change rolled back. The tests commit for real
(``transaction=True``); jobs go to the embedded fake Redis and no worker runs them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.dispatch import Signal

from mcp_tasks import signals
from mcp_tasks.core import task_contract
from mcp_tasks.models import Task, TaskStatus
from mcp_tasks.tasks.state import service
from tests.support.rows import YES_NO, new_task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("embedded_queue")]

ELICIT = {"message": "Proceed?", "requestedSchema": YES_NO}
ALL = {
    "task_created": signals.task_created,
    "task_status_changed": signals.task_status_changed,
    "question_asked": signals.question_asked,
    "question_answered": signals.question_answered,
    "task_finished": signals.task_finished,
}


class Recorder:
    """Every signal received, as ``(name, arguments)``, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._receivers = {name: self._receiver(name) for name in ALL}

    def _receiver(self, name: str) -> Any:
        def receive(sender: Any, signal: Signal, **arguments: Any) -> None:
            assert sender is Task
            self.events.append((name, arguments))

        return receive

    def connect(self) -> None:
        for name, signal in ALL.items():
            signal.connect(self._receivers[name])

    def disconnect(self) -> None:
        for name, signal in ALL.items():
            signal.disconnect(self._receivers[name])

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [arguments for event, arguments in self.events if event == name]


@pytest.fixture
def received() -> Iterator[Recorder]:
    recorder = Recorder()
    recorder.connect()
    yield recorder
    recorder.disconnect()


def ask_round(task: Task, *keys: str) -> None:
    """One round of questions, asked at once (the tool's ``asyncio.gather``)."""
    questions: list[tuple[str, dict[str, Any], str | None]] = [
        ("elicitation/create", {**ELICIT, "message": f"Proceed with {key}?"}, key) for key in keys
    ]
    service.ask_all(task.id, 1, questions, "w")


def accept(task: Task, key: str, **who: Any) -> bool:
    who.setdefault("answered_by", "client")
    response = {"action": "accept", "content": {"ok": True}}
    return service.answer(task.id, key, response, principal_scope=None, **who)


def test_task_created_is_sent_once_after_the_commit(received: Recorder) -> None:
    with transaction.atomic():
        task = new_task()
        assert received.events == []
    assert received.names() == ["task_created"]
    (arguments,) = received.of("task_created")
    assert arguments["task_id"] == task.id and arguments["task"].pk == task.pk


def test_nothing_is_sent_for_changes_rolled_back(received: Recorder) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        task = new_task()
        ask_round(task, "ok")
        service.cancel(task.id, None)
        raise RuntimeError("roll back")
    assert received.events == []
    assert not Task.objects.exists()


def test_a_completed_task_sends_its_status_change_and_its_end(received: Recorder) -> None:
    task = new_task()
    service.begin_run(task.id, "w", 0)
    service.complete(task, {"content": []})
    assert received.names() == ["task_created", "task_status_changed", "task_finished"]
    assert received.of("task_status_changed") == [
        {"task_id": task.id, "old_status": "working", "new_status": "completed"}
    ]
    assert received.of("task_finished") == [{"task_id": task.id, "status": "completed"}]


def test_begin_run_and_progress_send_nothing(received: Recorder) -> None:
    task = new_task()
    service.begin_run(task.id, "w", 0)
    service.report_progress(task, 1, 2, "half")
    assert received.names() == ["task_created"]


def test_a_failed_task_sends_its_status_change_and_its_end(received: Recorder) -> None:
    task = new_task()
    service.fail(task.id, {"code": -32603, "message": "boom"})
    assert received.of("task_status_changed") == [
        {"task_id": task.id, "old_status": "working", "new_status": "failed"}
    ]
    assert received.of("task_finished") == [{"task_id": task.id, "status": "failed"}]


@pytest.mark.cancel
def test_a_cancelled_waiting_task_sends_its_status_change_once(received: Recorder) -> None:
    task = new_task()
    ask_round(task, "ok")
    service.cancel(task.id, None)
    service.cancel(task.id, None)  # already terminal: no event
    assert received.of("task_status_changed")[-1] == {
        "task_id": task.id,
        "old_status": "input_required",
        "new_status": "cancelled",
    }
    assert received.of("task_finished") == [{"task_id": task.id, "status": "cancelled"}]


def test_each_new_question_is_sent_once_and_the_status_change_once(received: Recorder) -> None:
    task = new_task()
    ask_round(task, "a", "b")
    ask_round(task, "a", "b")  # the tool replayed after a resume: nothing new
    assert received.names() == [
        "task_created",
        "task_status_changed",
        "question_asked",
        "question_asked",
    ]
    assert received.of("task_status_changed") == [
        {"task_id": task.id, "old_status": "working", "new_status": "input_required"}
    ]
    asked = received.of("question_asked")
    assert [a["question"].key for a in asked] == ["a", "b"]
    assert all(a["task_id"] == task.id and a["question"].task.pk == task.pk for a in asked)
    assert asked[0]["question"].pk is not None


def test_a_clients_answer_names_the_client(received: Recorder) -> None:
    task = new_task()
    ask_round(task, "ok")
    assert accept(task, "ok") is True
    (arguments,) = received.of("question_answered")
    assert arguments["task_id"] == task.id and arguments["question"].key == "ok"
    assert (arguments["answered_by"], arguments["user"]) == ("client", None)
    assert arguments["question"].response == {"action": "accept", "content": {"ok": True}}
    assert received.names()[-2:] == ["question_answered", "task_status_changed"]
    assert received.of("task_status_changed")[-1]["new_status"] == "working"


def test_a_staff_answer_names_the_user(received: Recorder) -> None:
    alice = User.objects.create_user("alice", is_staff=True)
    task = new_task()
    ask_round(task, "ok")
    accept(task, "ok", answered_by="admin:alice", user=alice)
    (arguments,) = received.of("question_answered")
    assert arguments["answered_by"] == "admin:alice" and arguments["user"] == alice


def test_the_status_changes_only_with_the_last_answer(received: Recorder) -> None:
    task = new_task()
    ask_round(task, "a", "b")
    accept(task, "a")
    assert received.names()[-1] == "question_answered"
    accept(task, "b")
    assert received.names()[-2:] == ["question_answered", "task_status_changed"]


def test_a_second_answer_sends_nothing(received: Recorder) -> None:
    task = new_task()
    ask_round(task, "ok")
    accept(task, "ok")
    count = len(received.events)
    assert accept(task, "ok") is False
    assert len(received.events) == count


def test_an_invalid_answer_sends_nothing(received: Recorder) -> None:
    task = new_task()
    ask_round(task, "ok")
    count = len(received.events)
    with pytest.raises(task_contract.InvalidAnswer):
        service.answer(task.id, "ok", {"action": "bogus"}, principal_scope=None, answered_by="x")
    assert len(received.events) == count


def test_a_withdrawn_question_sends_the_task_back_to_working(received: Recorder) -> None:
    task = new_task()
    ask_round(task, "ok")
    service.withdraw(task.id, "ok")
    assert received.of("task_status_changed")[-1] == {
        "task_id": task.id,
        "old_status": "input_required",
        "new_status": "working",
    }


def test_a_receiver_that_raises_is_logged_and_breaks_nothing(
    received: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(sender: Any, **arguments: Any) -> None:
        raise ValueError("receiver bug")

    signals.task_finished.connect(broken)
    try:
        task = new_task()
        with caplog.at_level(logging.WARNING, logger="mcp_tasks.signals"):
            assert service.complete(task, {"content": []}) is True
    finally:
        signals.task_finished.disconnect(broken)
    assert Task.objects.get(pk=task.pk).status == TaskStatus.COMPLETED
    assert received.of("task_finished") == [{"task_id": task.id, "status": "completed"}]
    assert any(
        "task_finished" in record.getMessage() and task.id in record.getMessage()
        for record in caplog.records
        if record.name == "mcp_tasks.signals"
    )


def test_without_receivers_nothing_waits_for_the_commit() -> None:
    with transaction.atomic():
        signals.send_on_commit(signals.task_finished, task_id="t", status="completed")
        assert transaction.get_connection().run_on_commit == []

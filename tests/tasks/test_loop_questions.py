"""A question asked, and a client's answer recorded, from the event loop
(``mcp_tasks.tasks.state.loop_questions``, PostgreSQL): the rows the ORM's way writes, the
same refusals, and the ORM's way (under the task's lock) wherever the one statement would
not be right."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.db import connection, connections
from django.forms.models import model_to_dict

from mcp_tasks import signals
from mcp_tasks.authoring.approval import StaffAudience
from mcp_tasks.core import groups, task_contract
from mcp_tasks.core.db import db
from mcp_tasks.models import InputRequest, InputRequestStatus, Task, TaskStatus, WaitingFor
from mcp_tasks.protocol.task_shapes import detailed_task
from mcp_tasks.tasks.engine import Engine
from mcp_tasks.tasks.state import service
from mcp_tasks.tasks.state.loop_database import LoopDatabase
from tests.tasks.test_task_rows import make_task

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="psycopg's AsyncConnection: PostgreSQL only"
    ),
    pytest.mark.django_db(transaction=True),
]

ELICIT = "elicitation/create"
NAME = {"message": "Your name? é ✓", "requestedSchema": {"type": "object", "n": [1, 2.5]}}
SCHEMA = {
    "message": "Go on?",
    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}
YES = {"action": "accept", "content": {"ok": True}}
OWNER = "client:alice"
TIMES = {"created_at", "expires_at", "answered_at", "id", "task"}


def on_the_loop(scenario: Callable[[LoopDatabase], Awaitable[Any]]) -> Any:
    """``scenario(database)`` on a fresh event loop and connection; Django's thread's
    connections closed after (signals may have used them)."""

    async def run() -> Any:
        database = LoopDatabase()
        try:
            return await scenario(database)
        finally:
            await database.close()
            await db(connections.close_all)()

    return asyncio.run(run())


def question_rows(task_id: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in model_to_dict(q).items() if k not in TIMES}
        for q in InputRequest.objects.filter(task_id=task_id).order_by("sequence")
    ]


def waiting_task(task_id: str, *questions: tuple[str, dict[str, Any]]) -> Task:
    """A task whose worker holds it while its questions wait (``(key, params)`` each)."""
    service.begin_run(make_task(id=task_id, status=TaskStatus.WORKING).id, "worker-1", 0)
    asked = [(ELICIT, params, key) for key, params in questions]
    service.ask_all(task_id, 1, asked, "worker-1")
    return Task.objects.get(pk=task_id)


def aanswer(task_id: str, key: str, response: Any, scope: str = OWNER, **kwargs: Any) -> Any:
    return on_the_loop(
        lambda database: service.aanswer(database, task_id, key, response, scope, **kwargs)
    )


# -- asking ---------------------------------------------------------------------------------


def test_a_round_asked_from_the_loop_writes_what_the_orm_way_writes() -> None:
    for task_id in ("by-orm", "by-loop"):
        make_task(id=task_id, status=TaskStatus.WORKING)
    round_: list[tuple[str, dict[str, Any], str | None]] = [
        (ELICIT, NAME, "name"),
        ("sampling/createMessage", {"messages": []}, None),
    ]
    before = Task.objects.get(pk="by-loop")
    by_orm = service.ask_all("by-orm", 1, round_, "worker-1")
    by_loop, fields = on_the_loop(
        lambda database: service.aask_all(database, "by-loop", 1, round_, "worker-1")
    )

    assert [q.pk for q in by_loop] == list(
        InputRequest.objects.filter(task_id="by-loop")
        .order_by("sequence")
        .values_list("pk", flat=True)
    )
    stored_orm, stored_loop = question_rows("by-orm"), question_rows("by-loop")
    # Generated keys are random past their method's prefix and number.
    assert stored_loop[1].pop("key").startswith("sample-2-")
    assert stored_orm[1].pop("key").startswith("sample-2-")
    assert stored_loop == stored_orm
    assert stored_loop[0]["key"] == "name" and stored_loop[0]["params"] == NAME
    assert by_loop[0].key == by_orm[0].key == "name"
    assert [service.answer_in(q) for q in by_loop] == [None, None]
    loop_task, orm_task = Task.objects.get(pk="by-loop"), Task.objects.get(pk="by-orm")
    for field in ("status", "status_message", "waiting_worker", "waiting_for"):
        assert getattr(loop_task, field) == getattr(orm_task, field), field
    assert loop_task.status == TaskStatus.INPUT_REQUIRED and loop_task.waiting_worker == "worker-1"
    assert loop_task.status_message == "Waiting for the client's model to answer"
    assert by_loop[0].expires_at is not None and by_loop[0].expires_at > loop_task.updated_at
    # The wake-up that announces the round carries what a waiting tasks/get shows: the
    # task read before it, brought up to date with them, is the task read after it.
    carried = service.with_fields(before, fields)
    assert carried.carried_questions is not None  # no read: the wake-up brought them
    assert detailed_task(carried, asyncio.run(Engine().questions(carried))) == detailed_task(
        loop_task, service.outstanding_requests(loop_task)
    )


def test_a_replayed_round_returns_its_recorded_answers_and_writes_nothing_new() -> None:
    waiting_task("t", ("go", SCHEMA))
    assert service.answer("t", "go", YES, principal_scope=OWNER, answered_by="client")
    replayed, fields = on_the_loop(
        lambda database: service.aask_all(database, "t", 1, [(ELICIT, SCHEMA, "go")], "w")
    )
    assert [service.answer_in(q) for q in replayed] == [YES] and fields is None
    assert InputRequest.objects.filter(task_id="t").count() == 1


def test_a_replay_that_asks_differently_is_refused_as_on_the_orm_way() -> None:
    waiting_task("t", ("go", SCHEMA))
    with pytest.raises(service.ReplayMismatch, match="asked question 1 differently"):
        on_the_loop(
            lambda database: service.aask_all(database, "t", 1, [(ELICIT, NAME, "go")], "w")
        )


def test_a_key_used_before_gets_a_suffix_as_on_the_orm_way() -> None:
    waiting_task("t", ("go", SCHEMA))
    service.answer("t", "go", YES, principal_scope=OWNER, answered_by="client")
    (again,), _ = on_the_loop(
        lambda database: service.aask_all(database, "t", 2, [(ELICIT, SCHEMA, "go")], "worker-1")
    )
    assert again.key.startswith("go-2-") and again.sequence == 2
    assert Task.objects.get(pk="t").status == TaskStatus.INPUT_REQUIRED


def test_a_round_for_a_task_that_ended_is_refused_and_writes_nothing() -> None:
    make_task(id="t", status=TaskStatus.CANCELLED)
    with pytest.raises(service.TaskEnded):
        on_the_loop(lambda database: service.aask_all(database, "t", 1, [(ELICIT, NAME, "k")], "w"))
    assert not InputRequest.objects.filter(task_id="t").exists()
    assert Task.objects.get(pk="t").status == TaskStatus.CANCELLED


def test_staff_questions_go_the_orm_way_and_leave_the_task_working() -> None:
    make_task(id="t", status=TaskStatus.WORKING)
    staff = StaffAudience(permission="mcp_tasks.answer_inputrequest", group="", timeout=None)
    (asked,), fields = on_the_loop(
        lambda database: service.aask_all(database, "t", 1, [(ELICIT, NAME, "k", staff)], "w")
    )
    assert asked.for_staff and fields is None  # the client sees no question
    task = Task.objects.get(pk="t")
    assert task.status == TaskStatus.WORKING and task.waiting_for == WaitingFor.STAFF


def test_receivers_hear_of_a_round_asked_from_the_loop() -> None:
    make_task(id="t", status=TaskStatus.WORKING)
    heard: list[tuple[str, Any]] = []

    def asked(sender: Any, task_id: str, question: InputRequest, **kwargs: Any) -> None:
        heard.append(("asked", (task_id, question.key, question.pk is not None)))

    def changed(sender: Any, task_id: str, old_status: str, new_status: str, **kw: Any) -> None:
        heard.append(("status", (task_id, old_status, new_status)))

    signals.question_asked.connect(asked, weak=False)
    signals.task_status_changed.connect(changed, weak=False)
    try:
        on_the_loop(lambda database: service.aask_all(database, "t", 1, [(ELICIT, NAME, "k")], "w"))
    finally:
        signals.question_asked.disconnect(asked)
        signals.task_status_changed.disconnect(changed)
    assert sorted(heard) == [
        ("asked", ("t", "k", True)),
        ("status", ("t", TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED)),
    ]


# -- answering ------------------------------------------------------------------------------


def test_an_answer_to_the_one_question_a_held_task_waits_for_resumes_it() -> None:
    runs = waiting_task("t", ("go", SCHEMA)).runs
    assert aanswer("t", "go", YES) is True
    question = InputRequest.objects.get(task_id="t", key="go")
    assert question.status == InputRequestStatus.ANSWERED and question.response == YES
    assert question.answered_by == "client" and question.answered_at is not None
    task = Task.objects.get(pk="t")
    # The worker holding it goes on: no new job (``runs`` unchanged), nothing for staff.
    assert (task.status, task.status_message, task.runs) == (TaskStatus.WORKING, "Answered", runs)
    assert task.waiting_for == WaitingFor.NOTHING
    assert aanswer("t", "go", {"action": "decline"}) is False  # the first answer won
    assert InputRequest.objects.get(task_id="t", key="go").response == YES


def test_the_worker_holding_the_task_is_woken_with_the_answer() -> None:
    waiting_task("t", ("go", SCHEMA))

    async def answered_and_heard(database: LoopDatabase) -> dict[str, Any]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(groups.worker_group("worker-1"), channel)
        try:
            assert await service.aanswer(database, "t", "go", YES, OWNER)
            return dict(await asyncio.wait_for(layer.receive(channel), 5))
        finally:
            await layer.group_discard(groups.worker_group("worker-1"), channel)

    message = on_the_loop(answered_and_heard)
    assert message["task_id"] == "t" and message["status"] == TaskStatus.WORKING
    assert message["answers"] == {"go": YES}


def test_answers_that_do_not_fit_or_do_not_belong_are_refused_and_record_nothing() -> None:
    waiting_task("t", ("go", SCHEMA))
    with pytest.raises(task_contract.InvalidAnswer, match="'maybe' is not of type 'boolean'"):
        aanswer("t", "go", {"action": "accept", "content": {"ok": "maybe"}})
    assert aanswer("t", "nope", YES) is False  # no such question
    assert aanswer("t", "go", YES, scope="client:mallory") is False
    with pytest.raises(task_contract.TaskNotFound):
        aanswer("t", "go", YES, scope="client:mallory", not_found_raises=True)
    with pytest.raises(task_contract.TaskNotFound):
        aanswer("missing", "go", YES, not_found_raises=True)
    assert InputRequest.objects.get(task_id="t").status == InputRequestStatus.PENDING
    assert Task.objects.get(pk="t").status == TaskStatus.INPUT_REQUIRED


def test_the_client_cannot_answer_a_staff_question() -> None:
    make_task(id="t", status=TaskStatus.WORKING)
    staff = StaffAudience(permission="mcp_tasks.answer_inputrequest", group="", timeout=None)
    service.ask_all("t", 1, [(ELICIT, SCHEMA, "staff", staff)], "w")
    assert aanswer("t", "staff", YES) is False
    assert InputRequest.objects.get(task_id="t").status == InputRequestStatus.PENDING


def test_with_two_questions_waiting_the_first_answer_leaves_the_task_asking() -> None:
    waiting_task("t", ("a", SCHEMA), ("b", SCHEMA))
    assert aanswer("t", "a", YES) is True
    assert Task.objects.get(pk="t").status == TaskStatus.INPUT_REQUIRED
    assert aanswer("t", "b", YES) is True
    task = Task.objects.get(pk="t")
    assert (task.status, task.status_message) == (TaskStatus.WORKING, "Answered")


def test_a_task_that_changed_between_the_read_and_the_write_goes_the_orm_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another question asked just after the answer's read: the one statement writes
    nothing, and the ORM's way records the answer and leaves the task asking."""
    waiting_task("t", ("a", SCHEMA))
    fetch_one = LoopDatabase.fetch_one
    reads = 0

    async def meanwhile(self: LoopDatabase, sql: str, params: Any) -> Any:
        nonlocal reads
        result = await fetch_one(self, sql, params)
        reads += 1
        if reads == 1:  # the read: the tool asks its next question now
            await db(service.ask_all)("t", 2, [(ELICIT, NAME, "b")], "worker-1")
        return result

    monkeypatch.setattr(LoopDatabase, "fetch_one", meanwhile)
    assert aanswer("t", "a", YES) is True
    assert reads == 2
    statuses = dict(InputRequest.objects.filter(task_id="t").values_list("key", "status"))
    assert statuses == {"a": InputRequestStatus.ANSWERED, "b": InputRequestStatus.PENDING}
    task = Task.objects.get(pk="t")
    assert task.status == TaskStatus.INPUT_REQUIRED and task.status_message == NAME["message"]


def test_receivers_hear_of_an_answer_recorded_from_the_loop() -> None:
    waiting_task("t", ("go", SCHEMA))
    heard: list[tuple[str, Any]] = []

    def answered(sender: Any, task_id: str, question: InputRequest, **kwargs: Any) -> None:
        heard.append(("answered", (task_id, question.key, question.response, kwargs["user"])))

    def changed(sender: Any, task_id: str, old_status: str, new_status: str, **kw: Any) -> None:
        heard.append(("status", (task_id, old_status, new_status)))

    signals.question_answered.connect(answered, weak=False)
    signals.task_status_changed.connect(changed, weak=False)
    try:
        assert aanswer("t", "go", YES)
    finally:
        signals.question_answered.disconnect(answered)
        signals.task_status_changed.disconnect(changed)
    assert sorted(heard) == [
        ("answered", ("t", "go", YES, None)),
        ("status", ("t", TaskStatus.INPUT_REQUIRED, TaskStatus.WORKING)),
    ]


def test_with_no_receiver_a_question_and_its_answer_make_no_hop_to_djangos_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The common case is one statement each, sent from the loop: no hop to Django's thread
    (with no signal receiver and no live admin page open)."""
    from mcp_tasks.admin import events as admin_events
    from mcp_tasks.core import db as db_module

    make_task(id="t", status=TaskStatus.WORKING)
    hops: list[Any] = []
    in_thread = db_module._in_thread

    async def counted(loop: Any, fn: Any, args: Any, kwargs: Any) -> Any:
        hops.append(fn)
        return await in_thread(loop, fn, args, kwargs)

    monkeypatch.setattr(admin_events, "may_announce", lambda: False)
    monkeypatch.setattr(db_module, "_in_thread", counted)

    async def ask_and_answer(database: LoopDatabase) -> bool:
        await service.aask_all(database, "t", 1, [(ELICIT, SCHEMA, "go")], "worker-1")
        return await service.aanswer(database, "t", "go", YES, OWNER)

    assert on_the_loop(ask_and_answer) is True
    assert hops == [connections.close_all]  # on_the_loop's own, at the end
    assert Task.objects.get(pk="t").status == TaskStatus.WORKING


def test_a_write_sent_twice_after_its_reply_was_lost_records_the_answer_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The connection broke after the write committed, and it was sent again (as
    ``LoopDatabase`` does): the second finds the task changed, writes nothing, and the
    ORM's way finds the question answered. The answer and the resumed task stand."""
    waiting_task("t", ("go", SCHEMA))
    fetch_one = LoopDatabase.fetch_one
    sent: list[Any] = []

    async def twice(self: LoopDatabase, sql: str, params: Any) -> Any:
        result = await fetch_one(self, sql, params)
        if sql.startswith("WITH"):  # the write: its reply lost, sent again
            sent.append(result)
            result = await fetch_one(self, sql, params)
            sent.append(result)
        return result

    monkeypatch.setattr(LoopDatabase, "fetch_one", twice)
    aanswer("t", "go", YES)
    assert [recorded for _, (_, recorded) in sent] == [1, 0]
    (question,) = InputRequest.objects.filter(task_id="t")
    assert question.status == InputRequestStatus.ANSWERED and question.response == YES
    task = Task.objects.get(pk="t")
    assert (task.status, task.status_message) == (TaskStatus.WORKING, "Answered")

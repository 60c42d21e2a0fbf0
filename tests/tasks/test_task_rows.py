"""The hot-path SQL of ``mcp_tasks.tasks.state.rows`` reads and writes rows exactly as the ORM does
(on SQLite and on PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.forms.models import model_to_dict
from django.utils import timezone

from mcp_tasks.core import task_contract
from mcp_tasks.core.db import db
from mcp_tasks.models import (
    Audience,
    InputRequest,
    InputRequestStatus,
    Task,
    TaskSnapshot,
    TaskStatus,
)
from mcp_tasks.tasks.state import changes, rows, service
from mcp_tasks.tasks.state.loop_database import LoopDatabase
from tests.support.rows import new_record

pytestmark = pytest.mark.django_db

RESULT = {"content": [{"type": "text", "text": "é ✓ \\n"}], "structuredContent": {"a": [1, 2.5]}}


def make_task(**fields: Any) -> Task:
    now = timezone.now()
    task = Task.objects.create(
        id=fields.pop("id", "task-1"),
        principal_scope="client:alice",
        tool_name="trivial_task",
        arguments={"n": 1, "nested": {"x": [True, None]}},
        origin_request_id=42,
        ttl_ms=60_000,
        expires_at=now + timedelta(minutes=1),
        created_at=now,
        updated_at=now,
        **fields,
    )
    TaskSnapshot.objects.create(
        task=task,
        era="modern",
        protocol_version="2026-07-28",
        client_info={"name": "unit"},
        client_capabilities={"extensions": {}},
        progress_token="p-1",
        prior_answers={"prepared": {"k": "v"}},
    )
    return task


def test_task_of_reads_the_row_as_the_orm_does() -> None:
    make_task()
    read = rows.task_of("task-1", "client:alice")
    assert read is not None
    assert model_to_dict(read) == model_to_dict(Task.objects.get(pk="task-1"))
    assert read.created_at == Task.objects.get(pk="task-1").created_at
    assert read.created_at.tzinfo is not None


def test_task_of_another_principal_or_an_unknown_id_is_none() -> None:
    make_task()
    assert rows.task_of("task-1", "client:mallory") is None
    assert rows.task_of("no-such-task", "client:alice") is None


def test_locked_task_checks_the_owner_only_when_asked() -> None:
    make_task()
    with transaction.atomic():
        assert rows.locked_task("task-1", "client:mallory") is None
        owned = rows.locked_task("task-1", "client:alice")
        assert owned is not None and owned.pk == "task-1"
        anyone = rows.locked_task("task-1")
        assert anyone is not None and anyone.principal_scope == "client:alice"


def test_a_task_is_found_by_its_primary_key_whatever_its_owner_has() -> None:
    """One principal with many tasks: the lookup reads one row (no scan of its tasks)."""
    for number in range(300):
        make_task(id=f"task-{number}")
    explain = "EXPLAIN" if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN"
    with connection.cursor() as cursor:
        cursor.execute(f"{explain} {rows._task_sql('default', False)}", ["task-7"])
        plan = " ".join(str(line[-1]) for line in cursor.fetchall()).lower()
    assert "principal_scope" not in plan
    # PostgreSQL: the primary key or its ``_like`` twin on ``id``; SQLite: its autoindex.
    assert any(index in plan for index in ("task_pkey", "task_id_", "autoindex")), plan


def test_task_with_snapshot_loads_both_rows() -> None:
    make_task()
    with_snapshot = rows.task_with_snapshot("task-1")
    assert with_snapshot is not None
    stored = TaskSnapshot.objects.get(pk="task-1")
    assert model_to_dict(with_snapshot.snapshot) == model_to_dict(stored)
    assert with_snapshot.snapshot.progress_token == "p-1"
    assert rows.task_with_snapshot("no-such-task") is None


def test_update_task_writes_values_as_the_orm_does_and_only_when_the_condition_holds() -> None:
    make_task()
    now = timezone.now()
    changes = {"status": "completed", "result": RESULT, "error": None, "finished_at": now}
    assert rows.update_task("task-1", {"status": "failed"}, changes) is False
    assert Task.objects.get(pk="task-1").status == "working"
    assert rows.update_task("task-1", {"status": "working"}, changes) is True
    stored = Task.objects.get(pk="task-1")
    assert (stored.status, stored.result, stored.error) == ("completed", RESULT, None)
    assert stored.finished_at == now


def test_insert_stores_rows_the_orm_reads_back_unchanged() -> None:
    now = timezone.now()
    task = Task(
        id="task-2",
        principal_scope="anonymous",
        tool_name="trivial_task",
        arguments={"n": 2, "text": "é"},
        origin_request_id="call-9",
        created_at=now,
        updated_at=now,
    )
    snapshot = TaskSnapshot(task=task, era="legacy", protocol_version="2025-11-25")
    rows.insert(task, snapshot)
    assert not task._state.adding
    stored = Task.objects.get(pk="task-2")
    assert model_to_dict(stored) == model_to_dict(task)
    assert model_to_dict(TaskSnapshot.objects.get(pk="task-2")) == model_to_dict(snapshot)


def new_pair(task_id: str) -> tuple[Task, TaskSnapshot]:
    now = timezone.now()
    task = Task(
        id=task_id,
        principal_scope="anonymous",
        tool_name="trivial_task",
        arguments={"text": "é"},
        created_at=now,
        updated_at=now,
    )
    return task, TaskSnapshot(task=task, era="modern", protocol_version="2026-07-28")


def test_insert_task_stores_the_task_and_its_snapshot() -> None:
    task, snapshot = new_pair("task-5")
    rows.insert_task(task, snapshot)
    assert not task._state.adding and not snapshot._state.adding
    assert model_to_dict(Task.objects.get(pk="task-5")) == model_to_dict(task)
    assert model_to_dict(TaskSnapshot.objects.get(pk="task-5")) == model_to_dict(snapshot)


def test_insert_task_stores_neither_when_the_snapshot_fails() -> None:
    task, snapshot = new_pair("task-6")
    snapshot.protocol_version = None  # type: ignore[assignment]  # NOT NULL
    with pytest.raises(IntegrityError), transaction.atomic():
        rows.insert_task(task, snapshot)
    assert not Task.objects.filter(pk="task-6").exists()


def test_claim_task_changes_and_reads_the_task_with_its_snapshot_when_the_condition_holds() -> None:
    make_task()
    now = timezone.now()
    changes = {"worker_name": "w", "heartbeat_at": now, "updated_at": now}
    assert rows.claim_task("task-1", {"status": "working", "runs": 1}, changes) is None
    assert Task.objects.get(pk="task-1").worker_name == ""
    claimed = rows.claim_task("task-1", {"status": "working", "runs": 0}, changes)
    assert claimed is not None
    assert model_to_dict(claimed) == model_to_dict(Task.objects.get(pk="task-1"))
    assert claimed.worker_name == "w" and claimed.heartbeat_at == now
    assert model_to_dict(claimed.snapshot) == model_to_dict(TaskSnapshot.objects.get(pk="task-1"))
    assert rows.claim_task("no-such-task", {"status": "working"}, changes) is None


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements: PostgreSQL")
def test_hot_statements_bind_on_the_server_so_postgresql_can_prepare_them() -> None:
    """With ``OPTIONS["prepare_threshold"]`` (the example project sets it) psycopg prepares
    the per-task statements: they must bind on the server (a client-binding cursor sends
    new SQL text each time, which is never prepared)."""
    make_task()
    connection.ensure_connection()
    raw = connection.connection
    threshold = raw.prepare_threshold
    raw.prepare_threshold = 0  # prepare on the first run
    try:
        assert rows.task_of("task-1", "client:alice") is not None
        assert rows.task_with_snapshot("task-1") is not None
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [statement for (statement,) in cursor.fetchall()]
    finally:
        raw.prepare_threshold = threshold
    on_tasks = [s for s in prepared if Task._meta.db_table in s]
    assert any(TaskSnapshot._meta.db_table not in s for s in on_tasks), prepared  # task_of
    assert any(TaskSnapshot._meta.db_table in s for s in on_tasks), prepared  # with snapshot


# -- a task worker's own statements, sent from its event loop (PostgreSQL) --------------------

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="psycopg's AsyncConnection: PostgreSQL only"
)
TIMES = {"heartbeat_at", "updated_at", "started_at", "finished_at", "created_at", "expires_at"}


def _fields(task: Task) -> dict[str, Any]:
    return {k: v for k, v in model_to_dict(task).items() if k not in TIMES | {"id"}}


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_and_a_result_sent_from_the_event_loop_write_what_the_orm_path_writes() -> None:
    for task_id in ("by-orm", "by-loop"):
        make_task(id=task_id, status=TaskStatus.WORKING)

    async def from_the_loop() -> tuple[Task | None, bool, Task | None]:
        database = LoopDatabase()
        try:
            claimed = await service.abegin_run(database, "by-loop", "worker-1", 0)
            assert claimed is not None
            held = await service.abegin_run(database, "by-loop", "worker-2", 0)
            assert held is None  # a job delivered twice: the task is held
            completed = await service.acomplete(database, claimed, RESULT)
            again = await service.abegin_run(database, "by-loop", "worker-1", 0)
            return claimed, completed, again
        finally:
            await database.close()

    by_orm = service.begin_run("by-orm", "worker-1", 0)
    claimed, completed, claimed_again = asyncio.run(from_the_loop())
    assert by_orm is not None and claimed is not None
    assert _fields(claimed) == _fields(by_orm)
    assert claimed.started_at is not None and claimed.started_at.tzinfo is not None
    assert model_to_dict(claimed.snapshot) | {"task": "-"} == model_to_dict(by_orm.snapshot) | {
        "task": "-"
    }
    assert service.complete(by_orm, RESULT) and completed
    assert claimed_again is None  # completed: nothing to claim
    stored = {task.id: task for task in Task.objects.all()}
    assert _fields(stored["by-loop"]) == _fields(stored["by-orm"])
    assert stored["by-loop"].status == TaskStatus.COMPLETED
    assert stored["by-loop"].result == RESULT and stored["by-loop"].finished_at is not None


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_result_from_the_event_loop_goes_to_django_only_for_a_listener(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no receiver of the status signals and no live admin page open, a completion sent
    from the worker's loop makes no hop to Django's thread; with a receiver, it is sent."""
    from mcp_tasks import signals
    from mcp_tasks.admin import events as admin_events
    from mcp_tasks.core import db as db_module

    hops: list[Any] = []
    in_thread = db_module._in_thread

    async def counted(loop: Any, fn: Any, args: Any, kwargs: Any) -> Any:
        hops.append(fn)
        return await in_thread(loop, fn, args, kwargs)

    monkeypatch.setattr(db_module, "_in_thread", counted)
    monkeypatch.setattr(admin_events, "may_announce", lambda: False)  # no live admin page open
    for task_id in ("quiet", "heard"):
        make_task(id=task_id, status=TaskStatus.WORKING)
    finished: list[tuple[str, str]] = []

    def receiver(sender: Any, task_id: str, status: str, **kwargs: Any) -> None:
        finished.append((task_id, status))

    async def complete(task_id: str) -> bool:
        database = LoopDatabase()
        try:
            return await service.acomplete(database, Task(id=task_id), RESULT)
        finally:
            await database.close()

    assert asyncio.run(complete("quiet"))
    assert hops == [] and finished == []
    signals.task_finished.connect(receiver, weak=False)
    try:
        assert asyncio.run(complete("heard"))
    finally:
        signals.task_finished.disconnect(receiver)
        _in_loop(
            lambda: asyncio.sleep(0)
        )  # the signal was sent from Django's thread: close its connection
    assert hops[0] is changes.status_changed and finished == [("heard", TaskStatus.COMPLETED)]


@pytest.mark.cancel
@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_result_for_a_task_no_longer_working_changes_nothing() -> None:
    make_task(id="cancelled", status=TaskStatus.CANCELLED)

    async def from_the_loop() -> bool:
        database = LoopDatabase()
        try:
            return await service.acomplete(database, Task(id="cancelled"), RESULT)
        finally:
            await database.close()
            await db(connections.close_all)()  # the fallback ran in Django's thread

    assert asyncio.run(from_the_loop()) is False
    task = Task.objects.get(pk="cancelled")
    assert task.status == TaskStatus.CANCELLED and task.result is None


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_broken_connection_is_replaced_and_the_statement_sent_again() -> None:
    make_task(id="task-1", status=TaskStatus.WORKING)
    import psycopg

    params = dict(connection.get_connection_params())
    params.pop("cursor_factory", None)

    async def scenario() -> tuple[int, int, Task | None]:
        database = LoopDatabase()
        try:
            _, (before,) = await database.fetch_one("SELECT pg_backend_pid()", [])
            with psycopg.connect(**params, autocommit=True) as other:  # the server restarts
                other.execute("SELECT pg_terminate_backend(%s)", [before])
            claimed = await service.abegin_run(database, "task-1", "worker-1", 0)
            _, (after,) = await database.fetch_one("SELECT pg_backend_pid()", [])
            return before, after, claimed
        finally:
            await database.close()

    before, after, claimed = asyncio.run(scenario())
    assert after != before
    assert claimed is not None and claimed.worker_name == "worker-1"


def _new(**overrides: Any) -> task_contract.NewTask:
    fields: dict[str, Any] = {
        "arguments": {"n": 1, "nested": {"x": [True, None]}},
        "principal_scope": "client:alice",
        "era": "modern",
        "protocol_version": "2026-07-28",
        "client_info": {"name": "unit"},
        "client_capabilities": {"extensions": {}},
        "origin_request_id": 42,
        "progress_token": "p-1",
        "prepared": {"k": "v"},
        "access_token": {"token": "t", "client_id": "c", "scopes": [], "claims": {}},
    }
    return new_record("trivial_task", **(fields | overrides))


def _in_loop(scenario: Any) -> Any:
    """Run ``scenario()`` on a fresh event loop, then close what it opened in Django's
    thread."""

    async def run() -> Any:
        try:
            return await scenario()
        finally:
            await db(connections.close_all)()

    return asyncio.run(run())


@postgres_only
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_task_created_from_the_event_loop_is_the_one_the_orm_path_creates() -> None:
    from mcp_tasks.tasks.queues import queue

    by_orm = service.create_task(_new())
    by_loop = _in_loop(lambda: service.acreate_task(_new()))
    assert LoopDatabase.available()
    stored = {task.id: task for task in Task.objects.select_related("snapshot")}
    assert set(stored) == {by_orm.id, by_loop.id}
    loop_fields, orm_fields = (_fields(stored[i]) for i in (by_loop.id, by_orm.id))
    assert loop_fields.pop("session_id") != orm_fields.pop("session_id")  # each its own
    assert loop_fields == orm_fields
    snapshots = [model_to_dict(stored[i].snapshot) | {"task": "-", "sealed": "-"} for i in stored]
    assert snapshots[0] == snapshots[1]
    assert service.snapshot_secrets(stored[by_loop.id])["access_token"]["token"] == "t"
    assert queue.job_exists(by_loop) and queue.job_exists(by_orm)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_task_read_from_the_event_loop_is_its_owners_only() -> None:
    task = make_task(id="task-1", status=TaskStatus.WORKING)

    async def reads() -> list[Any]:
        found = await service.aget_task("task-1", "client:alice")
        missing = []
        for task_id, scope in (("task-1", "client:bob"), ("nope", "client:alice"), (7, "x")):
            with pytest.raises(task_contract.TaskNotFound):
                await service.aget_task(task_id, scope)
            missing.append(task_id)
        return [found, missing]

    found, missing = _in_loop(reads)
    assert model_to_dict(found) == model_to_dict(Task.objects.get(pk=task.pk))
    assert missing == ["task-1", "nope", 7]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_times_read_from_the_event_loop_are_right_whatever_the_servers_time_zone() -> None:
    """A server (or database) whose sessions default to another time zone than Django's:
    the loop's connection sets Django's, as Django's own connections do, so each time is
    the instant stored, not one shifted by the zone's offset."""
    task = make_task(id="task-1", status=TaskStatus.WORKING)
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER DATABASE \"{name}\" SET timezone TO 'America/New_York'")
    try:
        read = _in_loop(lambda: service.aget_task("task-1", "client:alice"))
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" RESET timezone')
    assert {field: getattr(read, field) for field in TIMES} == {
        field: getattr(task, field) for field in TIMES
    }
    # Labelled as Django labels them (its loader's zone; psycopg's own loader in a UTC session).
    assert {getattr(read, field).tzinfo for field in TIMES if getattr(read, field)} == {
        connection.timezone
    }


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_task_read_from_the_event_loop_that_lost_its_worker_fails_as_the_orm_path_does() -> None:
    """A working task whose worker stopped beating is failed by the read (Django's thread)."""
    make_task(
        id="task-1", status=TaskStatus.WORKING, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    read = _in_loop(lambda: service.aget_task("task-1", "client:alice"))
    assert read.status == TaskStatus.FAILED
    assert "stopped unexpectedly" in read.status_message


async def under_way() -> None:
    """Until a call just made is on its way to the database (its task ran, then the
    batch's)."""
    for _ in range(2):
        await asyncio.sleep(0)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_statements_made_while_one_is_under_way_go_together_in_one_transaction() -> None:
    """The first goes at once; those made meanwhile share the next round trip and its
    transaction; each caller gets its own result, in its own order."""
    sql = "SELECT txid_current(), %s::int"

    async def scenario() -> list[tuple[int, Any]]:
        database = LoopDatabase()
        try:
            await database.fetch_one("SELECT 1", [])  # connected
            first = asyncio.ensure_future(database.fetch_one(sql, [0]))
            await under_way()
            rest = [asyncio.ensure_future(database.fetch_one(sql, [n])) for n in range(1, 5)]
            return list(await asyncio.gather(first, *rest))
        finally:
            await database.close()

    results = asyncio.run(scenario())
    assert [row[1] for _, row in results] == [0, 1, 2, 3, 4]
    transactions = [row[0] for _, row in results]
    assert transactions[0] != transactions[1]  # alone, at once
    assert len(set(transactions[1:])) == 1  # the rest together
    assert all(count == 1 for count, _ in results)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_waiting_questions_read_from_the_loop_are_those_the_orm_reads() -> None:
    """A held ``tasks/get`` reads a task's waiting questions from the event loop: the same
    questions, in the same order, with the same params, as through the ORM (staff and
    answered questions left out)."""
    task = make_task(id="asking", status=TaskStatus.INPUT_REQUIRED)
    params = {"message": "Name? é ✓", "requestedSchema": {"type": "object", "n": [1, 2.5]}}
    for key, sequence, extra in (
        ("elicit-2", 2, {}),
        ("elicit-1", 1, {}),
        ("sample-3", 3, {"method": "sampling/createMessage", "params": {}}),
        ("staff-4", 4, {"audience": Audience.STAFF}),
        ("elicit-0", 0, {"status": InputRequestStatus.ANSWERED}),
    ):
        InputRequest.objects.create(
            task=task,
            key=key,
            sequence=sequence,
            **{"method": "elicitation/create", "params": params, **extra},
        )
    InputRequest.objects.create(
        task=make_task(id="other"), key="elicit-1", sequence=1, method="elicitation/create"
    )

    through_orm = [(q.key, q.method, q.params) for q in service.outstanding_requests(task)]
    from_loop = [(q.key, q.method, q.params) for q in asyncio.run(_questions_of("asking"))]
    assert from_loop == through_orm
    assert [key for key, _, _ in from_loop] == ["elicit-1", "elicit-2", "sample-3"]
    assert asyncio.run(_questions_of("nobody")) == []


async def _questions_of(task_id: str) -> list[rows.WaitingQuestion]:
    database = LoopDatabase()
    try:
        return await rows.awaiting_questions(database, task_id)
    finally:
        await database.close()


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_batch_with_a_failing_statement_is_sent_again_one_by_one() -> None:
    """A statement the database refuses fails its own call; the others of its batch still
    commit (the batch was one transaction: it is sent again statement by statement)."""
    for task_id in ("a", "b", "c"):
        make_task(id=task_id, status=TaskStatus.WORKING)
    sql = "UPDATE mcp_tasks_task SET progress = 1.0 / %s::int WHERE id = %s"

    async def scenario() -> list[Any]:
        database = LoopDatabase()
        try:
            first = asyncio.ensure_future(database.fetch_one(sql, [1, "a"]))
            await under_way()
            batch = [database.fetch_one(sql, [0, "b"]), database.fetch_one(sql, [2, "c"])]
            return list(await asyncio.gather(first, *batch, return_exceptions=True))
        finally:
            await database.close()

    import psycopg

    first, refused, updated = asyncio.run(scenario())
    assert first == (1, None) and updated == (1, None)
    assert isinstance(refused, psycopg.errors.DivisionByZero)
    progress = dict(Task.objects.values_list("id", "progress"))
    assert progress == {"a": 1.0, "b": None, "c": 0.5}


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_kept_connection_its_server_closed_is_replaced_before_the_next_call() -> None:
    """A server that restarted, crashed or was replaced at the same address closed the
    kept connection of mcp_tasks' ORM thread: the next call connects afresh instead of
    failing (and answering an error) on it."""
    import psycopg

    def backend_pid() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return int(cursor.fetchone()[0])

    params = dict(connection.get_connection_params())
    params.pop("cursor_factory", None)

    async def scenario() -> tuple[int, int]:
        first = await db(backend_pid)()
        with psycopg.connect(**params, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", [first])
            while other.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [first]
            ).fetchone() != (0,):
                await asyncio.sleep(0.02)
        try:
            return first, await db(backend_pid)()  # at once: the connection was used just now
        finally:
            await db(connections.close_all)()

    first, second = asyncio.run(scenario())
    assert second != first

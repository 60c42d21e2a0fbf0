"""The task service (``mcp_tasks.tasks.state.service``) and the snapshot crypto, in process with
the ORM. Jobs go to the embedded in-process fake Redis (``EMBEDDED_WORKER``), whose queue
the tests inspect; no worker runs them here (the live tests do)."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from rq.job import Job, JobStatus

from mcp_tasks.core import task_contract
from mcp_tasks.models import (
    InputRequest,
    InputRequestStatus,
    Task,
    TaskLogEntry,
    TaskSnapshot,
    TaskStatus,
)
from mcp_tasks.tasks.queues import fair_queue, queue
from mcp_tasks.tasks.state import crypto, outbox, service
from tests.support import rows as support_rows
from tests.support.rows import new_record

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("embedded_queue")]

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
ELICIT = {"message": "Proceed?", "requestedSchema": SCHEMA}


#: A task of client-alice's token (``tool_name=`` and any other field may be overridden).
new_task = functools.partial(
    support_rows.new_task,
    "trivial_task",
    arguments={"n": 1},
    principal_scope="client:client-alice:alice",
    client_info={"name": "unit", "version": "1"},
    client_capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}},
    origin_request_id="call-1",
    access_token={
        "token": "valid-alice",
        "client_id": "client-alice",
        "scopes": [],
        "expires_at": None,
        "claims": {},
    },
    headers={"x-request-id": "rid-1"},
)


def queued_job_ids() -> list[str]:
    """The jobs waiting in the fair queue of the task queue."""
    return fair_queue.job_ids(queue.get_queue("mcp_tasks").connection, "mcp_tasks")


def age(task: Task, seconds: float, **fields: Any) -> None:
    """Move the task's timestamps ``seconds`` into the past."""
    past = timezone.now() - timedelta(seconds=seconds)
    Task.objects.filter(pk=task.pk).update(**dict.fromkeys(fields or {"updated_at": None}, past))


# -- creating and reading ---------------------------------------------------------------------


def test_create_task_records_the_task_and_its_snapshot() -> None:
    task = new_task()
    stored = Task.objects.get(pk=task.pk)
    assert stored.status == TaskStatus.WORKING
    assert stored.origin_request_id == "call-1"
    assert stored.session_id  # never empty, even without a legacy session
    snapshot = TaskSnapshot.objects.get(task=task)
    assert snapshot.protocol_version == "2026-07-28"
    assert snapshot.client_capabilities == {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def test_create_task_records_the_client_of_the_token() -> None:
    assert new_task().client_id == "client-alice"
    assert new_task(access_token=None, principal_scope="user:3").client_id == ""


def test_create_task_queues_a_job_whose_id_derives_from_the_task_id() -> None:
    task = new_task()
    assert queued_job_ids() == [f"mcp_tasks-{task.id}-0"]


# -- quotas of active tasks -----------------------------------------------------------------

QUOTA = {"EMBEDDED_WORKER": True, "MAX_ACTIVE_TASKS": 2}


def _written() -> tuple[int, int, list[str]]:
    return Task.objects.count(), TaskSnapshot.objects.count(), queued_job_ids()


@override_settings(MCP_TASKS=QUOTA)
def test_a_task_past_the_callers_quota_is_refused_and_nothing_is_written() -> None:
    new_task()
    new_task()
    before = _written()
    with pytest.raises(task_contract.QuotaExceeded) as refused:
        new_task()
    assert (refused.value.setting, refused.value.limit) == ("MAX_ACTIVE_TASKS", 2)
    assert "MAX_ACTIVE_TASKS = 2" in str(refused.value)
    assert _written() == before


@override_settings(MCP_TASKS=QUOTA)
def test_the_quota_of_one_caller_does_not_touch_another() -> None:
    new_task()
    new_task()
    other = new_task(principal_scope="user:2", access_token=None)
    assert Task.objects.filter(principal_scope="user:2").get() == other


@override_settings(MCP_TASKS=QUOTA)
def test_a_task_waiting_for_an_answer_counts_and_a_finished_one_frees_its_place() -> None:
    first, second = new_task(), new_task()
    service.begin_run(first.id, "w", 0)
    service.ask_all(first.id, 1, [("elicitation/create", ELICIT, "ok")], "w")
    with pytest.raises(task_contract.QuotaExceeded):
        new_task()
    service.cancel(second.id, second.principal_scope)
    assert new_task().status == TaskStatus.WORKING


@override_settings(MCP_TASKS={**QUOTA, "MAX_ACTIVE_TASKS": None, "MAX_ACTIVE_TASKS_PER_CLIENT": 1})
def test_the_quota_of_an_oauth_client_counts_its_tasks_across_its_users() -> None:
    new_task()  # client-alice's token, for alice
    with pytest.raises(task_contract.QuotaExceeded) as refused:
        new_task(principal_scope="client:client-alice:bob")
    assert refused.value.setting == "MAX_ACTIVE_TASKS_PER_CLIENT"
    assert "'client-alice'" in str(refused.value)
    assert new_task(principal_scope="user:9", access_token=None).client_id == ""


@override_settings(MCP_TASKS={**QUOTA, "MAX_ACTIVE_TASKS": None})
def test_no_quota_when_it_is_none() -> None:
    assert len([new_task() for _ in range(4)]) == 4


@pytest.mark.django_db(transaction=True)
@override_settings(MCP_TASKS=QUOTA)
async def test_a_task_past_the_quota_is_refused_from_the_event_loop_too(
    orm_thread_closed: None,
) -> None:
    for _ in range(2):
        await service.acreate_task(new_record("trivial_task", principal_scope="user:77"))
    with pytest.raises(task_contract.QuotaExceeded):
        await service.acreate_task(new_record("trivial_task", principal_scope="user:77"))
    count = await Task.objects.filter(principal_scope="user:77").acount()
    assert count == 2


# -- a queue no worker serves --------------------------------------------------------------


@pytest.fixture
def no_worker_memory() -> Any:
    queue._live_workers.clear()
    yield
    queue._live_workers.clear()


def test_a_task_queued_where_no_worker_serves_says_so_once(
    no_worker_memory: None, caplog: pytest.LogCaptureFixture
) -> None:
    task = new_task()
    age(task, 3600)
    assert service.check_liveness(Task.objects.get(pk=task.pk)) is True
    stored = Task.objects.get(pk=task.pk)
    assert stored.status == TaskStatus.WORKING
    assert stored.status_message.startswith("Not started: no task worker is running for queue")
    assert "rqworker mcp_tasks" in stored.status_message
    assert "mcp_tasks.tasks.worker.TaskWorker" in stored.status_message
    assert [r.getMessage() for r in caplog.records if "Not started" in r.getMessage()]
    age(stored, 3600)
    assert service.check_liveness(Task.objects.get(pk=task.pk)) is False  # said once


def test_a_task_queued_while_a_worker_serves_its_queue_just_waits(
    no_worker_memory: None, embedded_queue: Any
) -> None:
    from mcp_tasks.tasks.worker.task_worker import EmbeddedTaskWorker

    worker = EmbeddedTaskWorker([queue.get_queue("mcp_tasks")], connection=embedded_queue)
    worker.register_birth()  # type: ignore[no-untyped-call]
    task = new_task()
    age(task, 3600)
    assert service.check_liveness(Task.objects.get(pk=task.pk)) is False
    assert Task.objects.get(pk=task.pk).status_message == "Queued"


def test_a_task_queued_where_only_rq_workers_serve_says_what_to_start(
    no_worker_memory: None, embedded_queue: Any
) -> None:
    """rq's own worker classes never take task jobs: they do not count as serving."""
    from rq import SimpleWorker, Worker

    for worker_class in (Worker, SimpleWorker):
        plain = worker_class([queue.get_queue("mcp_tasks")], connection=embedded_queue)
        plain.register_birth()  # type: ignore[no-untyped-call]
    task = new_task()
    age(task, 3600)
    assert service.check_liveness(Task.objects.get(pk=task.pk)) is True
    message = Task.objects.get(pk=task.pk).status_message
    assert message.startswith("Not started: the rq workers of queue 'mcp_tasks' are not task")
    assert "RQ['WORKER_CLASS'] = 'mcp_tasks.tasks.worker.TaskWorker'" in message
    assert "--worker-class mcp_tasks.tasks.worker.TaskWorker" in message


def test_only_the_task_worker_classes_count_as_serving_a_queue(
    no_worker_memory: None, embedded_queue: Any
) -> None:
    from rq import SimpleWorker, Worker

    from mcp_tasks.tasks.worker import EmbeddedTaskWorker, ForkingTaskWorker, TaskWorker

    classes = (TaskWorker, ForkingTaskWorker, EmbeddedTaskWorker, Worker, SimpleWorker)
    for worker_class in classes:
        worker = worker_class([queue.get_queue("mcp_tasks")], connection=embedded_queue)
        worker.register_birth()  # type: ignore[no-untyped-call]
    assert queue.queue_workers("mcp_tasks") == queue.QueueWorkers(task=3, other=2)
    assert queue.live_workers("mcp_tasks") == 3


def test_task_ids_are_high_entropy_and_distinct() -> None:
    ids = {new_task().id for _ in range(5)}
    assert len(ids) == 5
    assert all(len(task_id) >= 43 for task_id in ids)


@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_TTL": 60, "TASK_POLL_INTERVAL": 0.25})
def test_create_task_uses_the_configured_ttl_and_poll_interval() -> None:
    task = new_task()
    assert task.ttl_ms == 60_000
    assert task.poll_interval_ms == 250
    assert task.expires_at == task.created_at + timedelta(seconds=60)


@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_TTL": None})
def test_task_ttl_none_keeps_the_task_forever() -> None:
    task = new_task()
    assert task.ttl_ms is None and task.expires_at is None


def test_tool_task_config_ttl_wins_over_the_setting() -> None:
    task = new_task(ttl=5, poll_interval=2)
    assert (task.ttl_ms, task.poll_interval_ms) == (5000, 2000)


def test_create_task_fails_the_task_when_the_queue_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(task: Task) -> None:
        raise ConnectionError("redis is down")

    monkeypatch.setattr(queue, "enqueue", broken)
    with pytest.raises(RuntimeError, match="queue is unavailable"):
        new_task()
    (task,) = Task.objects.all()
    assert task.status == TaskStatus.FAILED
    assert task.status_message == "The task could not be queued"


def test_snapshot_secrets_are_sealed_and_open_again() -> None:
    task = new_task()
    sealed = TaskSnapshot.objects.get(task=task).sealed
    assert "valid-alice" not in sealed and "rid-1" not in sealed
    secrets = service.snapshot_secrets(Task.objects.get(pk=task.pk))
    assert secrets["access_token"]["token"] == "valid-alice"
    assert secrets["headers"] == {"x-request-id": "rid-1"}


def test_a_snapshot_with_no_secrets_seals_nothing() -> None:
    task = new_task(principal_scope="anonymous", access_token=None, headers={})
    assert TaskSnapshot.objects.get(task=task).sealed == ""
    assert service.snapshot_secrets(Task.objects.get(pk=task.pk)) == {}
    with_header = new_task(principal_scope="anonymous", access_token=None)
    assert TaskSnapshot.objects.get(task=with_header).sealed.startswith("m1.")


def test_get_task_finds_the_callers_task() -> None:
    task = new_task()
    assert service.get_task(task.id, "client:client-alice:alice").pk == task.pk


def test_get_task_of_another_principal_is_not_found() -> None:
    task = new_task()
    with pytest.raises(task_contract.TaskNotFound):
        service.get_task(task.id, "client:client-bob:bob")


def test_get_task_of_an_expired_task_is_not_found() -> None:
    task = new_task(ttl=60)
    Task.objects.filter(pk=task.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(task_contract.TaskNotFound):
        service.get_task(task.id, "client:client-alice:alice")


@pytest.mark.parametrize("task_id", [None, 42, "", "x" * 65, ["list"]])
def test_get_task_rejects_malformed_ids_as_not_found(task_id: Any) -> None:
    with pytest.raises(task_contract.TaskNotFound):
        service.get_task(task_id, "anonymous")


# -- the worker's transitions -------------------------------------------------------------------


def test_begin_run_marks_the_task_working_on_a_worker() -> None:
    task = new_task()
    started = service.begin_run(task.id, "host:1:2")
    assert started is not None
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.status_message, row.worker_name) == ("working", "Working", "host:1:2")
    assert row.started_at is not None and row.heartbeat_at is not None


def test_begin_run_of_a_finished_task_does_nothing() -> None:
    task = new_task()
    service.complete(task.id, {"content": []})
    assert service.begin_run(task.id, "w") is None


def test_begin_run_of_an_unknown_task_does_nothing() -> None:
    assert service.begin_run("no-such-task", "w") is None


def test_a_job_delivered_twice_claims_its_task_once() -> None:
    """A Redis failover can lose the record of a job's start, so the job waits on the new
    master again and a worker takes it a second time: that job finds the task held."""
    task = new_task()
    assert service.begin_run(task.id, "first", 0) is not None
    assert service.begin_run(task.id, "second", 0) is None
    assert Task.objects.get(pk=task.pk).worker_name == "first"


def test_a_claim_sent_again_with_its_own_time_holds() -> None:
    """A claim whose answer was lost with the database connection is sent again as it was:
    it finds its own heartbeat and the job goes on."""
    task = new_task()
    claimed_at = timezone.now()
    assert service.begin_run(task.id, "w", 0, claimed_at) is not None
    assert service.begin_run(task.id, "w", 0, claimed_at) is not None
    assert service.begin_run(task.id, "w", 0) is None  # another claim: held


def test_the_heartbeat_leaves_a_task_no_job_holds_alone() -> None:
    """Its job let go of it (here: it was never claimed); its next job must find it
    unheld, whatever a heartbeat in flight does."""
    task = new_task()
    service.heartbeat([task.id])
    assert Task.objects.get(pk=task.pk).heartbeat_at is None
    assert service.begin_run(task.id, "w", 0) is not None


def test_complete_stores_the_result() -> None:
    task = new_task()
    assert service.complete(task.id, {"content": [{"type": "text", "text": "ok"}]}) is True
    row = Task.objects.get(pk=task.pk)
    assert row.status == TaskStatus.COMPLETED and row.status_message == "Completed"
    assert row.result == {"content": [{"type": "text", "text": "ok"}]}
    assert row.finished_at is not None


@pytest.mark.parametrize("is_error", [False, True])
def test_a_completed_task_reads_as_the_fields_its_change_carries_say(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any, is_error: bool
) -> None:
    """A waiting ``tasks/get`` answers from the change that ended the task: what it then
    answers is what a read of the row would have answered."""
    from mcp_tasks.protocol.task_shapes import detailed_task

    published: list[dict[str, Any] | None] = []
    monkeypatch.setattr(
        outbox, "publish_task_change", lambda *args, fields=None, **_: published.append(fields)
    )
    task = new_task()
    before = service.get_task(task.id, task.principal_scope)
    result = {
        "content": [{"type": "text", "text": "é ✓"}],
        "structuredContent": {"big": 10**30, "ratio": 0.1},  # past msgpack's integers
        "isError": is_error,
    }
    with django_capture_on_commit_callbacks(execute=True):
        assert service.complete(task.id, result)
    (final,) = published
    assert final is not None
    after = service.get_task(task.id, task.principal_scope)
    assert detailed_task(service.with_fields(before, final)) == detailed_task(after)


def test_a_large_result_is_not_carried_by_the_change(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    published: list[dict[str, Any] | None] = []
    monkeypatch.setattr(
        outbox, "publish_task_change", lambda *args, fields=None, **_: published.append(fields)
    )
    task = new_task()
    text = "x" * service.FINAL_FIELDS_MAX
    with django_capture_on_commit_callbacks(execute=True):
        assert service.complete(task.id, {"content": [{"type": "text", "text": text}]})
    assert published == [None]  # the waiting request reads the task back


def test_complete_with_an_is_error_result_says_so() -> None:
    task = new_task()
    service.complete(task.id, {"content": [], "isError": True})
    assert Task.objects.get(pk=task.pk).status_message == "Completed with an error"


def test_fail_stores_the_error_object() -> None:
    task = new_task()
    assert service.fail(task.id, {"code": -32603, "message": "boom"}) is True
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.error, row.status_message) == (
        "failed",
        {"code": -32603, "message": "boom"},
        "boom",
    )


@pytest.mark.cancel
def test_a_terminal_state_never_changes() -> None:
    task = new_task()
    service.complete(task.id, {"content": []})
    assert service.fail(task.id, {"code": -1, "message": "late"}) is False
    assert service.complete(task.id, {"content": [{"type": "text", "text": "late"}]}) is False
    service.cancel(task.id, "client:client-alice:alice")
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.result) == ("completed", {"content": []})


@pytest.mark.cancel
def test_a_late_result_after_cancel_is_refused() -> None:
    task = new_task()
    service.begin_run(task.id, "w")
    service.cancel(task.id, "client:client-alice:alice")
    assert service.complete(task.id, {"content": [{"type": "text", "text": "late"}]}) is False
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.result) == ("cancelled", None)


@pytest.mark.cancel
def test_cancel_of_a_queued_task_cancels_its_job(
    django_capture_on_commit_callbacks: Any, embedded_queue: Any
) -> None:
    task = new_task()
    with django_capture_on_commit_callbacks(execute=True):
        service.cancel(task.id, "client:client-alice:alice")
    assert Task.objects.get(pk=task.pk).status == TaskStatus.CANCELLED
    job = Job.fetch(f"mcp_tasks-{task.id}-0", connection=embedded_queue)
    assert job.get_status() == JobStatus.CANCELED
    assert queued_job_ids() == []


@pytest.mark.cancel
def test_cancel_by_another_principal_is_not_found() -> None:
    task = new_task()
    with pytest.raises(task_contract.TaskNotFound):
        service.cancel(task.id, "anonymous")
    assert Task.objects.get(pk=task.pk).status == TaskStatus.WORKING


@pytest.mark.cancel
def test_cancel_by_staff_needs_no_principal() -> None:
    task = new_task()
    assert service.cancel(task.id, None).status == TaskStatus.CANCELLED


def test_report_progress_sets_the_fields_and_the_status_message() -> None:
    task = new_task()
    service.report_progress(task.id, 2, 4, "half way")
    row = Task.objects.get(pk=task.pk)
    assert (row.progress, row.progress_total, row.status_message) == (2, 4, "half way")


def test_report_progress_without_a_message_shows_the_fraction() -> None:
    task = new_task()
    service.report_progress(task.id, 3, 4, None)
    assert Task.objects.get(pk=task.pk).status_message == "3/4"


def test_report_progress_after_the_end_is_ignored() -> None:
    task = new_task()
    service.complete(task.id, {"content": []})
    service.report_progress(task.id, 1, 2, "too late")
    row = Task.objects.get(pk=task.pk)
    assert (row.progress, row.status_message) == (None, "Completed")


def test_add_log_keeps_the_line_with_the_task() -> None:
    task = new_task()
    service.add_log(task.id, "warning", "unit", {"detail": 1})
    entry = TaskLogEntry.objects.get(task=task)
    assert (entry.level, entry.logger_name, entry.data) == ("warning", "unit", {"detail": 1})


@pytest.mark.cancel
def test_heartbeat_marks_running_tasks_alive_and_returns_their_statuses() -> None:
    running, ended = new_task(), new_task()
    service.begin_run(running.id, "w")
    service.begin_run(ended.id, "w")
    service.cancel(ended.id, None)
    age(running, 60, heartbeat_at=None)
    age(ended, 60, heartbeat_at=None)
    statuses = service.heartbeat([running.id, ended.id, "no-such-task"])
    assert statuses == {running.id: "working", ended.id: "cancelled"}  # gone: missing
    beats = dict(Task.objects.values_list("id", "heartbeat_at"))
    running_beat, ended_beat = beats[running.id], beats[ended.id]
    assert running_beat is not None and ended_beat is not None
    assert timezone.now() - running_beat < timedelta(seconds=5)
    assert timezone.now() - ended_beat > timedelta(seconds=50)  # terminal: left alone


# -- liveness and housekeeping --------------------------------------------------------------------


@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_LOST_AFTER": 10})
def test_a_task_whose_heartbeat_stopped_fails() -> None:
    task = new_task()
    service.begin_run(task.id, "w")
    age(task, 11, heartbeat_at=None)
    assert service.check_liveness(Task.objects.get(pk=task.pk)) is True
    row = Task.objects.get(pk=task.pk)
    assert row.status == TaskStatus.FAILED
    assert "stopped unexpectedly" in row.status_message


@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_LOST_AFTER": 10})
def test_a_silent_task_read_before_its_worker_moved_on_is_not_failed() -> None:
    """``recover_stalled`` and ``tasks/get`` judge a row read earlier: a worker that beat, or
    a task that went on to a new run or a question since, is not failed as lost."""
    beat, retried, asked = new_task(), new_task(), new_task()
    for task in (beat, retried, asked):
        service.begin_run(task.id, "w", run=0)
        age(task, 11, heartbeat_at=None)
    stale = {task.id: Task.objects.get(pk=task.pk) for task in (beat, retried, asked)}
    service.heartbeat([beat.id])  # the worker was slow, not dead
    assert service.retry_later(retried.id, 0, 3, 5.0, "TimeoutError") is True
    service.ask(asked.id, 1, "elicitation/create", ELICIT, "w")
    for task in (beat, retried, asked):
        assert service.check_liveness(stale[task.id]) is False
    assert Task.objects.get(pk=beat.pk).status == TaskStatus.WORKING
    assert Task.objects.get(pk=retried.pk).status == TaskStatus.WORKING
    assert Task.objects.get(pk=asked.pk).status == TaskStatus.INPUT_REQUIRED


@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_LOST_AFTER": 10})
def test_a_task_with_a_recent_heartbeat_is_left_alone() -> None:
    task = new_task()
    service.begin_run(task.id, "w")
    assert service.check_liveness(Task.objects.get(pk=task.pk)) is False


@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_REQUEUE_AFTER": 10})
def test_a_queued_task_whose_job_vanished_is_queued_again(
    django_capture_on_commit_callbacks: Any, embedded_queue: Any
) -> None:
    task = new_task()
    embedded_queue.flushall()  # Redis restarted without persistence
    age(task, 11)
    with django_capture_on_commit_callbacks(execute=True):
        assert service.check_liveness(Task.objects.get(pk=task.pk)) is True
    assert Task.objects.get(pk=task.pk).runs == 1
    assert queued_job_ids() == [f"mcp_tasks-{task.id}-1"]


@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_REQUEUE_AFTER": 10})
def test_a_queued_task_whose_job_is_still_queued_is_left_alone(
    no_worker_memory: None, embedded_queue: Any
) -> None:
    from mcp_tasks.tasks.worker.task_worker import EmbeddedTaskWorker

    worker = EmbeddedTaskWorker([queue.get_queue("mcp_tasks")], connection=embedded_queue)
    worker.register_birth()  # type: ignore[no-untyped-call]  # a worker serves the queue
    task = new_task()
    age(task, 11)
    assert service.check_liveness(Task.objects.get(pk=task.pk)) is False
    assert queued_job_ids() == [f"mcp_tasks-{task.id}-0"]


def test_recover_stalled_counts_the_tasks_it_changed() -> None:
    with override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_LOST_AFTER": 10}):
        task = new_task()
        service.begin_run(task.id, "w")
        age(task, 11, heartbeat_at=None)
        new_task()  # healthy
        assert service.recover_stalled() == 1


def test_purge_expired_deletes_expired_tasks_with_their_rows() -> None:
    expired = new_task(ttl=60)
    kept = new_task(ttl=60)
    service.add_log(expired.id, "info", None, "line")
    Task.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    service.purge_expired()
    assert list(Task.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not TaskSnapshot.objects.filter(task_id=expired.pk).exists()
    assert not TaskLogEntry.objects.filter(task_id=expired.pk).exists()


def test_purge_expired_returns_the_number_of_tasks_deleted() -> None:
    expired = new_task(ttl=60)
    service.add_log(expired.id, "info", None, "line")
    Task.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert service.purge_expired() == 1


# -- questions ------------------------------------------------------------------------------------------


def asked(task: Task, key: str | None = "ok", sequence: int = 1) -> InputRequest:
    return service.ask(task.id, sequence, "elicitation/create", ELICIT, "w", key)


def test_ask_records_the_question_and_sets_input_required() -> None:
    task = new_task()
    request = asked(task)
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.status_message, row.waiting_worker) == (
        "input_required",
        "Proceed?",
        "w",
    )
    assert (request.key, request.status) == ("ok", InputRequestStatus.PENDING)


def test_ask_replayed_with_the_same_question_finds_the_recorded_one() -> None:
    task = new_task()
    first = asked(task)
    assert asked(task).pk == first.pk


def test_ask_replayed_with_a_different_question_is_a_replay_mismatch() -> None:
    task = new_task()
    asked(task)
    with pytest.raises(service.ReplayMismatch):
        service.ask(
            task.id, 1, "elicitation/create", {**ELICIT, "message": "Something else?"}, "w", "ok"
        )


def test_ask_all_records_a_round_with_consecutive_sequences() -> None:
    task = new_task()
    rows = service.ask_all(
        task.id, 3, [("elicitation/create", ELICIT, "name"), ("roots/list", {}, "roots")], "w"
    )
    assert [(row.key, row.sequence) for row in rows] == [("name", 3), ("roots", 4)]
    assert Task.objects.get(pk=task.pk).status == "input_required"


def test_ask_all_records_a_round_together_or_not_at_all() -> None:
    # A poll must never see part of a round: here the round's second question fails
    # (it differs from the one recorded at its place), so its first is not kept either.
    task = new_task()
    asked(task, key="recorded", sequence=2)
    other = {**ELICIT, "message": "Something else?"}
    with pytest.raises(service.ReplayMismatch):
        service.ask_all(
            task.id,
            1,
            [("elicitation/create", ELICIT, "first"), ("elicitation/create", other, "second")],
            "w",
        )
    assert list(task.input_requests.values_list("key", flat=True)) == ["recorded"]


@pytest.mark.cancel
def test_ask_on_a_finished_task_ends_the_tool() -> None:
    task = new_task()
    service.cancel(task.id, None)
    with pytest.raises(service.TaskEnded):
        asked(task)


def test_question_keys_are_never_reused_within_a_task() -> None:
    task = new_task()
    first = asked(task, key="same", sequence=1)
    second = asked(task, key="same", sequence=2)
    assert first.key == "same" and second.key != "same"


def test_answer_is_validated_against_the_requested_schema() -> None:
    task = new_task()
    asked(task)
    with pytest.raises(task_contract.InvalidAnswer):
        service.answer(
            task.id,
            "ok",
            {"action": "accept", "content": {"ok": "yes"}},
            principal_scope=None,
            answered_by="t",
        )
    assert InputRequest.objects.get(task=task).status == InputRequestStatus.PENDING


def test_a_roots_answer_the_tool_cannot_read_is_refused_and_the_question_waits() -> None:
    """As a sampling answer is checked as a result, a roots answer is checked as a
    ``roots/list`` result: a list of anything else would end the task when the tool reads it."""
    task = new_task()
    service.ask(task.id, 1, "roots/list", {}, "w", "roots")
    unreadable = [["/srv"], [{"uri": "https://example.com/srv"}], [{"name": "no uri"}]]
    for roots in unreadable:
        with pytest.raises(task_contract.InvalidAnswer):
            service.answer(
                task.id, "roots", {"roots": roots}, principal_scope=None, answered_by="t"
            )
    assert InputRequest.objects.get(task=task).status == InputRequestStatus.PENDING
    good = {"roots": [{"uri": "file:///srv/project", "name": "project"}]}
    assert service.answer(task.id, "roots", good, principal_scope=None, answered_by="t")
    assert InputRequest.objects.get(task=task).response == good


def test_an_answer_is_kept_when_its_resume_job_cannot_be_queued(
    django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis failing over as the answer commits: the client is told it was recorded (the
    housekeeping queues the job again after ``TASK_REQUEUE_AFTER``), not given an error."""
    task = new_task()
    asked(task)
    service.release(task.id)  # the job ended: a new one resumes the task once answered

    def unreachable(task: Any) -> None:
        raise ConnectionError("Redis is failing over")

    monkeypatch.setattr(queue, "enqueue", unreachable)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        answered = service.answer(
            task.id,
            "ok",
            {"action": "accept", "content": {"ok": True}},
            principal_scope=None,
            answered_by="t",
        )
    assert answered is True
    assert len(callbacks) >= 1
    assert InputRequest.objects.get(task=task).status == InputRequestStatus.ANSWERED
    assert Task.objects.get(pk=task.pk).status == TaskStatus.WORKING


def test_answer_to_an_unknown_key_is_ignored() -> None:
    task = new_task()
    asked(task)
    assert (
        service.answer(task.id, "nope", {"action": "cancel"}, principal_scope=None, answered_by="t")
        is False
    )


def test_the_first_answer_wins() -> None:
    task = new_task()
    asked(task)
    assert (
        service.answer(
            task.id,
            "ok",
            {"action": "accept", "content": {"ok": True}},
            principal_scope=None,
            answered_by="a",
        )
        is True
    )
    assert (
        service.answer(task.id, "ok", {"action": "decline"}, principal_scope=None, answered_by="b")
        is False
    )
    assert InputRequest.objects.get(task=task).response == {
        "action": "accept",
        "content": {"ok": True},
    }


def test_answer_by_another_principal_is_refused() -> None:
    """Refused, or (``not_found_raises``, as ``tasks/update`` asks) not found, the same as an
    unknown task; nothing is recorded."""
    task = new_task()
    asked(task)
    decline = {"action": "decline"}
    assert (
        service.answer(task.id, "ok", decline, principal_scope="anonymous", answered_by="x")
        is False
    )
    for task_id in (task.id, "no-such-task"):
        with pytest.raises(task_contract.TaskNotFound):
            service.answer(
                task_id,
                "ok",
                decline,
                principal_scope="anonymous",
                answered_by="x",
                not_found_raises=True,
            )
    assert service.answers_of(task.id, ["ok"]) == [None]
    assert task.input_requests.get(key="ok").status == InputRequestStatus.PENDING


def test_answering_while_a_worker_waits_wakes_it_without_a_new_job() -> None:
    task = new_task()
    asked(task)
    queued_before = queued_job_ids()
    service.answer(task.id, "ok", {"action": "decline"}, principal_scope=None, answered_by="t")
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.runs) == ("working", 0)
    assert queued_job_ids() == queued_before


def accept_as_staff(task: Task) -> None:
    """Answer the question ``ok`` with an accepted form, as staff in the admin would."""
    service.answer(
        task.id,
        "ok",
        {"action": "accept", "content": {"ok": True}},
        principal_scope=None,
        answered_by="t",
    )


def test_the_wake_up_brings_the_committed_answer_to_the_waiting_worker(
    django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker goes on with the answer its wake-up carries (no read back); other
    watchers hear only the status."""
    task = new_task()
    service.begin_run(task.id, "w")
    asked(task)
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(outbox, "publish_task_change", lambda *args: sent.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        accept_as_staff(task)
    [(task_id, status, _session, worker, answers)] = sent
    assert (task_id, status, worker) == (task.id, "working", "w")
    assert answers == {"ok": service.answers_of(task.id, ["ok"])[0]}
    assert answers["ok"]["content"] == {"ok": True}


def test_the_last_answer_resumes_a_released_task_on_a_new_job(
    django_capture_on_commit_callbacks: Any,
) -> None:
    task = new_task()
    asked(task)
    assert service.release(task.id) is False  # the worker let go
    with django_capture_on_commit_callbacks(execute=True):
        accept_as_staff(task)
    row = Task.objects.get(pk=task.pk)
    assert (row.status, row.status_message, row.runs) == ("working", "Answered; resuming", 1)
    assert f"mcp_tasks-{task.id}-1" in queued_job_ids()


@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "INPUT_TIMEOUT": 10})
def test_questions_past_the_input_timeout_expire() -> None:
    task = new_task()
    request = asked(task)
    InputRequest.objects.filter(pk=request.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert service.expire_questions() == 1
    assert InputRequest.objects.get(pk=request.pk).status == InputRequestStatus.EXPIRED
    assert service.answers_of(task.id, ["ok", None, "no-such-key"]) == [service.EXPIRED, None, None]


# -- snapshot crypto ----------------------------------------------------------------------------------


def test_seal_and_unseal_round_trip() -> None:
    value = {"access_token": {"token": "t0ken"}, "headers": {"a": "b"}}
    sealed = crypto.seal(value)
    assert "t0ken" not in sealed
    assert crypto.unseal(sealed) == value


def test_sealing_twice_gives_different_texts() -> None:
    assert crypto.seal({"a": 1}) != crypto.seal({"a": 1})


def test_unseal_with_a_rotated_key_uses_the_fallbacks() -> None:
    with override_settings(SECRET_KEY="old-key-" + "a" * 40):
        sealed = crypto.seal({"secret": 1})
    with override_settings(
        SECRET_KEY="new-key-" + "b" * 40, SECRET_KEY_FALLBACKS=["old-key-" + "a" * 40]
    ):
        assert crypto.unseal(sealed) == {"secret": 1}


def test_unseal_without_the_key_raises_a_clear_error() -> None:
    with override_settings(SECRET_KEY="old-key-" + "a" * 40):
        sealed = crypto.seal({"secret": 1})
    with (
        override_settings(SECRET_KEY="new-key-" + "b" * 40),
        pytest.raises(crypto.SnapshotDecryptionError, match="SECRET_KEY_FALLBACKS"),
    ):
        crypto.unseal(sealed)


@pytest.mark.parametrize("text", ["m2.abc", "m1.!!!", "m1." + "A" * 40])
def test_unseal_of_a_corrupt_snapshot_raises_snapshot_decryption_error(text: str) -> None:
    with pytest.raises(crypto.SnapshotDecryptionError):
        crypto.unseal(text)


# -- queries per step (the hot path stays a handful of statements) ---------------------------------


def test_each_step_of_a_trivial_task_costs_a_bounded_number_of_queries(
    django_assert_max_num_queries: Any,
) -> None:
    # Savepoints count where a step is a transaction: the test itself runs in one.
    # PostgreSQL writes the task with its snapshot in one statement, its quota checked in
    # it; SQLite in a transaction, the quota's count first.
    postgres = connection.vendor == "postgresql"
    with django_assert_max_num_queries(1 if postgres else 5):
        task = new_task()
    with django_assert_max_num_queries(1):  # tasks/get: one precompiled read
        service.get_task(task.id, "client:client-alice:alice")
    with django_assert_max_num_queries(1 if postgres else 2):  # the job starts: update, read
        running = service.begin_run(task.id, "w", 0)
    assert running is not None
    with django_assert_max_num_queries(1):  # the tool returned: one conditional update
        assert service.complete(running, {"content": []}) is True
    with django_assert_max_num_queries(2):  # the heartbeat of every running task at once
        service.heartbeat([task.id])


def test_a_question_and_its_answer_cost_a_bounded_number_of_queries(
    django_assert_max_num_queries: Any,
) -> None:
    task = new_task()
    service.begin_run(task.id, "w", 0)
    with django_assert_max_num_queries(6):  # one transaction, whatever the round's size
        (request,) = service.ask_all(task.id, 1, [("elicitation/create", ELICIT, "ok")], "w")
    assert service.answer_in(request) is None
    with django_assert_max_num_queries(1):
        assert service.answers_of(task.id, ["ok"]) == [None]
    answer = {"action": "accept", "content": {"ok": True}}
    # A savepoint, the locked task, its questions, the answer, the task: 6 with the release.
    with django_assert_max_num_queries(6):
        assert service.answer(
            task.id, "ok", answer, principal_scope="client:client-alice:alice", answered_by="client"
        )
    assert service.answers_of(task.id, ["ok", "other"]) == [answer, None]


# -- a held tasks/get ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_GET_HOLD": 30})
async def test_a_held_tasks_get_answers_at_the_first_change_progress_included(
    orm_thread_closed: None,
) -> None:
    from mcp_tasks.authoring.registry import mcp
    from mcp_tasks.core.db import db
    from mcp_tasks.protocol.task_methods import TaskMethods
    from mcp_tasks.tasks.engine import Engine
    from tests.support.protocol_fixtures import FakeSink, modern_info

    task = await db(new_task)(access_token=None, principal_scope="anonymous")

    class ProgressSink(FakeSink):
        """Each wait hears of a change: the first is the tool's progress."""

        waits = 0

        async def wait_for_task(self, task_id: str, timeout: float) -> None:
            self.waits += 1
            if self.waits == 1:
                await db(service.report_progress)(task_id, 1, 3, "one of three")

    sink = ProgressSink()
    info = modern_info(capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}})
    held = await TaskMethods(Engine()).get(mcp, info, sink, {"taskId": task.id})
    assert held["status"] == "working" and held["statusMessage"] == "one of three"
    assert sink.waits == 1  # answered at that change, not at the hold's end

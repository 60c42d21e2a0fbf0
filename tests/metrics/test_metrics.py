"""Metrics in process (``MCP_TASKS["METRICS"]``): what the task service, the worker's slots
and intake, admission and the consumer count, the database's gauges, the ``/metrics`` view,
the switch and checks W012/W013. Values are read as deltas: each process's metrics live as
long as it does. The live test with two worker processes is ``test_metrics_live.py``."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import CheckMessage
from django.db import transaction
from django.test import Client, override_settings
from django.utils import timezone

from mcp_tasks.checks.metrics import check_metrics
from mcp_tasks.contrib.uvicorn_http import refusal_response
from mcp_tasks.core import metrics_hook, task_contract
from mcp_tasks.metrics import registry, switch
from mcp_tasks.metrics.collector import DatabaseCollector
from mcp_tasks.models import InputRequest, Task
from mcp_tasks.tasks.queues.rq_bookkeeping import Taken
from mcp_tasks.tasks.state import service
from mcp_tasks.tasks.worker.intake import Intake
from mcp_tasks.tasks.worker.runtime import Slots
from mcp_tasks.testing import McpClient, McpError
from mcp_tasks.transport.admission import Admission
from mcp_tasks.transport.http import HttpError
from tests.support import rows as support_rows
from tests.support.rows import new_record

TOOL = "trivial_task"
new_task = functools.partial(support_rows.new_task, TOOL, arguments={"n": 1})


def sample(name: str, **labels: str) -> float:
    """The current value of a sample of this process's metrics (0 when never set)."""
    return registry.REGISTRY.get_sample_value(name, labels) or 0.0


class Deltas:
    """Samples read before the test's actions; :meth:`of` is how much each moved since."""

    def __init__(self, *samples: tuple[str, dict[str, str]]) -> None:
        self._before = {
            (name, tuple(labels.items())): sample(name, **labels) for name, labels in samples
        }

    def of(self, name: str, **labels: str) -> float:
        return sample(name, **labels) - self._before[(name, tuple(labels.items()))]


@pytest.fixture
def metrics_on(settings: Any) -> Iterator[None]:
    """``METRICS`` on, over whatever the test's other fixtures set."""
    settings.MCP_TASKS = {**settings.MCP_TASKS, "METRICS": True}
    assert metrics_hook.recorder is not None
    yield


# -- the switch and the view -----------------------------------------------------------------------


@pytest.mark.django_db
def test_off_by_default_no_recorder_and_the_view_answers_404() -> None:
    assert metrics_hook.recorder is None and switch.exposition() is None
    assert Client().get("/metrics").status_code == 404


def test_the_setting_installs_the_recorder_and_removes_it_again() -> None:
    with override_settings(MCP_TASKS={"METRICS": True}):
        assert metrics_hook.recorder is not None
        assert switch.exposition() is metrics_hook.recorder
    assert metrics_hook.recorder is None


def test_without_prometheus_client_nothing_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(switch, "available", lambda: False)
    with override_settings(MCP_TASKS={"METRICS": True}):
        assert metrics_hook.recorder is None and switch.exposition() is None


@pytest.mark.django_db
@pytest.mark.usefixtures("metrics_on")
def test_the_view_serves_the_text_format_with_every_family() -> None:
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    text = response.content.decode()
    for family, kind in (
        ("mcp_tasks_tasks_created_total", "counter"),
        ("mcp_tasks_tasks_finished_total", "counter"),
        ("mcp_tasks_task_queue_wait_seconds", "histogram"),
        ("mcp_tasks_task_run_seconds", "histogram"),
        ("mcp_tasks_worker_slots_busy", "gauge"),
        ("mcp_tasks_request_duration_seconds", "histogram"),
        ("mcp_tasks_requests_refused_total", "counter"),
        ("mcp_tasks_tasks_active", "gauge"),
        ("mcp_tasks_questions_oldest_age_seconds", "gauge"),
    ):
        assert f"# TYPE {family} {kind}\n" in text
    assert 'mcp_tasks_tasks_active{status="input_required"} 0.0' in text
    assert Client().post("/metrics").status_code == 405


@pytest.mark.django_db
@pytest.mark.usefixtures("metrics_on")
def test_with_a_token_the_view_wants_it_as_a_bearer_token(settings: Any) -> None:
    settings.MCP_TASKS = {**settings.MCP_TASKS, "METRICS_TOKEN": "s3cret"}
    refused = Client().get("/metrics")
    assert refused.status_code == 401 and refused["WWW-Authenticate"].startswith("Bearer")
    assert Client().get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    served = Client().get("/metrics", headers={"Authorization": "Bearer s3cret"})
    assert served.status_code == 200 and b"mcp_tasks_tasks_active" in served.content


# -- tasks -------------------------------------------------------------------------------------------


def _age(model: type[Task] | type[InputRequest], pk: Any, seconds: float, *fields: str) -> None:
    past = timezone.now() - timedelta(seconds=seconds)
    model.objects.filter(pk=pk).update(**dict.fromkeys(fields, past))


TASK_SAMPLES = (
    ("mcp_tasks_tasks_created_total", {"tool": TOOL}),
    *(
        ("mcp_tasks_tasks_finished_total", {"tool": TOOL, "status": status})
        for status in ("completed", "failed", "cancelled")
    ),
    ("mcp_tasks_task_queue_wait_seconds_count", {"tool": TOOL}),
    ("mcp_tasks_task_queue_wait_seconds_sum", {"tool": TOOL}),
    *(
        ("mcp_tasks_task_run_seconds_count", {"tool": TOOL, "status": status})
        for status in ("completed", "failed", "cancelled")
    ),
    ("mcp_tasks_task_run_seconds_sum", {"tool": TOOL, "status": "completed"}),
)


@pytest.mark.django_db
@pytest.mark.usefixtures("embedded_queue", "metrics_on")
def test_tasks_are_counted_when_created_started_and_ended_by_tool_and_status(
    django_capture_on_commit_callbacks: Any,
) -> None:
    deltas = Deltas(*TASK_SAMPLES)
    with django_capture_on_commit_callbacks(execute=True):  # as if each change committed
        completed, failed, cancelled = new_task(), new_task(), new_task()
        _age(Task, completed.pk, 3, "created_at")  # waited 3 s in the queue
        started = service.begin_run(completed.id, "w", 0)
        assert started is not None
        service.begin_run(failed.id, "w", 0)
        _age(Task, completed.pk, 5, "started_at")  # ran 5 s (read back: completed by its id)
        assert service.complete(completed.id, {"content": []})
        assert service.fail(failed.id, {"code": -32603, "message": "boom"})
        service.cancel(cancelled.id, cancelled.principal_scope)  # never ran
        assert service.begin_run(cancelled.id, "w", 0) is None  # over: no start

    assert deltas.of("mcp_tasks_tasks_created_total", tool=TOOL) == 3
    for status in ("completed", "failed", "cancelled"):
        assert deltas.of("mcp_tasks_tasks_finished_total", tool=TOOL, status=status) == 1
    assert deltas.of("mcp_tasks_task_queue_wait_seconds_count", tool=TOOL) == 2
    assert deltas.of("mcp_tasks_task_queue_wait_seconds_sum", tool=TOOL) >= 3
    run_count = functools.partial(deltas.of, "mcp_tasks_task_run_seconds_count", tool=TOOL)
    assert (run_count(status="completed"), run_count(status="failed")) == (1, 1)
    assert run_count(status="cancelled") == 0
    assert deltas.of("mcp_tasks_task_run_seconds_sum", tool=TOOL, status="completed") >= 5


@pytest.mark.django_db
@pytest.mark.usefixtures("embedded_queue", "metrics_on")
def test_a_task_ended_twice_is_counted_once_and_a_rolled_back_end_not_at_all(
    django_capture_on_commit_callbacks: Any,
) -> None:
    deltas = Deltas(*TASK_SAMPLES)
    with django_capture_on_commit_callbacks(execute=True):
        task, rolled_back = new_task(), new_task()
        started = service.begin_run(task.id, "w", 0)
        assert started is not None and service.complete(started, {"content": []})
        assert not service.complete(started, {"content": []})
        service.cancel(task.id, task.principal_scope)  # already over
    with pytest.raises(RuntimeError), transaction.atomic():
        service.cancel(rolled_back.id, rolled_back.principal_scope)
        raise RuntimeError("rolled back")
    assert deltas.of("mcp_tasks_tasks_finished_total", tool=TOOL, status="completed") == 1
    assert deltas.of("mcp_tasks_tasks_finished_total", tool=TOOL, status="cancelled") == 0


@pytest.mark.django_db
@pytest.mark.usefixtures("embedded_queue", "metrics_on")
def test_a_quota_refusal_is_counted_by_quota(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.MCP_TASKS = {**settings.MCP_TASKS, "MAX_ACTIVE_TASKS": 1}
    deltas = Deltas(
        ("mcp_tasks_quota_refusals_total", {"quota": "MAX_ACTIVE_TASKS"}),
        ("mcp_tasks_tasks_created_total", {"tool": TOOL}),
    )
    with django_capture_on_commit_callbacks(execute=True):
        new_task()
        with pytest.raises(task_contract.QuotaExceeded):
            new_task()
    assert deltas.of("mcp_tasks_quota_refusals_total", quota="MAX_ACTIVE_TASKS") == 1
    assert deltas.of("mcp_tasks_tasks_created_total", tool=TOOL) == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("embedded_queue", "metrics_on", "orm_thread_closed")
async def test_a_task_created_from_the_event_loop_is_counted() -> None:
    deltas = Deltas(("mcp_tasks_tasks_created_total", {"tool": TOOL}))
    await service.acreate_task(new_record(TOOL, arguments={"n": 1}, principal_scope="user:5"))
    assert deltas.of("mcp_tasks_tasks_created_total", tool=TOOL) == 1


@pytest.mark.django_db
@pytest.mark.usefixtures("embedded_queue")
def test_with_metrics_off_the_service_reports_nothing() -> None:
    deltas = Deltas(*TASK_SAMPLES)
    task = new_task()
    started = service.begin_run(task.id, "w", 0)
    assert started is not None and service.complete(started, {"content": []})
    assert all(deltas.of(name, **labels) == 0 for name, labels in TASK_SAMPLES)


# -- the database's gauges ---------------------------------------------------------------------


def _gauges() -> dict[tuple[str, str], float]:
    return {
        (family.name, next(iter(sample.labels.values()))): sample.value
        for family in DatabaseCollector().collect()
        for sample in family.samples
    }


@pytest.mark.django_db
@pytest.mark.usefixtures("embedded_queue")
def test_the_database_gauges_count_active_tasks_and_waiting_questions() -> None:
    asking, _queued, done = new_task(), new_task(), new_task()
    service.begin_run(asking.id, "w", 0)
    question = support_rows.ask(Task.objects.get(pk=asking.pk))
    _age(InputRequest, question.pk, 60, "created_at")
    service.cancel(done.id, done.principal_scope)

    gauges = _gauges()
    assert gauges[("mcp_tasks_tasks_active", "working")] == 1
    assert gauges[("mcp_tasks_tasks_active", "input_required")] == 1
    assert gauges[("mcp_tasks_questions_waiting", "client")] == 1
    assert gauges[("mcp_tasks_questions_waiting", "staff")] == 0
    assert 60 <= gauges[("mcp_tasks_questions_oldest_age_seconds", "client")] < 120
    assert gauges[("mcp_tasks_questions_oldest_age_seconds", "staff")] == 0


# -- worker slots and intake -------------------------------------------------------------------------


@pytest.mark.usefixtures("metrics_on")
async def test_busy_slots_follow_the_slots_taken_and_given_back() -> None:
    deltas = Deltas(("mcp_tasks_worker_slots_busy", {}))
    slots = Slots(2)
    slots.take_now()
    await slots.take()
    assert deltas.of("mcp_tasks_worker_slots_busy") == 2
    waiting = asyncio.ensure_future(slots.take())  # full: waits for a slot
    await asyncio.sleep(0)
    slots.give()  # handed over to the waiting tool: still two busy
    await waiting
    assert deltas.of("mcp_tasks_worker_slots_busy") == 2
    slots.give()
    slots.give()
    slots.give()  # one too many: never below zero
    assert deltas.of("mcp_tasks_worker_slots_busy") == 0


class _Queue:
    name = "mcp_tasks"


class _Bookkeeping:
    """Answers every take with ``taken``."""

    def __init__(self, taken: Taken) -> None:
        self.taken = taken

    def run(self, queue: Any, **kwargs: Any) -> Taken:
        return self.taken


class _Connection:
    def register_script(self, script: str) -> None:
        return None


class _Worker:
    name = "w"
    connection = _Connection()
    queues = [_Queue()]

    slots = Slots(4)


@pytest.mark.usefixtures("metrics_on")
def test_takes_held_back_by_fair_share_and_parked_jobs_are_counted_by_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("mcp_tasks.tasks.worker.intake.note_parked", lambda job_ids: None)
    deltas = Deltas(
        ("mcp_tasks_fair_share_deferrals_total", {"queue": "mcp_tasks"}),
        ("mcp_tasks_concurrency_limit_parked_total", {"queue": "mcp_tasks"}),
    )
    intake = Intake(_Worker(), lambda forgotten: None)
    intake.bookkeeping = _Bookkeeping(Taken(full=True))  # type: ignore[assignment]
    intake.take(2)
    intake.bookkeeping = _Bookkeeping(Taken(parked=["a", "b"]))  # type: ignore[assignment]
    intake.take(2)
    intake.bookkeeping = _Bookkeeping(Taken(more=True))  # type: ignore[assignment]
    intake.take(2)
    assert deltas.of("mcp_tasks_fair_share_deferrals_total", queue="mcp_tasks") == 1
    assert deltas.of("mcp_tasks_concurrency_limit_parked_total", queue="mcp_tasks") == 2


# -- requests ------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("metrics_on")
def test_requests_are_timed_by_method_and_an_unknown_method_counts_as_other() -> None:
    deltas = Deltas(
        ("mcp_tasks_request_duration_seconds_count", {"method": "tools/call"}),
        ("mcp_tasks_request_duration_seconds_count", {"method": "other"}),
        ("mcp_tasks_request_duration_seconds_count", {"method": "no/such"}),
    )
    with McpClient.in_process() as client:
        client.call("add", {"a": 1, "b": 2})
        client.call("add", {"a": 2, "b": 3})
        with pytest.raises(McpError):
            client.request("no/such", {})
    count = functools.partial(deltas.of, "mcp_tasks_request_duration_seconds_count")
    assert (count(method="tools/call"), count(method="other"), count(method="no/such")) == (2, 1, 0)


@pytest.mark.usefixtures("metrics_on")
def test_503_refusals_are_counted_by_reason(settings: Any) -> None:
    settings.MCP_TASKS = {**settings.MCP_TASKS, "MAX_REQUESTS_IN_PROGRESS": 1}
    deltas = Deltas(
        ("mcp_tasks_requests_refused_total", {"reason": "in_progress"}),
        ("mcp_tasks_requests_refused_total", {"reason": "accept_wait"}),
    )
    admission = Admission()
    admission.enter()
    with pytest.raises(HttpError):
        admission.enter()
    assert refusal_response(2.0, 1.0).startswith(b"HTTP/1.1 503")
    assert deltas.of("mcp_tasks_requests_refused_total", reason="in_progress") == 1
    assert deltas.of("mcp_tasks_requests_refused_total", reason="accept_wait") == 1


# -- checks W012 and W013 ----------------------------------------------------------------------------


def _ids(messages: list[CheckMessage]) -> list[str | None]:
    return [message.id for message in messages]


def test_no_metrics_check_while_metrics_are_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    assert check_metrics() == []


@override_settings(MCP_TASKS={"METRICS": True})
def test_w012_when_prometheus_client_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(switch, "available", lambda: False)
    assert _ids(check_metrics()) == ["mcp_tasks.W012"]


@override_settings(MCP_TASKS={"METRICS": True})
def test_w013_without_a_writable_multiprocess_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    assert _ids(check_metrics()) == ["mcp_tasks.W013"]
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "missing"))
    [message] = check_metrics()
    assert message.id == "mcp_tasks.W013" and "not a writable directory" in message.msg
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    assert check_metrics() == []

"""What every transition of a task shares: publishing a change, its signals, the row lock,
and the transitions that end a task (completed, failed)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from ... import jsontext, signals
from ...core import background, metrics_hook
from ...core.db import db
from ...models import (
    TERMINAL_STATUSES,
    InputRequest,
    InputRequestStatus,
    Task,
    TaskLogEntry,
    TaskStatus,
    WaitingFor,
)
from . import outbox, rows
from .loop_database import LoopDatabase

logger = logging.getLogger("mcp_tasks.tasks")


def status_changed(task_id: str, old: str, new: str) -> None:
    """A status change's signals and live-admin event, after commit (none if unchanged)."""
    if old == new:
        return
    outbox.announce(task_id, "task_status_changed")
    outbox.signal(
        signals.task_status_changed, task_id=task_id, old_status=str(old), new_status=str(new)
    )
    if new in TERMINAL_STATUSES:
        outbox.signal(signals.task_finished, task_id=task_id, status=str(new))


def count_finished_on_commit(recorder: metrics_hook.Recorder, task: Task) -> None:
    """Report, after commit, that ``task`` (its row as this transaction ended it) ended."""
    tool, status = task.tool_name, str(task.status)
    ran = _seconds_between(task.started_at, task.finished_at)
    outbox.after_commit(lambda: recorder.task_finished(tool, status, ran))


def _seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else max(0.0, (end - start).total_seconds())


def _count_completed(recorder: metrics_hook.Recorder, task: Task | str, finished: datetime) -> None:
    """Count a task the worker completed (``task``: the worker's row, or its id)."""
    if isinstance(task, str):
        found = Task.objects.filter(pk=task).values_list("tool_name", "started_at").first()
        if found is None:
            return
        tool, started = found
    else:
        tool, started = task.tool_name, task.started_at
    recorder.task_finished(tool, TaskStatus.COMPLETED, _seconds_between(started, finished))


def id_of(task: Task | str) -> str:
    return task if isinstance(task, str) else task.id


def locked(task_id: str) -> Task:
    task = rows.locked_task(task_id)
    if task is None:
        raise Task.DoesNotExist(task_id)
    return task


def touch(task: Task, **changes: Any) -> None:
    """Change fields of a task whose row this transaction holds (:func:`locked`)."""
    changes["updated_at"] = timezone.now()
    for name, value in changes.items():
        setattr(task, name, value)
    rows.update_task(task.id, {}, changes)


def expired(task: Task) -> bool:
    return task.expires_at is not None and task.expires_at <= timezone.now()


def add_log(task_id: str, level: str, logger_name: str | None, data: Any) -> None:
    logger_name, data = jsontext.storable((logger_name, data), f"a log line of task {task_id}")
    TaskLogEntry.objects.create(
        task_id=task_id, level=level, logger_name=logger_name or "", data=data
    )
    outbox.announce(task_id, "task_logged")  # the task's open admin page shows it


def finish(
    task_id: str,
    status: str,
    *,
    result: Any = None,
    error: Any = None,
    message: str = "",
    wake: bool = True,
) -> bool:
    result, error, message = jsontext.storable((result, error, message), f"end of task {task_id}")
    with transaction.atomic():
        task = rows.locked_task(task_id)
        if task is None or task.is_terminal:
            return False
        end_locked(
            task, status, wake=wake, result=result, error=error, status_message=message[:2000]
        )
    return True


def end_locked(task: Task, status: str, *, wake: bool, **fields: Any) -> None:
    """End locked, non-terminal ``task``: status, fields, signals, metric, questions closed."""
    status_changed(task.id, task.status, status)
    touch(task, status=status, **fields, finished_at=timezone.now(), waiting_for=WaitingFor.NOTHING)
    if metrics_hook.recorder is not None:
        count_finished_on_commit(metrics_hook.recorder, task)
    task.input_requests.filter(status=InputRequestStatus.PENDING).update(
        status=InputRequestStatus.CLOSED
    )
    outbox.publish(task, wake=wake)


def complete(task: Task | str, result: dict[str, Any]) -> bool:
    """The tool returned (``isError`` too; ``task``: the worker's row or id). False if it ended."""
    task_id = id_of(task)
    result, finished = _completion(task_id, result)
    if rows.update_task(task_id, {"status": TaskStatus.WORKING}, finished):
        outbox.publish_by_worker(task, TaskStatus.COMPLETED, final_fields(finished))
        status_changed(task_id, TaskStatus.WORKING, TaskStatus.COMPLETED)
        if metrics_hook.recorder is not None:
            recorder, ended = metrics_hook.recorder, finished["finished_at"]
            outbox.after_commit(lambda: _count_completed(recorder, task, ended))
        return True
    return _finish_completed(task_id, result, finished["status_message"])


async def acomplete(database: LoopDatabase, task: Task, result: dict[str, Any]) -> bool:
    """:func:`complete`, its conditional update sent from the worker's event loop."""
    result, finished = _completion(task.id, result)
    if not await rows.aupdate_task(database, task.id, {"status": TaskStatus.WORKING}, finished):
        return await db(_finish_completed)(task.id, result, finished["status_message"])
    if metrics_hook.recorder is not None:
        _count_completed(metrics_hook.recorder, task, finished["finished_at"])
    session_id = task.session_id if task.era == "legacy" else None
    final = final_fields(finished)
    background.in_background(
        outbox.apublish_task_change(task.id, TaskStatus.COMPLETED, session_id, fields=final),
        logger,
        "could not publish the change of task %s",
        task.id,
    )
    if (
        signals.listened(signals.task_status_changed)
        or signals.listened(signals.task_finished)
        or outbox.may_announce()
    ):
        await db(status_changed)(task.id, TaskStatus.WORKING, TaskStatus.COMPLETED)
    return True


def _completion(task_id: str, result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The result as stored, and the changes that complete the task with it."""
    result = jsontext.storable(result, f"end of task {task_id}")
    now = timezone.now()
    return result, {
        "status": TaskStatus.COMPLETED,
        "result": result,
        "error": None,
        "status_message": "Completed with an error" if result.get("isError") else "Completed",
        "finished_at": now,
        "updated_at": now,
    }


#: Largest JSON (bytes) a change carries (:func:`final_fields`, :func:`asked_fields`).
FINAL_FIELDS_MAX = 16 * 1024


def _carried(
    status: str, status_message: str, updated_at: datetime, name: str, value: Any
) -> dict[str, Any] | None:
    """A wake-up's fields: the task's new state and ``value`` as JSON text (None: too large).
    JSON text, as msgpack cannot carry integers past 64 bits."""
    text = json.dumps(value, separators=(",", ":"))
    if len(text) > FINAL_FIELDS_MAX:
        return None
    return {
        "status": status,
        "status_message": status_message,
        "updated_at": updated_at.isoformat(),
        name: text,
    }


def final_fields(changes: dict[str, Any]) -> dict[str, Any] | None:
    """What a wake-up carries of a task that ended with ``changes`` (None: too large)."""
    outcome = {"result": changes.get("result"), "error": changes.get("error")}
    status = str(changes["status"])
    return _carried(status, changes["status_message"], changes["updated_at"], "outcome", outcome)


def asked_fields(
    status_message: str, updated_at: datetime, questions: Sequence[InputRequest]
) -> dict[str, Any] | None:
    """What a wake-up carries of a task that asked the client ``questions`` (None: too large)."""
    asked = [[question.key, question.method, question.params] for question in questions]
    status = str(TaskStatus.INPUT_REQUIRED)
    return _carried(status, status_message, updated_at, "questions", asked)


def with_fields(task: Task, fields: dict[str, Any]) -> Task:
    """``task`` as the change that carried ``fields`` left it (:func:`final_fields`,
    :func:`asked_fields`, :attr:`~mcp_tasks.models.Task.carried_questions`)."""
    task.status = fields["status"]
    task.status_message = fields["status_message"]
    task.updated_at = datetime.fromisoformat(fields["updated_at"])
    if "outcome" in fields:
        outcome = json.loads(fields["outcome"])
        task.result, task.error = outcome["result"], outcome["error"]
    task.carried_questions = (
        [rows.WaitingQuestion(*question) for question in json.loads(fields["questions"])]
        if "questions" in fields
        else None
    )
    return task


def _finish_completed(task_id: str, result: dict[str, Any], message: str) -> bool:
    """Complete a task the conditional update missed (open question; nothing if it ended)."""
    return finish(task_id, TaskStatus.COMPLETED, result=result, message=message, wake=False)


def fail(task_id: str, error: dict[str, Any], message: str | None = None) -> bool:
    """A JSON-RPC error ended the task. False if already terminal."""
    return finish(
        task_id,
        TaskStatus.FAILED,
        error=error,
        message=message or str(error.get("message", "Failed")),
    )

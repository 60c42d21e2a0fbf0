"""The wire shapes of a task, both eras: ``Task``, ``DetailedTask`` and the ``taskId`` rule."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..core.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, error_object
from ..exceptions import ProtocolError
from .constants import META_RELATED_TASK
from .ports import QuestionView, TaskView
from .stored import is_lookup_key


def not_found() -> ProtocolError:
    """The one error for a task that is unknown, expired or someone else's (``-32602``)."""
    return ProtocolError(INVALID_PARAMS, "Task not found")


def task_id_of(params: dict[str, Any]) -> str:
    """``params.taskId`` when it can name a task; anything else is not found (``-32602``)."""
    task_id = params.get("taskId")
    if not is_lookup_key(task_id):
        raise not_found()
    return str(task_id)


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_fields(task: TaskView, *, legacy: bool = False) -> dict[str, Any]:
    """The ``Task`` object of ``CreateTaskResult``, ``tasks/get`` and notifications;
    ``legacy``: 2025-11-25's (``ttl``/``pollInterval``; an ``isError`` result is ``failed``)."""
    status = task.status
    if (
        legacy
        and status == "completed"
        and isinstance(task.result, dict)
        and task.result.get("isError")
    ):
        status = "failed"
    fields: dict[str, Any] = {
        "taskId": task.id,
        "status": status,
        "createdAt": iso(task.created_at),
        "lastUpdatedAt": iso(task.updated_at),
        "ttl" if legacy else "ttlMs": task.ttl_ms,
    }
    if task.status_message:
        fields["statusMessage"] = task.status_message
    if task.poll_interval_ms is not None:
        fields["pollInterval" if legacy else "pollIntervalMs"] = task.poll_interval_ms
    return fields


def legacy_task(task: TaskView) -> dict[str, Any]:
    """The ``Task`` object of 2025-11-25."""
    return task_fields(task, legacy=True)


def input_request(method: str, params: Any) -> dict[str, Any]:
    """One entry of ``inputRequests``: the question's method, and its params when it has any."""
    return {"method": method, "params": params} if params else {"method": method}


def input_requests(questions: Sequence[QuestionView]) -> dict[str, Any]:
    """The ``inputRequests`` of a ``DetailedTask`` or an MRTR round: each question by its key."""
    return {question.key: input_request(question.method, question.params) for question in questions}


def detailed_task(task: TaskView, questions: Sequence[QuestionView] = ()) -> dict[str, Any]:
    """The ``DetailedTask``: the task, its ``questions`` (``input_required``), result or error."""
    fields = task_fields(task)
    if task.status == "input_required":
        fields["inputRequests"] = input_requests(questions)
    elif task.status == "completed":
        # The result as the call would have answered (2026-07-28: with resultType).
        fields["result"] = {**(task.result or {"content": []}), "resultType": "complete"}
    elif task.status == "failed":
        fields["error"] = task.error or error_object(INTERNAL_ERROR, "Failed")
    return fields


def failure(task: TaskView) -> ProtocolError:
    """The JSON-RPC error of a ``failed`` task: what its call would have answered."""
    error = task.error if isinstance(task.error, dict) else {}
    code = error.get("code")
    return ProtocolError(
        code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
        str(error.get("message") or "The task failed"),
        error.get("data"),
    )


def related(task_id: str) -> dict[str, Any]:
    """The ``_meta`` that ties a message to its task (2025-11-25)."""
    return {META_RELATED_TASK: {"taskId": task_id}}

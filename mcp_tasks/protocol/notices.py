"""``notifications/progress`` and ``notifications/message`` of a request or 2025-11-25 task."""

from __future__ import annotations

from typing import Any

from ..core.jsonrpc import Message, notification
from .task_shapes import related


def progress_params(
    token: str | int, progress: float, total: float | None, message: str | None
) -> dict[str, Any]:
    params: dict[str, Any] = {"progressToken": token, "progress": progress}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    return params


def log_params(level: str, data: Any, logger_name: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"level": level, "data": data}
    if logger_name:
        params["logger"] = logger_name
    return params


def task_event_notification(event: dict[str, Any]) -> Message:
    """The notification of a task's ``progress`` or ``log`` event (see
    :meth:`mcp_tasks.tasks.worker.job.Job.report_progress`)."""
    if event["kind"] == "progress":
        method = "notifications/progress"
        params = progress_params(
            event["progress_token"], event["progress"], event.get("total"), event.get("message")
        )
    else:
        method = "notifications/message"
        params = log_params(event["level"], event["data"], event.get("logger"))
    params["_meta"] = related(event["task_id"])
    return notification(method, params)

"""Running a failed task again: a new task with the same tool, arguments, principal and
client context, linked to the failed one (``Task.retry_of``)."""

from __future__ import annotations

from ...core import task_contract
from ...models import Task, TaskStatus
from . import service


class NotRetryable(ValueError):  # noqa: N818
    """Only a failed task can be retried (the message says why this one cannot)."""


def retry(task_id: str) -> Task:
    """Create and queue the new task; raises :class:`~mcp_tasks.core.task_contract.TaskNotFound` or
    :class:`NotRetryable`. The creating request's access token and headers are carried
    over (still encrypted at rest); its progress token and request id are not."""
    task = Task.objects.select_related("snapshot").filter(pk=task_id).first()
    if task is None:
        raise task_contract.TaskNotFound(task_id)
    if task.status != TaskStatus.FAILED:
        raise NotRetryable(f"the task is {task.get_status_display().lower()}, not failed")
    return service.create_task(
        task_contract.NewTask(
            tool_name=task.tool_name,
            arguments=task.arguments,
            caller=service.stored_caller(task, service.snapshot_secrets(task)),
            prepared=(task.snapshot.prior_answers or {}).get("prepared"),
            queue=task.queue,
            ttl=None if task.ttl_ms is None else task.ttl_ms / 1000,
            poll_interval=None if task.poll_interval_ms is None else task.poll_interval_ms / 1000,
            timeout=task.job_timeout,
            retry_of=task.id,
        )
    )

"""Tasks whose worker died or whose job was lost, tasks no worker serves, expired rows:
noticed by reads (``tasks/get``) and by the workers' housekeeping."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ...conf import get_config
from ...core import log_fields
from ...core.jsonrpc import INTERNAL_ERROR
from ...models import Task, TaskStatus, WaitingFor
from ..queues import queue
from . import outbox, rows
from .changes import add_log, end_locked, locked, touch

logger = logging.getLogger("mcp_tasks.tasks")

#: The log line of a task whose job was queued again.
REQUEUED = "its job was lost (Redis restarted or failed over): queued again"


def check_liveness(task: Task) -> bool:
    """Fail a task whose worker died, re-queue a lost job, flag a queue with no worker; True
    if the task changed."""
    if not may_be_lost(task):
        return False
    if task.heartbeat_at is not None:
        return fail_silent(task.id)
    if not queue.job_exists(task):
        return requeue_lost(task.id)
    return _note_unserved(task)


def _note_unserved(task: Task) -> bool:
    """Say (status message, log) that a long-queued task's queue has no worker; True if changed."""
    if task.waiting_for:
        return False  # it waits for its limit, its retry, or its turn
    workers = queue.queue_workers(task.queue)
    if workers.task > 0:
        return False
    message = f"Not started: {unserved_reason(task.queue, workers)}"
    if task.status_message == message:
        return False
    changed = Task.objects.filter(pk=task.id, status=TaskStatus.WORKING, heartbeat_at=None).update(
        status_message=message, updated_at=timezone.now()
    )
    if changed:
        logger.warning(
            "task %s (%s): %s", task.id, task.tool_name, message, extra=log_fields.of(task)
        )
        outbox.publish_by_worker(task, TaskStatus.WORKING)
    return bool(changed)


def unserved_reason(name: str, workers: queue.QueueWorkers) -> str:
    """Why the queue's tasks do not start, and what to start instead."""
    start = (
        f"`python manage.py rqworker {name}` with RQ['WORKER_CLASS'] = "
        "'mcp_tasks.tasks.worker.TaskWorker'"
    )
    if workers.other:
        return (
            f"the rq workers of queue {name!r} are not task workers (rq's own worker class "
            f"never takes task jobs): start {start}, or pass --worker-class "
            "mcp_tasks.tasks.worker.TaskWorker"
        )
    return f"no task worker is running for queue {name!r} (start {start})"


def unserved_queues() -> dict[str, str]:
    """Queues with tasks waiting to start and no live task worker, with :func:`unserved_reason`."""
    waiting = Task.objects.filter(status=TaskStatus.WORKING, heartbeat_at=None).exclude(
        waiting_for=WaitingFor.STAFF
    )
    names = sorted(set(waiting.values_list("queue", flat=True)))
    workers = {name: queue.queue_workers(name) for name in names}
    return {
        name: unserved_reason(name, found) for name, found in workers.items() if found.task == 0
    }


def may_be_lost(task: Task) -> bool:
    """Whether its worker stopped beating or its job may be lost (:func:`check_liveness`)."""
    if task.status != TaskStatus.WORKING or task.waiting_for == WaitingFor.STAFF:
        return False  # a task waiting for staff has no job: it is parked like a question
    config = get_config()
    if task.heartbeat_at is not None:
        silent = timezone.now() - task.heartbeat_at
        return silent > timedelta(seconds=config.TASK_LOST_AFTER)
    waited = timezone.now() - task.updated_at
    return waited > timedelta(seconds=config.TASK_REQUEUE_AFTER)


def fail_silent(task_id: str) -> bool:
    """Fail a task whose worker stopped beating (rechecked under the row lock: a worker that
    beat, asked a question or moved to a new run since the task was read keeps it)."""
    stopped = "The worker running this task stopped unexpectedly"
    silence = f"no heartbeat for {get_config().TASK_LOST_AFTER:g}s"
    with transaction.atomic():
        task = rows.locked_task(task_id)
        if task is None or task.heartbeat_at is None or not may_be_lost(task):
            return False
        error = {"code": INTERNAL_ERROR, "message": stopped}
        end_locked(
            task, TaskStatus.FAILED, wake=True, error=error, status_message=f"{stopped} ({silence})"
        )
    return True


def requeue_lost(task_id: str) -> bool:
    """Queue a new job for a task whose job was lost (once: rechecked under the row lock)."""
    with transaction.atomic():
        task = locked(task_id)
        # Lost: queued (never started this run) for too long, and rq no longer knows the job.
        if task.heartbeat_at is not None or not may_be_lost(task) or queue.job_exists(task):
            return False
        touch(task, runs=task.runs + 1, heartbeat_at=None)
        # Where operators look: the log and the task's log lines in the admin.
        add_log(task_id, "warning", "mcp_tasks", REQUEUED)
        outbox.enqueue(task)
    logger.warning("task %s (%s): %s", task.id, task.tool_name, REQUEUED, extra=log_fields.of(task))
    return True


def recover_stalled() -> int:
    """Check every unfinished task; returns how many changed."""
    changed = 0
    for task in Task.objects.filter(status=TaskStatus.WORKING):
        try:
            changed += check_liveness(task)
        except Exception:
            logger.exception("liveness check of task %s failed", task.id, extra=log_fields.of(task))
    return changed


def purge_expired() -> int:
    """Delete tasks past their TTL (with their snapshots, logs and questions)."""
    _, per_model = Task.objects.filter(expires_at__lte=timezone.now()).delete()
    return per_model.get(Task._meta.label, 0)

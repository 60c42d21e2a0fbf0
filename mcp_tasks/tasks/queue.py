"""rq jobs for tasks: enqueue, stop, check. The job id is derived from the task id."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import django_rq
from rq import Queue
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus

from ..conf import get_config
from . import embedded

if TYPE_CHECKING:
    from ..models import Task

logger = logging.getLogger("mcp_tasks.tasks")

JOB_FUNCTION = "mcp_tasks.tasks.job.run_task"


_queues: dict[str, Queue] = {}

#: The settings a queue (and a client that sends to it) is made from.
QUEUE_SETTINGS = ("MCP_TASKS", "RQ_QUEUES")


def get_queue(name: str) -> Queue:
    """The rq queue ``name``: django-rq's, or the in-process one in embedded mode.

    Kept per process (django-rq makes a new Redis client, so a new connection, per call;
    redis-py's pool is thread-safe and starts afresh in a forked child). Forgotten when
    ``MCP_TASKS`` or ``RQ_QUEUES`` change (:func:`forget_queues`).
    """
    queue = _queues.get(name)
    if queue is None:
        if get_config()["EMBEDDED_WORKER"]:
            queue = Queue(name, connection=embedded.connection())
        else:
            queue = django_rq.get_queue(name)
        _queues[name] = queue
    return queue


def forget_queues(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: queues follow ``MCP_TASKS`` and ``RQ_QUEUES``."""
    if setting in QUEUE_SETTINGS:
        _queues.clear()


def _job(task: Task, queue: Queue) -> Job:
    return Job.create(
        JOB_FUNCTION,
        args=(task.id, task.runs),
        id=task.job_id,
        connection=queue.connection,
        timeout=task.job_timeout,
        result_ttl=0,
        failure_ttl=24 * 3600,
        description=f"mcp_tasks {task.tool_name} {task.id[:8]}",
        origin=queue.name,
    )


def enqueue(task: Task) -> None:
    """Queue a job that runs (or resumes) ``task``; raises when Redis is unreachable."""
    queue = get_queue(task.queue)
    with queue.connection.pipeline() as pipeline:  # one round trip (rq alone makes two)
        queue.enqueue_job(_job(task, queue), pipeline=pipeline)
        pipeline.execute()


def stage_enqueue(task: Task) -> list[tuple[Any, Any]]:
    """The Redis commands :func:`enqueue` sends, as rq writes them (``(args, options)``
    of a redis-py pipeline), without sending them: :mod:`mcp_tasks.tasks.loop_redis` sends
    them from an event loop. Needs no round trip once the queue knows the server's version
    (its first job)."""
    queue = get_queue(task.queue)
    pipeline = queue.connection.pipeline()
    queue.enqueue_job(_job(task, queue), pipeline=pipeline)
    return list(pipeline.command_stack)


def job_exists(task: Task) -> bool:
    """True when the task's current job is still known to rq (queued or running)."""
    queue = get_queue(task.queue)
    try:
        status = Job.fetch(task.job_id, connection=queue.connection).get_status()
    except NoSuchJobError:
        return False
    return status in (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED)


def stop(job_id: str, queue_name: str | None = None, *, kill_running: bool = True) -> None:
    """Remove a queued job, or stop a running one (forking workers; others cancel
    cooperatively when they see the task's new status)."""
    queue = get_queue(queue_name or get_config()["TASK_QUEUE"])
    try:
        job = Job.fetch(job_id, connection=queue.connection)
        status = job.get_status()
        if status == JobStatus.STARTED:
            if kill_running:
                send_stop_job_command(queue.connection, job_id)
        elif status in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
            job.cancel()
    except (NoSuchJobError, InvalidJobOperation):
        pass
    except Exception:  # Redis down: the worker still sees the cancelled status
        logger.warning("could not stop job %s", job_id, exc_info=True)

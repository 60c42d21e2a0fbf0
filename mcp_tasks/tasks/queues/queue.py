"""rq jobs for tasks (ids derived from the task's): enqueue, stop, check. rq writes a job;
it waits in the fair queue (:mod:`.fair_queue`), not in rq's list."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import django_rq
from redis.exceptions import NoScriptError
from rq import Queue, worker_registration
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus

from ...conf import get_config
from ...core import redis_clients
from . import embedded, fair_queue

if TYPE_CHECKING:
    from ...models import Task

logger = logging.getLogger("mcp_tasks.tasks")

JOB_FUNCTION = "mcp_tasks.tasks.worker.job.run_task"


_queues: dict[str, Queue] = {}

#: The settings a queue (and a client that sends to it) is made from.
QUEUE_SETTINGS = ("MCP_TASKS", "RQ_QUEUES")


def get_queue(name: str) -> Queue:
    """The rq queue ``name`` (django-rq's, or embedded mode's), cached per process: django-rq
    makes a client per call; redis-py's pool is thread- and fork-safe (:func:`forget_queues`)."""
    queue = _queues.get(name)
    if queue is None:
        if get_config().EMBEDDED_WORKER:
            queue = Queue(name, connection=embedded.connection())
        else:
            queue = django_rq.get_queue(name, connection=redis_clients.queue_client(name))
        _queues[name] = queue
    return queue


def forget_queues(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: queues follow ``MCP_TASKS`` and ``RQ_QUEUES``."""
    if setting in QUEUE_SETTINGS:
        _queues.clear()
        _live_workers.clear()


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


def enqueue(task: Task, *, delay: float = 0.0) -> None:
    """Queue a job that runs or resumes ``task`` in ``delay`` seconds; raises if Redis is down."""
    queue = get_queue(task.queue)
    commands = stage_enqueue(task, delay=delay)
    try:
        _send(queue.connection, commands)  # one round trip
    except NoScriptError:  # a Redis that restarted since the script went there
        fair_queue.load_push(queue.connection)
        _send(queue.connection, commands)


def _send(connection: Any, commands: list[tuple[Any, Any]]) -> None:
    with connection.pipeline() as pipeline:
        pipeline.command_stack.extend(commands)
        pipeline.execute()


def stage_enqueue(task: Task, *, delay: float = 0.0) -> list[tuple[Any, Any]]:
    """The commands of :func:`enqueue`, unsent: rq's ``enqueue_job``, its push replaced by
    :data:`.fair_queue.PUSH` (no round trip once the server's version is known)."""
    queue = get_queue(task.queue)
    job = _job(task, queue)
    pipeline = queue.connection.pipeline()
    queue.enqueue_job(job, pipeline=pipeline)
    commands = [
        command
        for command in pipeline.command_stack
        if not (command[0][0] in ("RPUSH", "LPUSH") and command[0][1] == queue.key)
    ]
    if len(commands) != len(pipeline.command_stack) - 1:
        raise RuntimeError("rq's enqueue_job did not push the job to its queue once")
    commands.append(fair_queue.push_command(*fair_queue.push_args(task, job, delay=delay)))
    return commands


def job_exists(task: Task) -> bool:
    """True when the task's current job is still known to rq (queued or running)."""
    queue = get_queue(task.queue)
    try:
        status = Job.fetch(task.job_id, connection=queue.connection).get_status()
    except NoSuchJobError:
        return False
    return status in (JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED)


#: Seconds a process remembers how many workers serve a queue (:func:`queue_workers`).
LIVE_WORKERS_TTL = 5.0
#: Marks a task worker's rq hash (rq's own workers take no task jobs); see ``serialize``.
TASK_WORKER_FIELD = "mcp_tasks_task_worker"


@dataclass(frozen=True)
class QueueWorkers:
    """A queue's alive rq workers: ``task`` workers, and ``other`` (rq's own: no task jobs)."""

    task: int
    other: int


_live_workers: dict[str, tuple[float, QueueWorkers]] = {}


def queue_workers(queue_name: str) -> QueueWorkers:
    """The queue's alive rq workers (key not expired), remembered :data:`LIVE_WORKERS_TTL` s."""
    seen = _live_workers.get(queue_name)
    if seen is not None and time.monotonic() - seen[0] < LIVE_WORKERS_TTL:
        return seen[1]
    queue = get_queue(queue_name)
    keys = worker_registration.get_keys(queue=queue)
    task = other = 0
    if keys:
        with queue.connection.pipeline(transaction=False) as pipeline:
            for key in keys:
                pipeline.hmget(key, "birth", TASK_WORKER_FIELD)
            for birth, takes_tasks in pipeline.execute():
                if birth is not None:
                    task, other = (task + 1, other) if takes_tasks else (task, other + 1)
    workers = QueueWorkers(task, other)
    _live_workers[queue_name] = (time.monotonic(), workers)
    return workers


def live_workers(queue_name: str) -> int:
    """How many alive workers take the queue's task jobs."""
    return queue_workers(queue_name).task


def stop(job_id: str, queue_name: str | None = None, *, kill_running: bool = True) -> None:
    """Remove a queued job, or stop a running one (``kill_running``; workers see the status too)."""
    queue = get_queue(queue_name or get_config().TASK_QUEUE)
    try:
        job = Job.fetch(job_id, connection=queue.connection)
        status = job.get_status()
        if status == JobStatus.STARTED:
            if kill_running:
                send_stop_job_command(queue.connection, job_id)
        elif status in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
            job.cancel()
            fair_queue.withdraw(queue.connection, queue.name, job_id)
    except (NoSuchJobError, InvalidJobOperation):
        pass
    except Exception:  # Redis down: the worker still sees the cancelled status
        logger.warning("could not stop job %s", job_id, exc_info=True)

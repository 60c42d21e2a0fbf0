"""A task's life from its creation to its cancel: the new rows (under quota), reading a
caller's tasks, the transitions of the worker that runs it (claim, progress, retry), and
a failed task run again (:func:`retry`)."""

from __future__ import annotations

import logging
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from ... import jsontext, signals
from ...authoring.registry import mcp
from ...conf import get_config
from ...core import log_fields, metrics_hook, trace_hook
from ...core.db import db
from ...core.jsonrpc import INTERNAL_ERROR
from ...core.task_contract import Caller, NewTask, QuotaExceeded, TaskNotFound
from ...models import (
    TERMINAL_STATUSES,
    Task,
    TaskSnapshot,
    TaskStatus,
    WaitingFor,
)
from ..queues import fair_queue, loop_redis, queue
from . import crypto, outbox, rows
from .changes import (
    add_log,
    end_locked,
    expired,
    fail,
    id_of,
    locked,
    touch,
)
from .loop_database import LoopDatabase
from .recovery import check_liveness, may_be_lost

logger = logging.getLogger("mcp_tasks.tasks")


def _quotas(task: Task) -> list[tuple[str, Any, int]]:
    """The limits on active tasks that apply to the new ``task`` (``rows.Quotas``)."""
    config = get_config()
    quotas: list[tuple[str, Any, int]] = []
    if config.MAX_ACTIVE_TASKS is not None:
        quotas.append(("principal_scope", task.principal_scope, config.MAX_ACTIVE_TASKS))
    if config.MAX_ACTIVE_TASKS_PER_CLIENT is not None and task.client_id:
        quotas.append(("client_id", task.client_id, config.MAX_ACTIVE_TASKS_PER_CLIENT))
    return quotas


def _over_quota(task: Task, quotas: list[tuple[str, Any, int]]) -> QuotaExceeded:
    """The refusal of a task that did not fit its quotas (which one is read again)."""
    column, value, limit = rows.exceeded_quota(quotas) or quotas[0]
    if column == "principal_scope":
        error = QuotaExceeded("MAX_ACTIVE_TASKS", limit, "this caller")
    else:
        error = QuotaExceeded("MAX_ACTIVE_TASKS_PER_CLIENT", limit, f"OAuth client {value!r}")
    # The task is never written: no task_id.
    fields = {"tool": task.tool_name, "principal": task.principal_scope}
    logger.warning("task of %s refused: %s", task.principal_scope, error, extra=fields)
    if metrics_hook.recorder is not None:
        metrics_hook.recorder.quota_refused(error.setting)
    return error


def create_task(new: NewTask) -> Task:
    """Record the task and its snapshot, commit, then enqueue its job.

    Returns only once ``get_task`` finds the task and its job is queued. Raises
    :class:`QuotaExceeded`, having written nothing, when a quota has no room left.
    """
    task, snapshot = _new_rows(new)
    quotas = _quotas(task)
    if not rows.insert_task(task, snapshot, quotas=quotas):  # together, atomically
        raise _over_quota(task, quotas)
    outbox.signal(signals.task_created, task_id=task.id, task=task)
    outbox.announce(task.id, "task_created")
    if metrics_hook.recorder is not None:
        _count_created(metrics_hook.recorder, task.tool_name)
    try:
        queue.enqueue(task)
    except Exception as exc:
        _not_queued(task, exc)
    return task


async def acreate_task(new: NewTask) -> Task:
    """:func:`create_task` from async code: on PostgreSQL the rows go in from the event
    loop and the job is queued from it (:mod:`~mcp_tasks.tasks.state.loop_database`,
    :mod:`~mcp_tasks.tasks.queues.loop_redis`), with no hop to a thread unless a receiver of
    ``task_created`` or a live admin page waits for the news."""
    if trace_hook.tracer is None:
        return await _acreate_task(new)
    with trace_hook.tracer.creation(new.tool_name) as span:
        task = await _acreate_task(new)
        span.set("mcp_tasks.task.id", task.id)
        return task


async def _acreate_task(new: NewTask) -> Task:
    database = LoopDatabase.of_running_loop()
    if database is None or signals.listened(signals.task_created):
        return await db(create_task)(new)
    task, snapshot = _new_rows(new)
    quotas = _quotas(task)
    if not await rows.ainsert_task(database, task, snapshot, quotas):
        raise await db(_over_quota)(task, quotas)
    if metrics_hook.recorder is not None:  # inserted and committed from the loop
        metrics_hook.recorder.task_created(task.tool_name)
    if outbox.may_announce():
        await db(outbox.announce_now)(task.id, "task_created")
    try:
        await loop_redis.aenqueue(task)
    except Exception as exc:
        await db(_not_queued)(task, exc)
    return task


def _count_created(recorder: metrics_hook.Recorder, tool: str) -> None:
    outbox.after_commit(lambda: recorder.task_created(tool))


def _first_start(task: Task | None, run: int | None) -> Task | None:
    """``task``, just claimed; its queue wait is reported when this is its first run."""
    recorder = metrics_hook.recorder
    if recorder is not None and task is not None and task.started_at is not None:
        if run == 0 or (run is None and task.started_at == task.heartbeat_at):
            queued = (task.started_at - task.created_at).total_seconds()
            recorder.task_started(task.tool_name, max(0.0, queued))
    return task


def _not_queued(task: Task, exc: Exception) -> None:
    """The job of the new ``task`` could not be queued: the task fails; raises."""
    logger.error("could not queue task %s", task.id, exc_info=exc, extra=log_fields.of(task))
    fail(
        task.id,
        {"code": INTERNAL_ERROR, "message": "The task could not be queued"},
        "The task could not be queued",
    )
    raise RuntimeError("the task queue is unavailable") from exc


def _new_rows(new: NewTask) -> tuple[Task, TaskSnapshot]:
    """The rows of a new task (not saved)."""
    config = get_config()
    ttl = config.TASK_TTL if new.ttl is None else new.ttl
    poll = config.TASK_POLL_INTERVAL if new.poll_interval is None else new.poll_interval
    now = timezone.now()
    caller = new.caller
    task = Task(
        id=secrets.token_urlsafe(32),
        principal_scope=caller.principal_scope,
        client_id=caller.client_id[:255],
        tool_name=new.tool_name,
        arguments=new.arguments,
        status=TaskStatus.WORKING,
        status_message="Queued",
        era=caller.era,
        session_id=new.session_id or f"task-session-{secrets.token_hex(16)}",
        origin_request_id=new.origin_request_id,
        queue=new.queue or config.TASK_QUEUE,
        job_timeout=new.timeout or config.TASK_TIMEOUT,
        ttl_ms=None if ttl is None else int(ttl * 1000),
        poll_interval_ms=int(poll * 1000),
        expires_at=None if ttl is None else now + timedelta(seconds=ttl),
        created_at=now,
        updated_at=now,
        retry_of_id=new.retry_of,
    )
    snapshot = TaskSnapshot(
        task=task,
        era=caller.era,
        protocol_version=caller.protocol_version,
        client_info=caller.client_info,
        client_capabilities=caller.client_capabilities,
        log_level=caller.log_level or "",
        progress_token=new.progress_token,
        prior_answers=_prior_answers(new),
        # Nothing to keep secret (an anonymous call, no allow-listed header): nothing sealed.
        sealed=_sealed(caller),
    )
    return task, snapshot


def _sealed(caller: Caller) -> str:
    """The caller's secrets, encrypted ("": nothing to keep secret, an anonymous call with
    no allow-listed header)."""
    if not caller.access_token and not caller.headers:
        return ""
    return crypto.seal({"access_token": caller.access_token, "headers": caller.headers})


def stored_caller(task: Task, secrets: dict[str, Any]) -> Caller:
    """The caller a stored task runs for, from its snapshot and its unsealed ``secrets``
    (:func:`snapshot_secrets`)."""
    snapshot = task.snapshot
    return Caller(
        era=snapshot.era,
        protocol_version=snapshot.protocol_version,
        principal_scope=task.principal_scope,
        client_info=snapshot.client_info,
        client_capabilities=snapshot.client_capabilities,
        log_level=snapshot.log_level or None,
        access_token=secrets.get("access_token"),
        headers=secrets.get("headers") or {},
    )


def _prior_answers(new: NewTask) -> dict[str, Any]:
    """What the snapshot's ``prior_answers`` starts with: the tool's prepared value and,
    while tracing, the creating request's trace context (``trace``: W3C ``traceparent``),
    the parent of the task's jobs."""
    if trace_hook.tracer is None:
        return {"prepared": new.prepared}
    return {"prepared": new.prepared, "trace": trace_hook.tracer.carrier()}


def _live(queryset: Any) -> Any:
    return queryset.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


def _found(task_id: Any, task: Task | None) -> Task:
    """``task`` as read for its owner, or :class:`TaskNotFound` when there is none or it
    expired."""
    if task is None or expired(task):
        raise TaskNotFound(task_id)
    return task


def _require_lookup_id(task_id: Any) -> str:
    if not isinstance(task_id, str) or not task_id or len(task_id) > 64:
        raise TaskNotFound(task_id)
    return task_id


def get_task(task_id: Any, principal_scope: str) -> Task:
    """The caller's task, or :class:`TaskNotFound` (unknown, expired, someone else's)."""
    task = _found(task_id, rows.task_of(_require_lookup_id(task_id), principal_scope))
    if check_liveness(task):
        task.refresh_from_db()
    return task


async def aget_task(task_id: Any, principal_scope: str) -> Task:
    """:func:`get_task` from async code: on PostgreSQL read from the event loop (Django's
    thread only for a task that may have lost its worker or its job)."""
    database = LoopDatabase.of_running_loop()
    if database is None:
        return await db(get_task)(task_id, principal_scope)
    lookup = _require_lookup_id(task_id)
    task = _found(task_id, await rows.atask_of(database, lookup, principal_scope))
    if may_be_lost(task):
        return await db(get_task)(task_id, principal_scope)
    return task


def find_task(task_id: str) -> Task | None:
    """The task ``task_id`` whoever owns it (callers check the owner), or None."""
    return Task.objects.filter(pk=task_id).first()


def list_tasks(principal_scope: str) -> Any:
    """The caller's live tasks, newest first."""
    return _live(Task.objects.filter(principal_scope=principal_scope)).order_by("-created_at", "id")


async def aowned_task_ids(task_ids: list[str], principal_scope: str) -> list[str]:
    """The ids among ``task_ids`` that name the principal's tasks (read from the loop)."""
    found = Task.objects.filter(pk__in=task_ids, principal_scope=principal_scope).only("id")
    return [task.id async for task in found]


def snapshot_secrets(task: Task) -> dict[str, Any]:
    """The decrypted secrets of a task's snapshot (raises ``SnapshotDecryptionError``)."""
    value = crypto.unseal(task.snapshot.sealed)
    return value if isinstance(value, dict) else {}


def begin_run(
    task_id: str, worker_name: str, run: int | None = None, claimed_at: datetime | None = None
) -> Task | None:
    """Job number ``run`` starts working on the task (loaded with its snapshot); None when
    there is nothing to do (the task ended, waits for answers, or a newer job replaced
    this one). One conditional update: only a ``working`` task of that run is taken."""
    if run is None:  # no run number: the first start keeps its time
        now = timezone.now()
        runnable = Task.objects.filter(pk=task_id, status=TaskStatus.WORKING)
        if not runnable.update(
            heartbeat_at=now,
            worker_name=worker_name[:255],
            waiting_for=WaitingFor.NOTHING,
            status_message="Working",
            started_at=Coalesce("started_at", Value(now)),
            updated_at=now,
        ):
            return None
        task = rows.task_with_snapshot(task_id)
    else:
        task = rows.claim_task(task_id, *_claim(worker_name, run, claimed_at))
    return task if metrics_hook.recorder is None else _first_start(task, run)


async def abegin_run(
    database: LoopDatabase,
    task_id: str,
    worker_name: str,
    run: int,
    claimed_at: datetime | None = None,
) -> Task | None:
    """:func:`begin_run` of a numbered job, sent from the worker's event loop."""
    claim = _claim(worker_name, run, claimed_at)
    task = await rows.aclaim_task(database, task_id, *claim)
    return task if metrics_hook.recorder is None else _first_start(task, run)


def _claim(
    worker_name: str, run: int, claimed_at: datetime | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The condition and the changes of job number ``run``'s claim. The status stays
    ``working``: nobody needs to hear of it.

    Only a task no job holds is claimed (no heartbeat yet): a job delivered twice (a
    Redis failover that lost the record of its start, so the job waits again on the new
    master) finds its task held and ends without running the tool a second time. A claim
    sent again with the same ``claimed_at`` (its answer was lost with a database
    connection, :func:`mcp_tasks.core.db.persistently`) finds its own heartbeat and holds."""
    now = claimed_at or timezone.now()
    changes: dict[str, Any] = {
        "heartbeat_at": now,
        "worker_name": worker_name[:255],
        "waiting_for": WaitingFor.NOTHING,
    }
    if run == 0:
        changes.update(status_message="Working", started_at=now)
    else:
        changes["status_message"] = "Resumed"
    changes["updated_at"] = now
    unheld = {"status": TaskStatus.WORKING, "runs": run, f"heartbeat_at{rows.NULL_OR}": now}
    return unheld, changes


def retry_later(
    task_id: str, run: int, attempts: int, delay: float, why: str, *, error: Any = None
) -> bool:
    """Job number ``run`` failed in a way its tool calls transient: the task stays
    ``working`` and its next attempt is queued to run in ``delay`` seconds, holding no
    worker meanwhile (its answers so far are replayed). False when the task ended or moved
    on meanwhile."""
    why = jsontext.storable(why, f"the failure of task {task_id}")[:500]
    with transaction.atomic():
        task = locked(task_id)
        if task.is_terminal or task.status != TaskStatus.WORKING or task.runs != run:
            return False
        attempt = task.attempt + 1
        touch(
            task,
            runs=task.runs + 1,
            attempt=attempt,
            heartbeat_at=None,
            waiting_for=WaitingFor.RETRY,
            status_message=f"Attempt {attempt} of {attempts} in {delay:g} s ({why})"[:2000],
        )
        add_log(task_id, "warning", "mcp_tasks", f"attempt {attempt - 1} failed: {why}")
        outbox.publish(task)
        outbox.enqueue(task, delay=delay)
    return True


def note_waiting_for_limit(task_ids: list[str]) -> int:
    """These queued tasks wait for a slot of their concurrency limit: their status message
    says which (:func:`~.fair_queue.limit_of`). Returns how many changed."""
    changed = 0
    now = timezone.now()
    for task in Task.objects.filter(pk__in=task_ids, status=TaskStatus.WORKING).only(
        "id", "tool_name", "arguments", "era", "session_id"
    ):
        limit = fair_queue.limit_of(task)
        if limit is None:
            continue
        if Task.objects.filter(pk=task.id, status=TaskStatus.WORKING).update(
            waiting_for=WaitingFor.LIMIT, status_message=limit.note, updated_at=now
        ):
            outbox.publish_by_worker(task, TaskStatus.WORKING)
            changed += 1
    return changed


def heartbeat(task_ids: list[str]) -> dict[str, str]:
    """Mark running tasks alive; returns the status of each (tasks that are gone are
    missing). A task no job holds any more (let go for its answers, its next attempt or
    a lost job queued again: no heartbeat) is left so: its next job claims it."""
    Task.objects.filter(pk__in=task_ids, heartbeat_at__isnull=False).exclude(
        status__in=TERMINAL_STATUSES
    ).update(heartbeat_at=timezone.now())
    return dict(Task.objects.filter(pk__in=task_ids).values_list("id", "status"))


def report_progress(
    task: Task | str, progress: float, total: float | None, message: str | None
) -> None:
    """The running tool reported progress (``task``: the row as the worker loaded it, or
    its id); the message becomes the ``statusMessage``."""
    task_id = id_of(task)
    message = jsontext.storable(message, f"progress of task {task_id}")
    changes: dict[str, Any] = {"progress": progress, "progress_total": total}
    if message:
        changes["status_message"] = message[:2000]
    elif total:
        changes["status_message"] = f"{progress:g}/{total:g}"
    now = timezone.now()
    changes.update(heartbeat_at=now, updated_at=now)
    # Only a running tool reports progress: its task is ``working``.
    if rows.update_task(task_id, {"status": TaskStatus.WORKING}, changes):
        outbox.publish_by_worker(task, TaskStatus.WORKING)


def cancel(task_id: str, principal_scope: str | None) -> Task:
    """Cancel the task (``principal_scope`` None: staff in the admin). Terminal tasks are
    left as they are. Raises :class:`TaskNotFound`."""
    with transaction.atomic():
        task = rows.locked_task(task_id, principal_scope)
        if task is None or (principal_scope is not None and expired(task)):
            raise TaskNotFound(task_id)
        if task.is_terminal:
            return task
        end_locked(task, TaskStatus.CANCELLED, wake=True, status_message="Cancelled")
        job_id, queue_name = task.job_id, task.queue
        # An async tool is cancelled cooperatively (CancelledError at its next await, through
        # the worker's channel-layer watch); only a sync tool's work-horse is killed.
        tool = mcp.tools.get(task.tool_name)
        kill = tool is None or not tool.is_async
        outbox.after_commit(lambda: queue.stop(job_id, queue_name, kill_running=kill))
    return task


class NotRetryable(ValueError):  # noqa: N818
    """Only a failed task can be retried (the message says why this one cannot)."""


def retry(task_id: str) -> Task:
    """Run a failed task again: a new task with the same tool, arguments, principal and
    client context, linked to the failed one (``Task.retry_of``), created and queued.
    Raises :class:`~mcp_tasks.core.task_contract.TaskNotFound` or :class:`NotRetryable`.
    The creating request's access token and headers are carried over (still encrypted at
    rest); its progress token and request id are not."""
    task = Task.objects.select_related("snapshot").filter(pk=task_id).first()
    if task is None:
        raise TaskNotFound(task_id)
    if task.status != TaskStatus.FAILED:
        raise NotRetryable(f"the task is {task.get_status_display().lower()}, not failed")
    return create_task(
        NewTask(
            tool_name=task.tool_name,
            arguments=task.arguments,
            caller=stored_caller(task, snapshot_secrets(task)),
            prepared=(task.snapshot.prior_answers or {}).get("prepared"),
            queue=task.queue,
            ttl=None if task.ttl_ms is None else task.ttl_ms / 1000,
            poll_interval=None if task.poll_interval_ms is None else task.poll_interval_ms / 1000,
            timeout=task.job_timeout,
            retry_of=task.id,
        )
    )

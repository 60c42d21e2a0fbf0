"""A task's life: creation (under quota), reads for its caller, the worker's transitions
(claim, progress, retry), cancel, and a failed task run again (:func:`retry`)."""

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
from ...models import TERMINAL_STATUSES, Task, TaskSnapshot, TaskStatus, WaitingFor
from ..queues import fair_queue, loop_redis, queue
from . import crypto, outbox, rows
from .changes import add_log, end_locked, expired, fail, id_of, locked, touch
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
    """Record task and snapshot, commit, enqueue its job; :class:`QuotaExceeded` if full."""
    task, snapshot = _new_rows(new)
    quotas = _quotas(task)
    if not rows.insert_task(task, snapshot, quotas=quotas):  # together, atomically
        raise _over_quota(task, quotas)
    outbox.signal(signals.task_created, task_id=task.id, task=task)
    outbox.announce(task.id, "task_created")
    recorder = metrics_hook.recorder
    if recorder is not None:
        outbox.after_commit(lambda: recorder.task_created(task.tool_name))
    try:
        queue.enqueue(task)
    except Exception as exc:
        _not_queued(task, exc)
    return task


async def acreate_task(new: NewTask) -> Task:
    """:func:`create_task` from async code (on PostgreSQL, from the event loop where it can)."""
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
    fail(task.id, {"code": INTERNAL_ERROR, "message": "The task could not be queued"})
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
        sealed=_sealed(caller),
    )
    return task, snapshot


def _sealed(caller: Caller) -> str:
    """The caller's secrets, encrypted ("": none, an anonymous call with no allowed header)."""
    if not caller.access_token and not caller.headers:
        return ""
    return crypto.seal({"access_token": caller.access_token, "headers": caller.headers})


def stored_caller(task: Task, secrets: dict[str, Any]) -> Caller:
    """The caller a stored task runs for, from its snapshot and :func:`snapshot_secrets`."""
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
    """The snapshot's first ``prior_answers``: the prepared value, and the trace context."""
    if trace_hook.tracer is None:
        return {"prepared": new.prepared}
    return {"prepared": new.prepared, "trace": trace_hook.tracer.carrier()}


def _found(task_id: Any, task: Task | None) -> Task:
    """``task`` as read for its owner; :class:`TaskNotFound` when missing or expired."""
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
    """:func:`get_task` from async code: read from the event loop on PostgreSQL."""
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
    live = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    return Task.objects.filter(live, principal_scope=principal_scope).order_by("-created_at", "id")


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
    """Job ``run`` claims the task (with snapshot); None if it ended, waits, or was superseded."""
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
    task = await rows.aclaim_task(database, task_id, *_claim(worker_name, run, claimed_at))
    return task if metrics_hook.recorder is None else _first_start(task, run)


def _claim(
    worker_name: str, run: int, claimed_at: datetime | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The condition and changes of job ``run``'s claim: only of a task with no heartbeat, so
    a job delivered twice (a Redis failover) does not run the tool again; a resent claim (same
    ``claimed_at``, :func:`mcp_tasks.core.db.persistently`) finds its own heartbeat."""
    now = claimed_at or timezone.now()
    changes: dict[str, Any] = {
        "heartbeat_at": now,
        "worker_name": worker_name[:255],
        "waiting_for": WaitingFor.NOTHING,
        "status_message": "Working" if run == 0 else "Resumed",
    }
    if run == 0:
        changes["started_at"] = now
    changes["updated_at"] = now
    unheld = {"status": TaskStatus.WORKING, "runs": run, f"heartbeat_at{rows.NULL_OR}": now}
    return unheld, changes


def retry_later(task_id: str, run: int, attempts: int, delay: float, why: str) -> bool:
    """Queue the next attempt in ``delay`` seconds; False if the task ended or moved on."""
    why = jsontext.storable(why, f"the failure of task {task_id}")[:500]
    with transaction.atomic():
        task = locked(task_id)
        if task.status != TaskStatus.WORKING or task.runs != run:
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
    """Note in their status that queued tasks wait for their limit; returns how many changed."""
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
    """Mark the held running tasks alive; returns each task's status (gone ones missing)."""
    Task.objects.filter(pk__in=task_ids, heartbeat_at__isnull=False).exclude(
        status__in=TERMINAL_STATUSES
    ).update(heartbeat_at=timezone.now())
    return dict(Task.objects.filter(pk__in=task_ids).values_list("id", "status"))


def report_progress(
    task: Task | str, progress: float, total: float | None, message: str | None
) -> None:
    """Record the running tool's progress (``task``: the worker's row, or its id)."""
    task_id = id_of(task)
    message = jsontext.storable(message, f"progress of task {task_id}")
    changes: dict[str, Any] = {"progress": progress, "progress_total": total}
    if message:
        changes["status_message"] = message[:2000]
    elif total:
        changes["status_message"] = f"{progress:g}/{total:g}"
    now = timezone.now()
    changes.update(heartbeat_at=now, updated_at=now)
    if rows.update_task(task_id, {"status": TaskStatus.WORKING}, changes):
        outbox.publish_by_worker(task, TaskStatus.WORKING)


def cancel(task_id: str, principal_scope: str | None) -> Task:
    """Cancel the task unless it ended (``principal_scope`` None: staff); raises TaskNotFound."""
    with transaction.atomic():
        task = rows.locked_task(task_id, principal_scope)
        if task is None or (principal_scope is not None and expired(task)):
            raise TaskNotFound(task_id)
        if task.is_terminal:
            return task
        end_locked(task, TaskStatus.CANCELLED, wake=True, status_message="Cancelled")
        job_id, queue_name = task.job_id, task.queue
        # Async tools are cancelled cooperatively; only a sync tool's work-horse is killed.
        tool = mcp.tools.get(task.tool_name)
        kill = tool is None or not tool.is_async
        outbox.after_commit(lambda: queue.stop(job_id, queue_name, kill_running=kill))
    return task


class NotRetryable(ValueError):  # noqa: N818
    """Only a failed task can be retried, within its caller's limits (the message says why
    this one cannot)."""


def retry(task_id: str) -> Task:
    """Run a failed task again as a new task (``Task.retry_of``): same tool, arguments and
    caller (token and headers still sealed), no progress token or request id. Raises
    :class:`~mcp_tasks.core.task_contract.TaskNotFound` or :class:`NotRetryable`."""
    task = Task.objects.select_related("snapshot").filter(pk=task_id).first()
    if task is None:
        raise TaskNotFound(task_id)
    if task.status != TaskStatus.FAILED:
        raise NotRetryable(f"the task is {task.get_status_display().lower()}, not failed")
    again = NewTask(
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
    try:
        return create_task(again)
    except QuotaExceeded as exc:  # its caller's other tasks fill a limit: nothing was written
        raise NotRetryable(str(exc)) from None

"""The one place that changes task state.

Every transition runs under a row lock; terminal states (completed, failed, cancelled)
never change. The wire handlers, the worker and the admin call these functions and never
write task rows themselves. Functions are synchronous (ORM); async callers wrap them with
:func:`mcp_tasks.db.db`. Each change is published to the task's channel-layer group
after the transaction commits, and sent as a Django signal (:mod:`mcp_tasks.signals`).
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from .. import background, jsontext, signals
from ..conf import get_config
from ..db import db
from ..inputs import KEY_PREFIXES
from ..jsonrpc import INTERNAL_ERROR
from ..models import (
    TERMINAL_STATUSES,
    InputRequest,
    InputRequestStatus,
    Task,
    TaskLogEntry,
    TaskSnapshot,
    TaskStatus,
    WaitingFor,
)
from ..server import mcp
from ..task_contract import InvalidAnswer, NewTask, QuotaExceeded, TaskNotFound
from . import admin_events, crypto, fair_queue, loop_redis, notify, queue, rows
from .loop_database import LoopDatabase

logger = logging.getLogger("mcp_tasks.tasks")


def _publish_on_commit(
    task: Task, *, wake: bool = False, answers: dict[str, Any] | None = None
) -> None:
    """After commit, tell the task's watchers (and, with ``wake``, the worker running it:
    the change came from someone else, with the ``answers`` it waits for) that it changed."""
    task_id, status = task.id, task.status
    session_id = task.session_id if task.era == "legacy" else None
    worker = task.worker_name if wake and task.worker_name else None
    transaction.on_commit(
        lambda: notify.publish_task_change(task_id, status, session_id, worker, answers)
    )


def _publish(task: Task | str, status: str, final: dict[str, Any] | None = None) -> None:
    """:func:`_publish_on_commit` for a change the worker running the task made with a
    conditional update (``task``: the row as the worker loaded it, or its id; ``final``:
    :func:`final_fields` of a task that ended)."""
    if isinstance(task, str):
        task = Task.objects.only("era", "session_id").get(pk=task)
    task_id = task.id
    legacy_session = task.session_id if task.era == "legacy" else None
    transaction.on_commit(
        lambda: notify.publish_task_change(task_id, status, legacy_session, final=final)
    )


def _status_changed(task_id: str, old: str, new: str) -> None:
    """The signals of a status change and the live admin's event, sent after commit
    (nothing when it did not change)."""
    if old == new:
        return
    admin_events.announce_on_commit(task_id, "task_status_changed")
    signals.send_on_commit(
        signals.task_status_changed, task_id=task_id, old_status=str(old), new_status=str(new)
    )
    if new in TERMINAL_STATUSES:
        signals.send_on_commit(signals.task_finished, task_id=task_id, status=str(new))


def _id(task: Task | str) -> str:
    return task if isinstance(task, str) else task.id


def _locked(task_id: str) -> Task:
    task = rows.locked_task(task_id)
    if task is None:
        raise Task.DoesNotExist(task_id)
    return task


def _touch(task: Task, **changes: Any) -> None:
    """Change fields of a task whose row this transaction holds (:func:`_locked`)."""
    changes["updated_at"] = timezone.now()
    for name, value in changes.items():
        setattr(task, name, value)
    rows.update_task(task.id, {}, changes)


# -- creating and reading ---------------------------------------------------------------


def _quotas(task: Task) -> list[tuple[str, Any, int]]:
    """The limits on active tasks that apply to the new ``task`` (``rows.Quotas``)."""
    config = get_config()
    quotas: list[tuple[str, Any, int]] = []
    if config["MAX_ACTIVE_TASKS"] is not None:
        quotas.append(("principal_scope", task.principal_scope, config["MAX_ACTIVE_TASKS"]))
    if config["MAX_ACTIVE_TASKS_PER_CLIENT"] is not None and task.client_id:
        quotas.append(("client_id", task.client_id, config["MAX_ACTIVE_TASKS_PER_CLIENT"]))
    return quotas


def _over_quota(task: Task, quotas: list[tuple[str, Any, int]]) -> QuotaExceeded:
    """The refusal of a task that did not fit its quotas (which one is read again)."""
    column, value, limit = rows.exceeded_quota(quotas) or quotas[0]
    if column == "principal_scope":
        error = QuotaExceeded("MAX_ACTIVE_TASKS", limit, "this caller")
    else:
        error = QuotaExceeded("MAX_ACTIVE_TASKS_PER_CLIENT", limit, f"OAuth client {value!r}")
    logger.warning("task of %s refused: %s", task.principal_scope, error)
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
    signals.send_on_commit(signals.task_created, task_id=task.id, task=task)
    admin_events.announce_on_commit(task.id, "task_created")
    try:
        queue.enqueue(task)
    except Exception as exc:
        _not_queued(task, exc)
    return task


async def acreate_task(new: NewTask) -> Task:
    """:func:`create_task` from async code: on PostgreSQL the rows go in from the event
    loop and the job is queued from it (:mod:`~mcp_tasks.tasks.loop_database`,
    :mod:`~mcp_tasks.tasks.loop_redis`), with no hop to a thread unless a receiver of
    ``task_created`` or a live admin page waits for the news."""
    database = LoopDatabase.of_running_loop()
    if database is None or signals.listened(signals.task_created):
        return await db(create_task)(new)
    task, snapshot = _new_rows(new)
    quotas = _quotas(task)
    if not await rows.ainsert_task(database, task, snapshot, quotas):
        raise await db(_over_quota)(task, quotas)
    if admin_events.may_announce():
        await db(admin_events.announce)(task.id, "task_created")
    try:
        await loop_redis.aenqueue(task)
    except Exception as exc:
        await db(_not_queued)(task, exc)
    return task


def _not_queued(task: Task, exc: Exception) -> None:
    """The job of the new ``task`` could not be queued: the task fails; raises."""
    logger.error("could not queue task %s", task.id, exc_info=exc)
    fail(
        task.id,
        {"code": INTERNAL_ERROR, "message": "The task could not be queued"},
        "The task could not be queued",
    )
    raise RuntimeError("the task queue is unavailable") from exc


def _new_rows(new: NewTask) -> tuple[Task, TaskSnapshot]:
    """The rows of a new task (not saved)."""
    config = get_config()
    ttl = config["TASK_TTL"] if new.ttl is None else new.ttl
    poll = config["TASK_POLL_INTERVAL"] if new.poll_interval is None else new.poll_interval
    now = timezone.now()
    secrets_blob = {"access_token": new.access_token, "headers": new.headers or {}}
    task = Task(
        id=secrets.token_urlsafe(32),
        principal_scope=new.principal_scope,
        client_id=str((new.access_token or {}).get("client_id") or "")[:255],
        tool_name=new.tool_name,
        arguments=new.arguments,
        status=TaskStatus.WORKING,
        status_message="Queued",
        era=new.era,
        session_id=new.session_id or f"task-session-{secrets.token_hex(16)}",
        origin_request_id=new.origin_request_id,
        queue=new.queue or config["TASK_QUEUE"],
        job_timeout=new.timeout or config["TASK_TIMEOUT"],
        ttl_ms=None if ttl is None else int(ttl * 1000),
        poll_interval_ms=int(poll * 1000),
        expires_at=None if ttl is None else now + timedelta(seconds=ttl),
        created_at=now,
        updated_at=now,
        retry_of_id=new.retry_of,
    )
    snapshot = TaskSnapshot(
        task=task,
        era=new.era,
        protocol_version=new.protocol_version,
        client_info=new.client_info,
        client_capabilities=new.client_capabilities,
        log_level=new.log_level or "",
        progress_token=new.progress_token,
        prior_answers={"prepared": new.prepared},
        # Nothing to keep secret (an anonymous call, no allow-listed header): nothing sealed.
        sealed=crypto.seal(secrets_blob) if new.access_token or new.headers else "",
    )
    return task, snapshot


def _expired(task: Task) -> bool:
    return task.expires_at is not None and task.expires_at <= timezone.now()


def _live(queryset: Any) -> Any:
    return queryset.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))


def _found(task_id: Any, task: Task | None) -> Task:
    """``task`` as read for its owner, or :class:`TaskNotFound` when there is none or it
    expired."""
    if task is None or _expired(task):
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
    if _may_be_lost(task):
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


def outstanding_requests(task: Task) -> list[InputRequest]:
    """Questions still waiting for an answer, in the order they were asked."""
    return list(task.input_requests.filter(status=InputRequestStatus.PENDING).order_by("sequence"))


def snapshot_secrets(task: Task) -> dict[str, Any]:
    """The decrypted secrets of a task's snapshot (raises ``SnapshotDecryptionError``)."""
    value = crypto.unseal(task.snapshot.sealed)
    return value if isinstance(value, dict) else {}


# -- the worker's transitions -----------------------------------------------------------


def begin_run(task_id: str, worker_name: str, run: int | None = None) -> Task | None:
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
        return rows.task_with_snapshot(task_id)
    return rows.claim_task(task_id, *_claim(worker_name, run))


async def abegin_run(
    database: LoopDatabase, task_id: str, worker_name: str, run: int
) -> Task | None:
    """:func:`begin_run` of a numbered job, sent from the worker's event loop."""
    return await rows.aclaim_task(database, task_id, *_claim(worker_name, run))


def _claim(worker_name: str, run: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The condition and the changes of job number ``run``'s claim. The status stays
    ``working``: nobody needs to hear of it."""
    now = timezone.now()
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
    return {"status": TaskStatus.WORKING, "runs": run}, changes


def retry_later(
    task_id: str, run: int, attempts: int, delay: float, why: str, *, error: Any = None
) -> bool:
    """Job number ``run`` failed in a way its tool calls transient: the task stays
    ``working`` and its next attempt is queued to run in ``delay`` seconds, holding no
    worker meanwhile (its answers so far are replayed). False when the task ended or moved
    on meanwhile."""
    why = jsontext.storable(why, f"the failure of task {task_id}")[:500]
    with transaction.atomic():
        task = _locked(task_id)
        if task.is_terminal or task.status != TaskStatus.WORKING or task.runs != run:
            return False
        attempt = task.attempt + 1
        _touch(
            task,
            runs=task.runs + 1,
            attempt=attempt,
            heartbeat_at=None,
            waiting_for=WaitingFor.RETRY,
            status_message=f"Attempt {attempt} of {attempts} in {delay:g} s ({why})"[:2000],
        )
        add_log(task_id, "warning", "mcp_tasks", f"attempt {attempt - 1} failed: {why}")
        _publish_on_commit(task)
        transaction.on_commit(lambda: queue.enqueue(task, delay=delay))
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
            _publish(task, TaskStatus.WORKING)
            changed += 1
    return changed


def heartbeat(task_ids: list[str]) -> dict[str, str]:
    """Mark running tasks alive; returns the status of each (tasks that are gone are
    missing)."""
    Task.objects.filter(pk__in=task_ids).exclude(status__in=TERMINAL_STATUSES).update(
        heartbeat_at=timezone.now()
    )
    return dict(Task.objects.filter(pk__in=task_ids).values_list("id", "status"))


def report_progress(
    task: Task | str, progress: float, total: float | None, message: str | None
) -> None:
    """The running tool reported progress (``task``: the row as the worker loaded it, or
    its id); the message becomes the ``statusMessage``."""
    task_id = _id(task)
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
        _publish(task, TaskStatus.WORKING)


def add_log(task_id: str, level: str, logger_name: str | None, data: Any) -> None:
    logger_name, data = jsontext.storable((logger_name, data), f"a log line of task {task_id}")
    TaskLogEntry.objects.create(
        task_id=task_id, level=level, logger_name=logger_name or "", data=data
    )
    admin_events.announce_on_commit(task_id, "task_logged")  # the task's open admin page shows it


def _finish(
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
        try:
            task = _locked(task_id)
        except Task.DoesNotExist:
            return False
        if task.is_terminal:
            return False
        _status_changed(task_id, task.status, status)
        _touch(
            task,
            status=status,
            result=result,
            error=error,
            status_message=message[:2000],
            finished_at=timezone.now(),
            waiting_for=WaitingFor.NOTHING,
        )
        task.input_requests.filter(status=InputRequestStatus.PENDING).update(
            status=InputRequestStatus.CLOSED
        )
        _publish_on_commit(task, wake=wake)
    return True


def complete(task: Task | str, result: dict[str, Any]) -> bool:
    """The tool returned (``isError`` results included; ``task``: the row as the worker
    loaded it, or its id). False if already terminal."""
    task_id = _id(task)
    result, finished = _completion(task_id, result)
    # The worker's own task, working and with no open question: one conditional update.
    if rows.update_task(task_id, {"status": TaskStatus.WORKING}, finished):
        _publish(task, TaskStatus.COMPLETED, final_fields(finished))
        _status_changed(task_id, TaskStatus.WORKING, TaskStatus.COMPLETED)
        return True
    return _finish_completed(task_id, result, finished["status_message"])


async def acomplete(database: LoopDatabase, task: Task, result: dict[str, Any]) -> bool:
    """:func:`complete` of the task the worker loaded, its conditional update sent from the
    worker's event loop (the rest, rarely needed, in Django's thread)."""
    result, finished = _completion(task.id, result)
    if not await rows.aupdate_task(database, task.id, {"status": TaskStatus.WORKING}, finished):
        return await db(_finish_completed)(task.id, result, finished["status_message"])
    session_id = task.session_id if task.era == "legacy" else None
    final = final_fields(finished)
    background.in_background(
        notify.apublish_task_change(task.id, TaskStatus.COMPLETED, session_id, final=final),
        logger,
        "could not publish the change of task %s",
        task.id,
    )
    if (
        signals.listened(signals.task_status_changed)
        or signals.listened(signals.task_finished)
        or admin_events.may_announce()
    ):
        await db(_status_changed)(task.id, TaskStatus.WORKING, TaskStatus.COMPLETED)
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


#: Largest ``final_fields`` (bytes of JSON) a task change carries; past it, the waiting
#: requests read the task back.
FINAL_FIELDS_MAX = 16 * 1024


def final_fields(changes: dict[str, Any]) -> dict[str, Any] | None:
    """What a waiting request needs of a task that ended with ``changes`` (a wake-up
    carries it), None when it is too large to carry. The result and error travel as JSON
    text: the channel layer's msgpack cannot carry every JSON value (integers past 64
    bits)."""
    outcome = json.dumps(
        {"result": changes.get("result"), "error": changes.get("error")},
        separators=(",", ":"),
    )
    if len(outcome) > FINAL_FIELDS_MAX:
        return None
    return {
        "status": str(changes["status"]),
        "status_message": changes["status_message"],
        "updated_at": changes["updated_at"].isoformat(),
        "outcome": outcome,
    }


def with_final_fields(task: Task, final: dict[str, Any]) -> Task:
    """``task`` (read before it ended) as the change that ended it left it."""
    outcome = json.loads(final["outcome"])
    task.status = final["status"]
    task.status_message = final["status_message"]
    task.updated_at = datetime.fromisoformat(final["updated_at"])
    task.result, task.error = outcome["result"], outcome["error"]
    return task


def _finish_completed(task_id: str, result: dict[str, Any], message: str) -> bool:
    """Complete a task that the conditional update missed (it has an open question, or
    ended meanwhile: then nothing changes)."""
    return _finish(task_id, TaskStatus.COMPLETED, result=result, message=message, wake=False)


def fail(task_id: str, error: dict[str, Any], message: str | None = None) -> bool:
    """A JSON-RPC error ended the task. False if already terminal."""
    return _finish(
        task_id,
        TaskStatus.FAILED,
        error=error,
        message=message or str(error.get("message", "Failed")),
    )


def cancel(task_id: str, principal_scope: str | None) -> Task:
    """Cancel the task (``principal_scope`` None: staff in the admin). Terminal tasks are
    left as they are. Raises :class:`TaskNotFound`."""
    with transaction.atomic():
        task = rows.locked_task(task_id, principal_scope)
        if task is None or (principal_scope is not None and _expired(task)):
            raise TaskNotFound(task_id)
        if task.is_terminal:
            return task
        _status_changed(task_id, task.status, TaskStatus.CANCELLED)
        _touch(
            task,
            status=TaskStatus.CANCELLED,
            status_message="Cancelled",
            finished_at=timezone.now(),
            waiting_for=WaitingFor.NOTHING,
        )
        task.input_requests.filter(status=InputRequestStatus.PENDING).update(
            status=InputRequestStatus.CLOSED
        )
        _publish_on_commit(task, wake=True)
        job_id, queue_name = task.job_id, task.queue
        # An async tool is cancelled cooperatively (CancelledError at its next await, through
        # the worker's channel-layer watch); only a sync tool's work-horse is killed.
        tool = mcp.tools.get(task.tool_name)
        kill = tool is None or not tool.is_async
        transaction.on_commit(lambda: queue.stop(job_id, queue_name, kill_running=kill))
    return task


# -- liveness and housekeeping ----------------------------------------------------------


def check_liveness(task: Task) -> bool:
    """Fail a task whose worker stopped beating, re-queue one whose job vanished, and make
    one that no worker serves say so.

    Returns True when the task changed.
    """
    if not _may_be_lost(task):
        return False
    if task.heartbeat_at is not None:
        lost_after = get_config()["TASK_LOST_AFTER"]
        return fail(
            task.id,
            {
                "code": INTERNAL_ERROR,
                "message": "The worker running this task stopped unexpectedly",
            },
            f"The worker running this task stopped unexpectedly (no heartbeat for {lost_after:g}s)",
        )
    if not queue.job_exists(task):
        return requeue_lost(task.id)
    return _note_unserved(task)


def _note_unserved(task: Task) -> bool:
    """A task queued for a while whose queue no worker serves says so (its status message,
    once, and the log). True when it changed."""
    if task.waiting_for or queue.live_workers(task.queue) > 0:
        return False  # it waits for its limit, its retry, or its turn
    message = (
        f"Not started: no task worker is running for queue {task.queue!r} (start "
        f"`python manage.py rqworker {task.queue}` with RQ['WORKER_CLASS'] = "
        "'mcp_tasks.tasks.worker.TaskWorker')"
    )
    if task.status_message == message:
        return False
    changed = Task.objects.filter(pk=task.id, status=TaskStatus.WORKING, heartbeat_at=None).update(
        status_message=message, updated_at=timezone.now()
    )
    if changed:
        logger.warning("task %s (%s): %s", task.id, task.tool_name, message)
        _publish(task, TaskStatus.WORKING)
    return bool(changed)


def unserved_queues() -> list[str]:
    """The queues that have tasks waiting to start and no worker alive to start them."""
    waiting = Task.objects.filter(status=TaskStatus.WORKING, heartbeat_at=None)
    names = sorted(set(waiting.values_list("queue", flat=True)))
    return [name for name in names if queue.live_workers(name) == 0]


def _may_be_lost(task: Task) -> bool:
    """A working task whose worker stopped beating, or queued (never started this run) for
    so long that its job may be lost (:func:`check_liveness` looks). Reads nothing."""
    if task.status != TaskStatus.WORKING:
        return False
    config = get_config()
    if task.heartbeat_at is not None:
        silent = timezone.now() - task.heartbeat_at
        return silent > timedelta(seconds=config["TASK_LOST_AFTER"])
    waited = timezone.now() - task.updated_at
    return waited > timedelta(seconds=config["TASK_REQUEUE_AFTER"])


def _job_lost(task: Task) -> bool:
    """Queued (never started this run) for too long, and rq no longer knows the job."""
    return task.heartbeat_at is None and _may_be_lost(task) and not queue.job_exists(task)


def requeue_lost(task_id: str) -> bool:
    """Queue a new job for a task whose job was lost (Redis restarted without persistence).

    Checked again under the row lock, so two processes noticing the loss at once queue
    one job, not two.
    """
    with transaction.atomic():
        task = _locked(task_id)
        if task.is_terminal or not _job_lost(task):
            return False
        _touch(task, runs=task.runs + 1, heartbeat_at=None)
        transaction.on_commit(lambda: queue.enqueue(task))
    return True


def recover_stalled() -> int:
    """Check every unfinished task; returns how many changed."""
    changed = 0
    for task in Task.objects.filter(status=TaskStatus.WORKING):
        try:
            changed += check_liveness(task)
        except Exception:
            logger.exception("liveness check of task %s failed", task.id)
    return changed


def purge_expired() -> int:
    """Delete tasks past their TTL (with their snapshots, logs and questions)."""
    _, per_model = Task.objects.filter(expires_at__lte=timezone.now()).delete()
    return per_model.get(Task._meta.label, 0)


# -- questions (input requests) ---------------------------------------------------------


class ReplayMismatch(BaseException):
    """On resume, the tool asked something other than what it asked the first time."""


class TaskEnded(BaseException):
    """The task reached a terminal state while the tool was still running."""


EXPIRED = {"_mcp_tasks": "expired"}


def question_text(method: str, params: dict[str, Any]) -> str:
    """A one-line description of a question, used as the task's ``statusMessage``."""
    if method == "elicitation/create":
        return str(params.get("message") or "Waiting for an answer")[:2000]
    if method == "sampling/createMessage":
        return "Waiting for the client's model to answer"
    return "Waiting for the client's roots"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _same_question(request: InputRequest, method: str, params: dict[str, Any]) -> bool:
    return request.method == method and _canonical(request.params) == _canonical(params)


def ask(
    task_id: str,
    sequence: int,
    method: str,
    params: dict[str, Any],
    worker_name: str,
    key: str | None = None,
) -> InputRequest:
    """Record question number ``sequence`` of this run (or find it when the tool is
    replayed) and mark the task ``input_required``."""
    (request,) = ask_all(task_id, sequence, [(method, params, key)], worker_name)
    return request


def ask_all(
    task_id: str,
    first_sequence: int,
    questions: list[tuple[str, dict[str, Any], str | None]],
    worker_name: str,
) -> list[InputRequest]:
    """Record one round of questions (``(method, params, key)`` each, numbered from
    ``first_sequence``) in one transaction: a poll sees all of them or none. A question
    already recorded under its number (the tool is replayed after a resume) is returned
    as it is, answer included; one that differs raises :class:`ReplayMismatch`."""
    questions = [
        (method, *jsontext.storable((params, key), f"a question of task {task_id}"))
        for method, params, key in questions
    ]
    with transaction.atomic():
        task = _locked(task_id)
        if task.is_terminal:
            raise TaskEnded(task_id)
        recorded = list(task.input_requests.all())
        by_sequence = {request.sequence: request for request in recorded}
        used_keys = {request.key for request in recorded}
        expires_at = timezone.now() + timedelta(seconds=get_config()["INPUT_TIMEOUT"])
        round_: list[InputRequest] = []
        new: list[InputRequest] = []
        for sequence, (method, params, key) in enumerate(questions, start=first_sequence):
            existing = by_sequence.get(sequence)
            if existing is not None:
                _check_replay(existing, sequence, method, params)
                round_.append(existing)
                continue
            if key is None or key in used_keys:
                # Keys are unique for the task's whole life, so a repeated key gets a suffix.
                key = (
                    f"{key or KEY_PREFIXES.get(method, 'input')}-{sequence}-{secrets.token_hex(4)}"
                )
            used_keys.add(key[:100])
            request = InputRequest(
                task=task,
                key=key[:100],
                sequence=sequence,
                method=method,
                params=params,
                expires_at=expires_at,
            )
            round_.append(request)
            new.append(request)
        if new:
            InputRequest.objects.bulk_create(new)
            _status_changed(task_id, task.status, TaskStatus.INPUT_REQUIRED)
            admin_events.announce_on_commit(task_id, "question_asked")
            if signals.listened(signals.question_asked):
                for request in new:
                    signals.send_on_commit(
                        signals.question_asked, task_id=task_id, question=request
                    )
            last = new[-1]
            _touch(
                task,
                status=TaskStatus.INPUT_REQUIRED,
                status_message=question_text(last.method, last.params),
                waiting_worker=worker_name[:255],
            )
    return round_


def _check_replay(
    existing: InputRequest, sequence: int, method: str, params: dict[str, Any]
) -> None:
    if not _same_question(existing, method, params):
        raise ReplayMismatch(
            f"on resume the tool asked question {sequence} differently "
            f"(first: {existing.method} {question_text(existing.method, existing.params)!r}; "
            f"now: {method} {question_text(method, params)!r}); code before a question "
            "must ask the same questions in the same order when the task resumes"
        )


def withdraw(task_id: str, key: str) -> None:
    """Close a question that could not be announced; the task goes back to working."""
    with transaction.atomic():
        task = _locked(task_id)
        task.input_requests.filter(key=key, status=InputRequestStatus.PENDING).update(
            status=InputRequestStatus.CLOSED
        )
        if (
            not task.is_terminal
            and not task.input_requests.filter(status=InputRequestStatus.PENDING).exists()
        ):
            _status_changed(task_id, task.status, TaskStatus.WORKING)
            _touch(task, status=TaskStatus.WORKING, status_message="Working", waiting_worker="")
            _publish_on_commit(task)


def answer_in(request: InputRequest) -> Any:
    """A question's stored answer: None while it waits, :data:`EXPIRED` when it timed out
    or was closed unanswered."""
    if request.status == InputRequestStatus.PENDING:
        return None
    return request.response if request.response is not None else EXPIRED


def answers_of(task_id: str, keys: list[str | None]) -> list[Any]:
    """The stored answers to the questions ``keys`` (one query; None for a key that is
    None, unknown or still waiting)."""
    found = {
        request.key: answer_in(request)
        for request in InputRequest.objects.filter(
            task_id=task_id, key__in=[k for k in keys if k]
        ).only("key", "status", "response")
    }
    return [found.get(key) if key else None for key in keys]


def claim_questions_to_mail(window: float, limit: int) -> list[InputRequest]:
    """The waiting questions nobody was mailed about yet (at most ``limit``, oldest first),
    marked as mailed so that no other process mails them; none while a mail went out within
    the last ``window`` seconds (the digest waits for the window to pass)."""
    now = timezone.now()
    if InputRequest.objects.filter(notified_at__gt=now - timedelta(seconds=window)).exists():
        return []
    waiting = InputRequest.objects.filter(status=InputRequestStatus.PENDING, notified_at=None)
    ids = list(waiting.order_by("created_at", "id").values_list("pk", flat=True)[:limit])
    if not ids:
        return []
    waiting.filter(pk__in=ids).update(notified_at=now)
    return list(
        InputRequest.objects.filter(pk__in=ids, notified_at=now)
        .select_related("task__snapshot")
        .order_by("created_at", "id")
    )


def release(task_id: str) -> bool:
    """The worker stops waiting. True when every question was answered meanwhile (go on);
    False: the task is let go and a new job resumes it once everything is answered."""
    with transaction.atomic():
        task = _locked(task_id)
        if not task.input_requests.filter(status=InputRequestStatus.PENDING).exists():
            return True
        _touch(task, waiting_worker="")
    return False


def claim_relay(task_id: str, key: str) -> bool:
    """Reserve a waiting question for one stream to send (a 2025-11-25 session has a
    ``tasks/result`` stream and a GET stream; the client should be asked once)."""
    claimed = InputRequest.objects.filter(
        task_id=task_id, key=key, status=InputRequestStatus.PENDING, relayed_at__isnull=True
    ).update(relayed_at=timezone.now())
    return bool(claimed)


def release_relay(task_id: str, key: str) -> None:
    """The stream that sent the question ended without an answer: another may send it."""
    InputRequest.objects.filter(task_id=task_id, key=key, status=InputRequestStatus.PENDING).update(
        relayed_at=None
    )


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """A checked JSON Schema validator for a question's ``requestedSchema`` (built once)."""
    import jsonschema  # type: ignore[import-untyped]

    schema = json.loads(schema_json)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema, format_checker=jsonschema.FormatChecker())


def validate_answer(request: InputRequest, response: Any) -> dict[str, Any]:
    """Check an answer against its question; raises :class:`InvalidAnswer`."""
    import jsonschema

    if not isinstance(response, dict):
        raise InvalidAnswer("an answer must be a JSON object")
    if request.method == "elicitation/create":
        action = response.get("action")
        if action not in ("accept", "decline", "cancel"):
            raise InvalidAnswer("action must be 'accept', 'decline' or 'cancel'")
        if action != "accept":
            return {"action": action}
        content = response.get("content") or {}
        schema = request.params.get("requestedSchema") or {"type": "object"}
        error = jsonschema.exceptions.best_match(
            _validator(_canonical(schema)).iter_errors(content)
        )
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path)
            raise InvalidAnswer(f"{where + ': ' if where else ''}{error.message}")
        return {"action": "accept", "content": content}
    if request.method == "sampling/createMessage":
        import mcp_types as types

        try:
            types.CreateMessageResult.model_validate(response)
        except Exception as exc:
            raise InvalidAnswer(f"not a sampling result: {exc}") from None
        return response
    if request.method == "roots/list" and not isinstance(response.get("roots"), list):
        raise InvalidAnswer("a roots answer needs a 'roots' list")
    return response


def _after_answer(
    task: Task, *, others_pending: bool | None = None, answered: InputRequest | None = None
) -> None:
    """The task's questions changed (``others_pending``: whether questions still wait, when
    the caller knows it; ``answered``: the question just answered, if that was the change)."""
    if others_pending is None:
        others_pending = task.input_requests.filter(status=InputRequestStatus.PENDING).exists()
    if others_pending:
        _touch(task)
        _publish_on_commit(task)
        return
    _status_changed(task.id, task.status, TaskStatus.WORKING)
    if task.waiting_worker:
        # A worker holds the task in its hold window: wake it, it goes on.
        _touch(task, status=TaskStatus.WORKING, status_message="Answered")
        answers = None
        if answered is not None and answered.response is not None:
            answers = {answered.key: answered.response}
        _publish_on_commit(task, wake=True, answers=answers)
        return
    _touch(
        task,
        status=TaskStatus.WORKING,
        status_message="Answered; resuming",
        runs=task.runs + 1,
        heartbeat_at=None,
    )
    _publish_on_commit(task)
    transaction.on_commit(lambda: queue.enqueue(task))


def answer(
    task_id: str,
    key: str,
    response: Any,
    *,
    principal_scope: str | None,
    answered_by: str,
    user: Any = None,
    not_found_raises: bool = False,
) -> bool:
    """The one answer path (clients, legacy replies, the admin).

    ``principal_scope`` None means staff acting in the admin. Returns False when the task
    is not the principal's, has ended, or the question is not waiting (first answer
    wins); with ``not_found_raises``, a task that is unknown, expired or someone else's
    raises :class:`TaskNotFound` instead. Raises :class:`InvalidAnswer` when the answer
    does not fit the question.
    """
    with transaction.atomic():
        task = rows.locked_task(task_id, principal_scope)
        if not_found_raises and (task is None or _expired(task)):
            raise TaskNotFound(task_id)
        if task is None or task.is_terminal:
            return False
        # The task's row lock serialises every change of its questions: one read finds the
        # question and whether others still wait.
        waiting = list(
            task.input_requests.filter(Q(key=key) | Q(status=InputRequestStatus.PENDING))
        )
        request = next((r for r in waiting if r.key == key), None)
        if request is None or request.status != InputRequestStatus.PENDING:
            return False
        request.response = validate_answer(request, response)
        request.status = InputRequestStatus.ANSWERED
        request.answered_by = answered_by[:255]
        request.answered_by_user = user if getattr(user, "pk", None) else None
        request.answered_at = timezone.now()
        request.save(
            update_fields=["response", "status", "answered_by", "answered_by_user", "answered_at"]
        )
        admin_events.announce_on_commit(task_id, "question_answered")
        signals.send_on_commit(
            signals.question_answered,
            task_id=task_id,
            question=request,
            answered_by=request.answered_by,
            user=request.answered_by_user,
        )
        _after_answer(task, others_pending=len(waiting) > 1, answered=request)
    return True


def expire_questions() -> int:
    """Questions past ``INPUT_TIMEOUT`` are closed; the tool sees a cancellation."""
    count = 0
    for request in InputRequest.objects.filter(
        status=InputRequestStatus.PENDING, expires_at__lte=timezone.now()
    ):
        with transaction.atomic():
            task = _locked(request.task_id)
            updated = InputRequest.objects.filter(
                pk=request.pk, status=InputRequestStatus.PENDING
            ).update(status=InputRequestStatus.EXPIRED, answered_at=timezone.now())
            if updated and not task.is_terminal:
                _after_answer(task)
                count += 1
    return count

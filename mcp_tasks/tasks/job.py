"""Running one task job: the tool, with its caller's context restored.

:func:`execute` runs one job of a task on the current event loop, inside a
:class:`~mcp_tasks.tasks.runtime.Runtime` (wake-ups, heartbeat, slots). The concurrent
:class:`~mcp_tasks.tasks.worker.TaskWorker` runs many at once on one loop;
:func:`run_task` is the rq entry point for rq's own worker classes (one job at a time,
e.g. the forking ``ForkingTaskWorker``). Sync tools run in a thread and may use the ORM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from channels.layers import get_channel_layer
from django.utils import timezone

from .. import sessions
from ..auth import AccessToken
from ..auth.permissions import allowed_now
from ..authoring.approval import expired_result, rejection_result
from ..authoring.context import Context, level_allows
from ..authoring.inputs import Question
from ..authoring.lifespan import lifespan_context
from ..authoring.registry import MCPServer, ToolSpec, mcp
from ..authoring.retries import DEFAULT_RETRY, Retry, RetryTask
from ..authoring.tool_call import error_result, failure_result, run_tool, validate_arguments
from ..conf import get_config
from ..core import background, groups, log_fields, redis_clients, trace_hook
from ..core.db import db, persistently
from ..core.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, notification
from ..core.task_contract import Caller
from ..exceptions import ProtocolError, ToolError
from ..models import Task, TaskSnapshot
from . import approvals, crypto, notify, service
from .runtime import JobSlot, Runtime, TaskWatch, runtime_for_loop

logger = logging.getLogger("mcp_tasks.tasks")

P = ParamSpec("P")
R = TypeVar("R")

_loops = threading.local()


class TaskSuspended(BaseException):
    """The tool waits for an answer that did not come within the hold window: the job
    ends, the task stays ``input_required`` and resumes on a new job when answered."""


class QuestionFailed(BaseException):
    """A question could not be stored, or its answer read back (the database refused): the
    task fails with the reason rather than let the tool go on as if it had been dismissed.
    A ``BaseException``, so that no ``except Exception`` in the tool swallows it."""


def patience() -> float:
    """Seconds a job keeps trying its task's own writes (its claim, progress, questions,
    the result or failure) while the database cannot be reached (restarting, its primary
    being replaced): as long as the task may go without a heartbeat (``TASK_LOST_AFTER``),
    past which the housekeeping counts it lost anyway."""
    return float(get_config().TASK_LOST_AFTER)


def durable(fn: Callable[P, R], what: str) -> Callable[P, Awaitable[R]]:
    """:func:`~mcp_tasks.core.db.db` of ``fn``, tried again while the database cannot be
    reached, for up to :func:`patience` seconds. For the task service's writes that are
    safe to send twice."""
    call = db(fn)

    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return await persistently(lambda: call(*args, **kwargs), patience(), what)

    return run


def _loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _loops.loop = loop
    return loop


def run_task(task_id: str, run: int | None = None, server: MCPServer | None = None) -> None:
    """rq entry point (``mcp_tasks.tasks.job.run_task``) for rq's own worker classes:
    job number ``run`` of the task, on an event loop kept for the thread's life."""
    _loop().run_until_complete(_run_alone(task_id, server or mcp, run))


async def _run_alone(task_id: str, server: MCPServer, run: int | None) -> None:
    runtime = runtime_for_loop()
    await runtime.start()
    try:
        await execute(task_id, server, run, runtime)
    finally:
        await background.drain()  # the loop stops with the job: the last change goes out first


class TaskBackend:
    """A ``ContextBackend`` for a tool running as a background task."""

    def __init__(
        self, task: Task, snapshot: TaskSnapshot, watch: TaskWatch, runtime: Runtime, slot: JobSlot
    ) -> None:
        self.task = task
        self.snapshot = snapshot
        self.watch = watch
        self.runtime = runtime
        self.slot = slot
        self.sequence = 0

    def is_cancelled(self) -> bool:
        return self.watch.ended

    def _check_running(self) -> None:
        """Cooperative cancel: a sync tool (which no ``CancelledError`` can reach) stops at
        its next ``Context`` call once its task has ended."""
        if self.watch.ended:
            raise asyncio.CancelledError()

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        self._check_running()
        await durable(service.report_progress, "a task's progress")(
            self.task, progress, total, message
        )
        token = self.snapshot.progress_token
        if self.snapshot.era == "legacy" and token is not None:
            # 2025-11-25: the creating request's progress token stays valid for the task's life.
            await self._send_event(
                kind="progress",
                progress_token=token,
                progress=progress,
                total=total,
                message=message,
            )

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        self._check_running()
        await durable(service.add_log, "a task's log line")(self.task.id, level, logger_name, data)
        if self.snapshot.era != "legacy":
            return  # the modern tasks extension has no log notifications for tasks
        threshold = await sessions.log_level_of(self.task.session_id)
        if threshold is None or not level_allows(level, threshold or None):
            return
        await self._send_event(kind="log", level=level, data=data, logger=logger_name)

    async def _send_event(self, **event: Any) -> None:
        """To the creating session's GET stream, which words it
        (:func:`mcp_tasks.protocol.notices.task_event_notification`)."""
        layer = get_channel_layer(get_config().CHANNEL_LAYER)
        if layer is not None:
            await layer.group_send(
                groups.session_group(self.task.session_id),
                {"type": "mcp.task_event", "event": {**event, "task_id": self.task.id}},
            )

    async def ask(self, questions: list[Question]) -> list[dict[str, Any]]:
        """Record the questions (or find them when replaying), announce them, and wait a
        short hold window for the answers; past it, the job ends (``TaskSuspended``)."""
        if trace_hook.tracer is None:
            return await self._ask(questions)
        attributes = {
            "mcp_tasks.task.id": self.task.id,
            "mcp_tasks.question.methods": ",".join(question.method for question in questions),
            "mcp_tasks.question.count": len(questions),
        }
        with trace_hook.tracer.span("task question", attributes):
            return await self._ask(questions)

    async def _ask(self, questions: list[Question]) -> list[dict[str, Any]]:
        self._check_running()
        first = self.sequence + 1
        self.sequence += len(questions)
        self.watch.changed.clear()  # from here on, the wake-up of an answer is kept
        try:
            rows = await durable(service.ask_all, "a task's questions")(
                self.task.id,
                first,
                [
                    (question.method, question.params, question.key, question.staff)
                    for question in questions
                ],
                self.runtime.name,
            )
        except (service.ReplayMismatch, service.TaskEnded):
            raise
        except Exception as exc:
            # Never an answer the user did not give: a tool told "cancelled" here would go
            # on and end with a wrong result that looks right.
            logger.exception(
                "could not record the questions of task %s",
                self.task.id,
                extra=log_fields.of(self.task),
            )
            raise QuestionFailed(
                f"its question could not be recorded ({type(exc).__name__}: {exc})"
            ) from exc
        keys: list[str | None] = [row.key for row in rows]
        answers = [service.answer_in(row) for row in rows]  # replayed: already answered
        if not _all_answered(keys, answers):
            try:
                session_id = self.task.session_id if self.snapshot.era == "legacy" else None
                for_staff = all(question.staff is not None for question in questions)
                status = "working" if for_staff else "input_required"
                # Through a Redis failover (up to REDIS_FAILOVER_WAIT) rather than withdraw.
                await redis_clients.riding_out(
                    lambda: notify.apublish_task_change(self.task.id, status, session_id)
                )
            except Exception:
                logger.exception(
                    "could not announce the questions of task %s",
                    self.task.id,
                    extra=log_fields.of(self.task),
                )
                for key in keys:
                    if key is not None:
                        await durable(service.withdraw, "a task's question")(self.task.id, key)
                keys = [None] * len(keys)
            else:
                answers = await self._hold(keys, answers)
        return [
            self._unanswerable(question.method, "the question could not be announced")
            if key is None
            else self._unanswerable(question.method, "the question timed out")
            if answer == service.EXPIRED
            else answer
            for question, key, answer in zip(questions, keys, answers, strict=True)
        ]

    async def approval(self, tool: ToolSpec) -> Any:
        """The operator's decision on this task (``tool.approval``): recorded and waited
        for (a short hold, then the job ends) the first time, read back on later runs."""
        self._check_running()
        approval = tool.approval
        assert approval is not None
        arguments = dict(self.task.arguments or {})
        params = {
            "message": approval.render(arguments),
            "tool": tool.name,
            "arguments": arguments,
            "editable": list(approval.editable),
            "approvers": approval.approvers,
        }
        self.watch.changed.clear()
        row = await durable(approvals.ask_approval, "a task's approval")(
            self.task.id, params, approval.audience, self.runtime.name
        )
        answer = service.answer_in(row)
        if answer is None:
            session_id = self.task.session_id if self.snapshot.era == "legacy" else None
            try:
                await redis_clients.riding_out(
                    lambda: notify.apublish_task_change(self.task.id, "working", session_id)
                )
            except Exception:  # staff find it in the admin all the same
                logger.warning(
                    "could not announce the approval of task %s",
                    self.task.id,
                    exc_info=True,
                    extra=log_fields.of(self.task),
                )
            (answer,) = await self._hold([row.key], [None])
        return answer

    async def _answers(self, keys: list[str | None]) -> list[Any]:
        return await durable(service.answers_of, "a task's answers")(self.task.id, keys)

    def _woken_with(self, keys: list[str | None], answers: list[Any]) -> list[Any] | None:
        """Every missing answer, as the wake-up brought them (committed before it was
        sent); None when one is missing there too (then they are read back)."""
        brought = self.watch.answers
        if not all(
            key in brought
            for key, answer in zip(keys, answers, strict=True)
            if key and answer is None
        ):
            return None
        return [
            brought[key] if key and answer is None else answer
            for key, answer in zip(keys, answers, strict=True)
        ]

    def _unanswerable(self, method: str, why: str) -> dict[str, Any]:
        if method == "elicitation/create":
            return {"action": "cancel"}
        raise ToolError(f"{method} failed: {why}")

    async def _hold(self, keys: list[str | None], answers: list[Any]) -> list[Any]:
        """Wait up to ``INPUT_HOLD_WINDOW`` for every answer (woken by the runtime, not by
        polling), without holding a slot meanwhile; past it, let the task go."""
        try:
            if trace_hook.tracer is None:
                return await self._wait(keys, answers)
            attributes = {"mcp_tasks.task.id": self.task.id, "mcp_tasks.question.count": len(keys)}
            with trace_hook.tracer.span("task wait for answers", attributes):
                return await self._wait(keys, answers)
        except Exception as exc:
            logger.exception(
                "could not read the answers of task %s",
                self.task.id,
                extra=log_fields.of(self.task),
            )
            raise QuestionFailed(
                f"its answer could not be read ({type(exc).__name__}: {exc})"
            ) from exc

    async def _wait(self, keys: list[str | None], answers: list[Any]) -> list[Any]:
        deadline = time.monotonic() + get_config().INPUT_HOLD_WINDOW
        self.slot.release()
        while not _all_answered(keys, answers):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if not await durable(service.release, "a task's wait")(self.task.id):
                    raise TaskSuspended(self.task.id)
                answers = await self._answers(keys)  # answered just as the window closed
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.watch.changed.wait(), remaining)
            self.watch.changed.clear()
            answers = self._woken_with(keys, answers) or await self._answers(keys)
        await self.slot.reacquire()
        self._check_running()
        return answers

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        layer = get_channel_layer(get_config().CHANNEL_LAYER)
        if layer is not None:
            message = notification(method, params)
            await layer.group_send(groups.BROADCAST, {"type": "mcp.notify", "message": message})

    async def close_stream(self) -> None:
        return None  # a task has no response stream


def _all_answered(keys: list[str | None], answers: list[Any]) -> bool:
    """Every question that was recorded (has a key) has its answer."""
    return all(answer is not None for key, answer in zip(keys, answers, strict=True) if key)


def _begin(
    task_id: str, worker_name: str, run: int | None, claimed_at: Any = None
) -> tuple[Task | None, Any]:
    """The job starts (:func:`~mcp_tasks.tasks.service.begin_run`): the task, and the user
    it runs for (None when anonymous or gone)."""
    task = service.begin_run(task_id, worker_name, run, claimed_at)
    return task, _user_of(task) if task is not None else None


def _user_of(task: Task) -> Any:
    """The signed-in user the task runs for (None when anonymous or gone)."""
    if not task.principal_scope.startswith("user:"):
        return None
    from django.contrib.auth import get_user_model

    user_id = task.principal_scope.split(":", 1)[1]
    return get_user_model()._default_manager.filter(pk=user_id).first()


async def _begin_job(runtime: Runtime, task_id: str, run: int | None) -> tuple[Task | None, Any]:
    """:func:`_begin`, from the runtime's event loop when it can (a numbered job on
    PostgreSQL: the user, if any, is then read in Django's thread). Tried again while the
    database cannot be reached; each try is the same claim (its time included), so one that
    went through but whose answer was lost is recognised."""
    database = runtime.database
    claimed_at = timezone.now()
    if database is None or run is None:
        return await persistently(
            lambda: runtime.call_db(_begin, task_id, runtime.name, run, claimed_at),
            patience(),
            "a job's start",
        )
    task = await persistently(
        lambda: service.abegin_run(database, task_id, runtime.name, run, claimed_at),
        patience(),
        "a job's start",
    )
    if task is None or not task.principal_scope.startswith("user:"):
        return task, None
    return task, await persistently(
        lambda: runtime.call_db(_user_of, task), patience(), "a task's user"
    )


async def _complete(runtime: Runtime, task: Task, result: dict[str, Any]) -> None:
    """The result goes in, tried again while the database cannot be reached."""
    database = runtime.database

    async def complete() -> bool:
        if database is None:
            return await runtime.call_db(service.complete, task, result)
        return await service.acomplete(database, task, result)

    await persistently(complete, patience(), "a task's result")


async def execute(
    task_id: str,
    server: MCPServer,
    run: int | None,
    runtime: Runtime,
    *,
    slot: JobSlot | None = None,
    timeout: float | None = None,
) -> None:
    """Run job number ``run`` of ``task_id`` to its end: a result, an error, or a
    suspension. ``timeout``: seconds before the task fails as timed out (None: the
    caller enforces it, e.g. rq's own job timeout)."""
    slot = slot or JobSlot(None)
    with runtime.watch(task_id) as watch:
        task, user = await _begin_job(runtime, task_id, run)
        if task is None:
            return
        watch.claimed = True
        with log_fields.running(task), _job_span(task):
            try:
                await _run_claimed(task, user, server, runtime, watch, slot, timeout)
            except Exception as exc:
                # Not the tool's own failure (those end the task in _run_claimed): what the
                # job needs failed (restoring the caller's context, a write the database
                # refused). The task ends now, with the reason, rather than when its
                # heartbeat is found missing (once more only: a database unreachable for
                # all of patience() is not waited for twice).
                message = f"The task stopped: {type(exc).__name__}: {exc}"[:2000]
                with contextlib.suppress(Exception):
                    await db(service.fail)(
                        task.id, {"code": INTERNAL_ERROR, "message": message}, message
                    )
                raise


async def _run_claimed(
    task: Task,
    user: Any,
    server: MCPServer,
    runtime: Runtime,
    watch: TaskWatch,
    slot: JobSlot,
    timeout: float | None,
) -> None:
    """The job's task is claimed: restore its caller's context and run the tool to its
    end (a result, an error, a suspension)."""
    fail = durable(service.fail, "a task's failure")
    tool = server.tools.get(task.tool_name)
    if tool is None:
        await fail(task.id, {"code": INVALID_PARAMS, "message": f"Unknown tool: {task.tool_name}"})
        return
    snapshot = task.snapshot
    try:
        secrets = crypto.unseal(snapshot.sealed) or {}
    except crypto.SnapshotDecryptionError as exc:
        await fail(task.id, {"code": INTERNAL_ERROR, "message": str(exc)}, str(exc))
        return
    try:
        validated = validate_arguments(tool, task.arguments)
    except ValueError as exc:
        await _complete(runtime, task, error_result(str(exc)))
        return
    caller = service.stored_caller(task, secrets)
    access_token = AccessToken.from_record(caller.access_token)
    if not tool.access.is_open and not await durable(allowed_now, "a task's permissions")(
        tool.access, access_token, user
    ):
        # Checked afresh before every job (start and each resume): a revoked permission
        # or a deactivated user stops the task here.
        message = (
            f"The task's caller may no longer use tool {task.tool_name!r} "
            "(a permission or scope it requires is missing)"
        )
        await fail(task.id, {"code": INVALID_PARAMS, "message": message}, message)
        return
    backend = TaskBackend(task, snapshot, watch, runtime, slot)
    context = await _context(task, caller, backend, access_token, user)
    if watch.ended:
        return  # cancelled while it was starting
    retries = tool.task.retries or DEFAULT_RETRY
    if tool.approval is None:
        running = run_tool(tool, validated, context, transient=retries.is_transient)
    else:
        running = _run_approved(tool, backend, context, retries)
    if trace_hook.tracer is not None:
        running = _traced_tool(trace_hook.tracer, running, tool.name, task.id)
    tool_run = watch.tool = asyncio.ensure_future(running)
    try:
        done, _ = await asyncio.wait({tool_run}, timeout=timeout)
    except asyncio.CancelledError:
        tool_run.cancel()
        raise
    if not done:
        message = f"The task timed out after {timeout:g} s"
        await fail(task.id, {"code": INTERNAL_ERROR, "message": message}, message)
        watch.end()  # the tool gets CancelledError; the job does not wait for it
        tool_run.add_done_callback(background.ignore_outcome)
        return
    try:
        result = tool_run.result()
    except asyncio.CancelledError:
        if not watch.ended:
            raise
        return  # the task was cancelled: its status already says so
    except (TaskSuspended, service.TaskEnded):
        return
    except QuestionFailed as exc:
        message = f"The task stopped: {exc}"
        await fail(task.id, {"code": INTERNAL_ERROR, "message": message}, message)
        return
    except service.ReplayMismatch as exc:
        await fail(task.id, {"code": INTERNAL_ERROR, "message": str(exc)}, str(exc))
        return
    except ProtocolError as exc:
        await fail(task.id, exc.to_dict())
        return
    except Exception as exc:  # transient: run_tool let it through
        slot.release()  # between attempts the task holds no slot
        await _retry_or_end(runtime, tool, task, retries, exc)
        return
    except BaseException as exc:
        # rq's job timeout (SIGALRM under rq's own workers) and anything else that escaped.
        await fail(
            task.id,
            {"code": INTERNAL_ERROR, "message": f"The task stopped: {type(exc).__name__}"},
        )
        raise
    await _complete(runtime, task, result)


def _job_span(task: Task) -> contextlib.AbstractContextManager[object]:
    """The job's span while tracing (a child of the creating request, whose trace context
    the task's snapshot keeps), else nothing."""
    tracer = trace_hook.tracer
    if tracer is None:
        return contextlib.nullcontext()
    return tracer.job(_trace_of(task), f"task job {task.tool_name}", _job_attributes(task))


def _trace_of(task: Task) -> dict[str, str] | None:
    """The creating request's trace context, kept in the task's snapshot."""
    carrier = (task.snapshot.prior_answers or {}).get("trace")
    return carrier if isinstance(carrier, dict) else None


def _job_attributes(task: Task) -> dict[str, Any]:
    """A job span's attributes: the task, its tool, the job's number (0: the first run;
    later: a resume after an answer, or a retry) and the attempt."""
    return {
        "mcp_tasks.task.id": task.id,
        "gen_ai.tool.name": task.tool_name,
        "mcp_tasks.task.run": task.runs,
        "mcp_tasks.task.resumed": task.runs > 0,
        "mcp_tasks.task.attempt": task.attempt,
    }


async def _traced_tool(
    tracer: trace_hook.Tracer, running: Coroutine[Any, Any, dict[str, Any]], name: str, task_id: str
) -> dict[str, Any]:
    """``running`` (the tool's run) inside its ``execute_tool`` span; a result with
    ``isError`` marks the span failed."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "mcp_tasks.task.id": task_id,
    }
    with tracer.span(f"execute_tool {name}", attributes) as span:
        result = await running
        span.answered({"result": result})
        return result


async def _run_approved(
    tool: ToolSpec, backend: TaskBackend, context: Context, retries: Retry
) -> dict[str, Any]:
    """Wait for the operator's decision, then run the tool with the approved arguments (a
    rejection or no decision in time: an ``isError`` result that says so)."""
    decision = await backend.approval(tool)
    if decision == service.EXPIRED:
        return expired_result()
    if not isinstance(decision, dict) or decision.get("action") != "approve":
        reason = decision.get("reason", "") if isinstance(decision, dict) else ""
        return rejection_result(str(reason))
    try:
        validated = validate_arguments(tool, decision.get("arguments") or backend.task.arguments)
    except ValueError as exc:
        return error_result(str(exc))
    return await run_tool(tool, validated, context, transient=retries.is_transient)


async def _retry_or_end(
    runtime: Runtime, tool: ToolSpec, task: Task, retries: Retry, error: Exception
) -> None:
    """The tool failed transiently: queue its next attempt, or end the task as any failure
    ends it when this was the last one."""
    why = f"{type(error).__name__}: {error}"
    if task.attempt < retries.attempts:
        delay = (
            error.delay
            if isinstance(error, RetryTask) and error.delay is not None
            else retries.delay_before(task.attempt + 1)
        )
        logger.warning(
            "task %s (%s): attempt %d of %d failed, next in %g s",
            task.id,
            task.tool_name,
            task.attempt,
            retries.attempts,
            delay,
            exc_info=error,
            extra=log_fields.of(task),
        )
        await durable(service.retry_later, "a task's next attempt")(
            task.id, task.runs, retries.attempts, delay, why
        )
        return
    await _complete(runtime, task, failure_result(tool, error))


async def _context(
    task: Task, caller: Caller, backend: TaskBackend, access_token: AccessToken | None, user: Any
) -> Context:
    """The tool's ``Context``, restored from the task's snapshot."""
    return Context(
        backend=backend,
        task_id=task.id,
        session_id=task.session_id,
        session=await sessions.session_by_id(task.session_id) if caller.era == "legacy" else None,
        origin_request_id=task.origin_request_id,
        protocol_version=caller.protocol_version,
        client_capabilities=caller.client_capabilities,
        client_info=caller.client_info,
        access_token=access_token,
        user=user,
        lifespan_context=await lifespan_context(),
        request_context=None,
        headers=caller.headers,
        prepared=(task.snapshot.prior_answers or {}).get("prepared"),
        attempt=task.attempt,
    )

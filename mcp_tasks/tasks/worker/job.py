"""Running one task job: the tool, with its caller's context restored (:func:`execute`, in
a :class:`~mcp_tasks.tasks.worker.runtime.Runtime`; :func:`run_task` for rq's own workers).
Sync tools run in a thread and may use the ORM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine
from typing import Any

from django.utils import timezone

from ... import sessions
from ...auth import AccessToken
from ...auth.permissions import allowed_now
from ...authoring.approval import expired_result, rejection_result
from ...authoring.context import Context
from ...authoring.lifespan import lifespan_context
from ...authoring.registry import MCPServer, ToolSpec, mcp
from ...authoring.retries import DEFAULT_RETRY, Retry, RetryTask
from ...authoring.tool_call import error_result, failure_result, run_tool, validate_arguments
from ...core import background, log_fields, trace_hook
from ...core.db import db, persistently
from ...core.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, error_object
from ...core.task_contract import Caller
from ...exceptions import ProtocolError
from ...models import Task
from ..state import crypto, service
from .backend import QuestionFailed, TaskBackend, TaskSuspended, durable, patience
from .runtime import JobSlot, Runtime, TaskWatch, runtime_for_loop

logger = logging.getLogger("mcp_tasks.tasks")

_loops = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = _loops.loop = asyncio.new_event_loop()
    return loop


def run_task(task_id: str, run: int | None = None, server: MCPServer | None = None) -> None:
    """rq entry point for rq's own workers: job ``run`` on the thread's event loop."""
    _loop().run_until_complete(_run_alone(task_id, server or mcp, run))


async def _run_alone(task_id: str, server: MCPServer, run: int | None) -> None:
    runtime = runtime_for_loop()
    await runtime.start()
    try:
        await execute(task_id, server, run, runtime)
    finally:
        await background.drain()  # the loop stops with the job: the last change goes out first


def _begin(
    task_id: str, worker_name: str, run: int | None, claimed_at: Any = None
) -> tuple[Task | None, Any]:
    """:func:`~mcp_tasks.tasks.state.service.begin_run`, and the task's user (or None)."""
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
    """:func:`_begin`, from the event loop when it can, retried while the database is
    unreachable; every try is the same claim (its time too), so a lost answer is harmless."""
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
    """Run job ``run`` of ``task_id`` to a result, error or suspension (``timeout``:
    seconds before it fails; None: the caller enforces one)."""
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
                # The job's machinery failed, not the tool: end the task now with the reason,
                # not when its heartbeat goes missing (once: patience() is not waited twice).
                message = f"The task stopped: {type(exc).__name__}: {exc}"[:2000]
                with contextlib.suppress(Exception):
                    await db(service.fail)(task.id, error_object(INTERNAL_ERROR, message))
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
    """Restore the claimed task's caller context and run its tool to its end."""
    fail = durable(service.fail, "a task's failure")
    tool = server.tools.get(task.tool_name)
    if tool is None:
        await fail(task.id, error_object(INVALID_PARAMS, f"Unknown tool: {task.tool_name}"))
        return
    snapshot = task.snapshot
    try:
        secrets = crypto.unseal(snapshot.sealed) or {}
    except crypto.SnapshotDecryptionError as exc:
        await fail(task.id, error_object(INTERNAL_ERROR, str(exc)))
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
        # Checked before every job: a revoked permission or deactivated user stops it here.
        message = (
            f"The task's caller may no longer use tool {task.tool_name!r} "
            "(a permission or scope it requires is missing)"
        )
        await fail(task.id, error_object(INVALID_PARAMS, message))
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
        await fail(task.id, error_object(INTERNAL_ERROR, f"The task timed out after {timeout:g} s"))
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
        await fail(task.id, error_object(INTERNAL_ERROR, f"The task stopped: {exc}"))
        return
    except service.ReplayMismatch as exc:
        await fail(task.id, error_object(INTERNAL_ERROR, str(exc)))
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
        await fail(task.id, error_object(INTERNAL_ERROR, f"The task stopped: {type(exc).__name__}"))
        raise
    await _complete(runtime, task, result)


def _job_span(task: Task) -> contextlib.AbstractContextManager[object]:
    """The job's span while tracing (child of the creating request's, kept in the snapshot)."""
    tracer = trace_hook.tracer
    if tracer is None:
        return contextlib.nullcontext()
    carrier = (task.snapshot.prior_answers or {}).get("trace")
    attributes = {
        "mcp_tasks.task.id": task.id,
        "gen_ai.tool.name": task.tool_name,
        "mcp_tasks.task.run": task.runs,  # 0: the first run
        "mcp_tasks.task.resumed": task.runs > 0,
        "mcp_tasks.task.attempt": task.attempt,
    }
    trace = carrier if isinstance(carrier, dict) else None
    return tracer.job(trace, f"task job {task.tool_name}", attributes)


async def _traced_tool(
    tracer: trace_hook.Tracer, running: Coroutine[Any, Any, dict[str, Any]], name: str, task_id: str
) -> dict[str, Any]:
    """The tool's run inside its ``execute_tool`` span (``isError`` marks it failed)."""
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
    """Wait for the operators' decision, then run the tool with the approved arguments."""
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
    """After a transient failure: queue the next attempt, or end the task after the last."""
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

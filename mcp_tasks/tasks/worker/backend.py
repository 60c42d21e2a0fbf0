"""The ``ContextBackend`` of a tool run as a task (:class:`TaskBackend`): progress, logs and
questions go through the task service; a question waits a short hold with no slot held.
Also the job's control flow (:class:`TaskSuspended`, :class:`QuestionFailed`) and
:func:`durable`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from channels.layers import get_channel_layer

from ... import sessions
from ...authoring.context import level_allows
from ...authoring.inputs import Question
from ...authoring.registry import ToolSpec
from ...conf import get_config
from ...core import groups, log_fields, redis_clients, trace_hook
from ...core.db import db, persistently
from ...core.jsonrpc import notification
from ...exceptions import ToolError
from ...models import Task, TaskSnapshot
from ..state import approvals, outbox, service
from .runtime import JobSlot, Runtime, TaskWatch

logger = logging.getLogger("mcp_tasks.tasks")

P = ParamSpec("P")
R = TypeVar("R")


class TaskSuspended(BaseException):
    """No answer within the hold window: the job ends; a new job resumes once answered."""


class QuestionFailed(BaseException):
    """A question or its answer could not be stored or read: the task fails rather than let
    the tool go on as if dismissed (a ``BaseException``: the tool cannot swallow it)."""


def patience() -> float:
    """Seconds a job retries its writes while the database is down: ``TASK_LOST_AFTER``."""
    return float(get_config().TASK_LOST_AFTER)


def durable(fn: Callable[P, R], what: str) -> Callable[P, Awaitable[R]]:
    """:func:`~mcp_tasks.core.db.db` of ``fn``, retried for :func:`patience` (idempotent writes)."""
    call = db(fn)

    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return await persistently(lambda: call(*args, **kwargs), patience(), what)

    return run


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
        """Cooperative cancel: a sync tool stops at its next ``Context`` call."""
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
        """To the creating session's GET stream
        (:func:`mcp_tasks.protocol.notices.task_event_notification`)."""
        layer = get_channel_layer(get_config().CHANNEL_LAYER)
        if layer is not None:
            await layer.group_send(
                groups.session_group(self.task.session_id),
                {"type": "mcp.task_event", "event": {**event, "task_id": self.task.id}},
            )

    async def ask(self, questions: list[Question]) -> list[dict[str, Any]]:
        """Record or replay, announce, and hold briefly for the answers (then TaskSuspended)."""
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
        asked = [
            (question.method, question.params, question.key, question.staff)
            for question in questions
        ]
        database = self.runtime.database
        fields: dict[str, Any] | None = None  # what the wake-up may carry of the task
        try:
            if database is None:
                rows = await durable(service.ask_all, "a task's questions")(
                    self.task.id, first, asked, self.runtime.name
                )
            else:
                rows, fields = await persistently(
                    lambda: service.aask_all(
                        database, self.task.id, first, asked, self.runtime.name
                    ),
                    patience(),
                    "a task's questions",
                )
        except (service.ReplayMismatch, service.TaskEnded):
            raise
        except Exception as exc:
            # Never an answer the user did not give: a tool told "cancelled" would go on to a
            # wrong result that looks right.
            failure = "question could not be recorded"
            raise self._failed("record the questions", failure, exc) from exc
        keys: list[str | None] = [row.key for row in rows]
        answers = [service.answer_in(row) for row in rows]  # replayed: already answered
        if not _all_answered(keys, answers):
            try:
                session_id = self.task.session_id if self.snapshot.era == "legacy" else None
                for_staff = all(question.staff is not None for question in questions)
                status = "working" if for_staff else "input_required"
                # Through a Redis failover (up to REDIS_FAILOVER_WAIT) rather than withdraw.
                await redis_clients.riding_out(
                    lambda: outbox.apublish_task_change(
                        self.task.id, status, session_id, fields=fields
                    )
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
        """The operators' decision (``tool.approval``): asked and held once, later read back."""
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
                    lambda: outbox.apublish_task_change(self.task.id, "working", session_id)
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
        """The answers with the missing ones from the wake-up; None if it lacks one."""
        brought = self.watch.answers  # never None: a wake-up carries only answers given
        woken = [
            brought.get(key) if key and answer is None else answer
            for key, answer in zip(keys, answers, strict=True)
        ]
        return woken if _all_answered(keys, woken) else None

    def _unanswerable(self, method: str, why: str) -> dict[str, Any]:
        if method == "elicitation/create":
            return {"action": "cancel"}
        raise ToolError(f"{method} failed: {why}")

    async def _hold(self, keys: list[str | None], answers: list[Any]) -> list[Any]:
        """Wait up to ``INPUT_HOLD_WINDOW`` for the answers, no slot held; then let the task go."""
        try:
            if trace_hook.tracer is None:
                return await self._wait(keys, answers)
            attributes = {"mcp_tasks.task.id": self.task.id, "mcp_tasks.question.count": len(keys)}
            with trace_hook.tracer.span("task wait for answers", attributes):
                return await self._wait(keys, answers)
        except Exception as exc:
            raise self._failed("read the answers", "answer could not be read", exc) from exc

    def _failed(self, action: str, failure: str, exc: Exception) -> QuestionFailed:
        """Log that the job could not ``action``; the error that ends its question."""
        logger.exception(
            "could not %s of task %s", action, self.task.id, extra=log_fields.of(self.task)
        )
        return QuestionFailed(f"its {failure} ({type(exc).__name__}: {exc})")

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

"""Background work for clients without the tasks extension (most hosts): their call of a task tool
starts a task and waits a bounded window (:meth:`TaskHandles.follow`), sending its progress
(``notifications/progress``, given a progress token) and asking its questions inline where the
client can answer (legacy: on the call's stream; modern: an MRTR round whose ``requestState`` names
the task, for the retry to go on with). A task ending in the window answers as the call would have;
else the call answers with a handle (:func:`~.handle_shapes.handle_result`). The companion tools
(:mod:`.companion_tools`) are the tasks API through tools: same engine, answer path, scoping."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..authoring.registry import ToolSpec
from ..conf import get_config
from ..core.jsonrpc import INVALID_PARAMS
from ..core.task_contract import Caller, TaskNotFound
from ..exceptions import ProtocolError
from . import request_state
from .constants import LEGACY_TASKS_VERSION, TASKS_EXTENSION
from .handle_shapes import QUESTION_CAPABILITIES, cancelled_result, handle_result
from .notices import progress_params
from .ports import QuestionView, TaskView
from .question_relay import QuestionRelay
from .request import RequestInfo, Sink
from .stored import is_lookup_key, require_storable
from .task_methods import TaskMethods, ToolCall
from .task_shapes import failure, input_requests, not_found

logger = logging.getLogger("mcp_tasks.protocol")


def speaks_tasks(info: RequestInfo) -> bool:
    """Whether the client can run tasks itself: the modern tasks extension declared in this
    request, or a 2025-11-25 session whose client declared the ``tasks`` capability."""
    if info.modern:
        return info.declares_extension(TASKS_EXTENSION)
    return info.protocol_version == LEGACY_TASKS_VERSION and isinstance(
        info.client_capabilities.get("tasks"), dict
    )


def inline_window(tool: ToolSpec) -> float:
    """Seconds a call of ``tool`` waits for its task (``TaskConfig.inline_window``, else
    ``INLINE_WINDOW``)."""
    window = tool.task.inline_window
    return float(get_config().INLINE_WINDOW if window is None else window)


def final_result(task: TaskView) -> dict[str, Any]:
    """What the call of an ended task answers: its result exactly as the tool gave it, the
    JSON-RPC error of a ``failed`` task, or an ``isError`` result for a cancelled one."""
    if task.status == "completed":
        return dict(task.result or {"content": []})
    if task.status == "failed":
        raise failure(task)
    return cancelled_result(task)


#: What the companion tools let the model answer, whatever the client declared: a form (checked
#: by ``answer_task`` against the question's schema) and a sampling request (the model writes).
ANSWERABLE_BY_TOOLS = ("elicitation", "sampling")


def _answerable_caller(info: RequestInfo) -> Caller:
    """What the task keeps of its caller: the client's capabilities plus what the companion
    tools answer, so that the tool's ``ctx.elicit`` and ``ctx.sample`` can ask."""
    caller = info.caller()
    capabilities = dict(caller.client_capabilities)
    for capability in ANSWERABLE_BY_TOOLS:
        capabilities.setdefault(capability, {})
    return replace(caller, client_capabilities=capabilities)


def _askable(info: RequestInfo, questions: Sequence[QuestionView]) -> bool:
    """The client declared what every question needs."""
    return all(
        QUESTION_CAPABILITIES.get(question.method) in info.client_capabilities
        for question in questions
    )


@dataclass(frozen=True)
class Follow:
    """How one call follows its task: its ``target`` and ``arguments`` (an MRTR round's binding),
    its wait, whether it returns at the task's first state change (check tool) or at its end,
    and whether cancelling the call cancels the task (first call: only it knew of the task)."""

    target: str
    arguments: dict[str, Any]
    window: float
    until_change: bool = False
    abandon: bool = False


class _Progress:
    """Sends the task's progress on the call's stream, when the request has a progress
    token, each time it grows (the spec wants it to increase). Modern era only: in a
    legacy session the worker sends it with the creating request's token itself."""

    def __init__(self, info: RequestInfo, sink: Sink) -> None:
        self.token = info.progress_token if info.modern else None
        self.sink = sink
        self.sent: float | None = None

    async def send(self, task: TaskView) -> None:
        progress = task.progress
        if (
            self.token is None
            or progress is None
            or (self.sent is not None and progress <= self.sent)
        ):
            return
        self.sent = progress
        await self.sink.notify(
            "notifications/progress",
            progress_params(self.token, progress, task.progress_total, task.status_message or None),
        )


class TaskHandles:
    """Task tools for clients without the tasks extension (see the module docstring)."""

    def __init__(self, tasks: TaskMethods) -> None:
        self.tasks = tasks
        self.engine = tasks.engine
        self.relay = QuestionRelay(tasks.engine)

    @staticmethod
    def handled(tool: ToolSpec) -> bool:
        """Whether a client without the tasks extension gets ``tool`` as a task with a
        handle (``TaskConfig.for_all_clients``, else ``TASKS_FOR_ALL_CLIENTS``)."""
        if tool.task.mode == "forbidden":
            return False
        choice = tool.task.for_all_clients
        return bool(get_config().TASKS_FOR_ALL_CLIENTS if choice is None else choice)

    async def call(self, call: ToolCall) -> dict[str, Any]:
        """``tools/call`` of a task tool: start the task (or go on with the one a modern
        retry names) and follow it for the tool's window."""
        tool, info, params = call.tool, call.info, call.params
        arguments = params.get("arguments") or {}
        task = await self.resumed(info, params, tool.name, arguments)
        if task is None:
            # Created to the end even when the client cancels the call meanwhile (a creation
            # in Django's thread runs on): then it is cancelled, and the cancel goes on.
            creation = asyncio.ensure_future(self.tasks.create(call, _answerable_caller(info)))
            try:
                created = await asyncio.shield(creation)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):  # a refusal or failure: the cancel wins
                    created = await creation
                    if not isinstance(created, dict):
                        await self._abandon(created.id, info.principal.scope)
                raise
            if isinstance(created, dict):
                return created  # TaskConfig.prepare asks first (MRTR)
            if inline_window(tool) <= 0:  # a handle at once, however quick the task
                return self._handle(created, (), time.monotonic())
            task = created
        plan = Follow(tool.name, arguments, inline_window(tool), abandon=True)
        return await self.follow(task, info, call.sink, plan)

    async def resumed(
        self, info: RequestInfo, params: dict[str, Any], target: str, arguments: dict[str, Any]
    ) -> TaskView | None:
        """The task a modern retry goes on with (its ``requestState`` names it), once this
        round's answers are recorded through the one answer path; None for a first call."""
        if not info.modern or "requestState" not in params:
            return None
        _, task_id = request_state.unseal_with_task(
            params["requestState"],
            principal=info.principal.scope,
            method="tools/call",
            target=target,
            arguments=arguments,
        )
        if task_id is None:
            return None  # a round of TaskConfig.prepare: the task does not exist yet
        responses = params.get("inputResponses") or {}
        if not isinstance(responses, dict):
            raise ProtocolError(INVALID_PARAMS, "params.inputResponses must be an object")
        require_storable(responses, "params.inputResponses")
        answers = {key: value for key, value in responses.items() if is_lookup_key(key)}
        try:
            await self.tasks.record_answers(task_id, info.principal.scope, answers)
            return await self.engine.get(task_id, info.principal.scope)
        except TaskNotFound:
            raise not_found() from None

    async def follow(
        self, task: TaskView, info: RequestInfo, sink: Sink, plan: Follow
    ) -> dict[str, Any]:
        """Wait per ``plan``: the final result, an MRTR round of the questions, or a handle."""
        scope = info.principal.scope
        started = time.monotonic()
        relayed: dict[str, asyncio.Task[None]] = {}
        progress = _Progress(info, sink)
        await sink.watch_task(task.id)  # before the read: no change after it is missed
        try:
            task = await self.engine.get(task.id, scope)
            seen = (task.status, task.waiting_for)
            while True:
                if task.is_terminal:
                    return final_result(task)
                await progress.send(task)
                questions: Sequence[QuestionView] = (
                    await self.engine.questions(task) if task.status == "input_required" else ()
                )
                if questions and _askable(info, questions):
                    if info.modern:
                        return self._question_round(task, questions, info, plan)
                    await self.relay.relay_questions(task.id, scope, sink, relayed)
                elif questions or (plan.until_change and (task.status, task.waiting_for) != seen):
                    return self._handle(task, questions, started)
                remaining = plan.window - (time.monotonic() - started)
                if remaining <= 0:
                    return self._handle(task, questions, started)
                fields = await sink.wait_for_task(task.id, remaining)
                task = (
                    self.engine.with_fields(task, fields)
                    if fields
                    else await self.engine.get(task.id, scope)
                )
        except TaskNotFound:
            raise not_found() from None
        except asyncio.CancelledError:
            if plan.abandon and not task.is_terminal:
                await asyncio.shield(self._abandon(task.id, scope))
            raise
        finally:
            for pending in relayed.values():
                pending.cancel()

    def _handle(
        self, task: TaskView, questions: Sequence[QuestionView], started: float
    ) -> dict[str, Any]:
        return handle_result(
            task,
            questions,
            get_config().COMPANION_TOOLS,
            waited=round(time.monotonic() - started, 1),
            check_wait=float(get_config().CHECK_WAIT),
        )

    def _question_round(
        self, task: TaskView, questions: Sequence[QuestionView], info: RequestInfo, plan: Follow
    ) -> dict[str, Any]:
        """The task's questions as an ``input_required`` round of this call: the client
        retries it with the answers and the sealed state, which names the task."""
        state = request_state.seal(
            {},
            principal=info.principal.scope,
            method="tools/call",
            target=plan.target,
            arguments=plan.arguments,
            task_id=task.id,
        )
        return {
            "resultType": "input_required",
            "inputRequests": input_requests(questions),
            "requestState": state,
        }

    async def _abandon(self, task_id: str, principal_scope: str) -> None:
        """The client cancelled the call that started the task before it learned the
        task's id: the task is cancelled with it, as the tool's inline run would have been."""
        try:
            await self.engine.cancel(task_id, principal_scope)
        except Exception:
            logger.exception(
                "could not cancel task %s after its call was cancelled",
                task_id,
                extra={"task_id": task_id, "principal": principal_scope},
            )

"""The tasks extension (``io.modelcontextprotocol/tasks``) on the modern wire: ``tools/call`` of a
task tool becomes a durable task (both eras); ``tasks/get``, ``tasks/update``, ``tasks/cancel``.
The engine (:class:`~mcp_tasks.protocol.ports.TaskEngine`) owns the state; this module only
translates to and from the wire shapes."""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass
from typing import Any

from .. import jsontext
from ..auth import Principal
from ..authoring.registry import MCPServer, ToolSpec
from ..authoring.tool_call import invoke
from ..conf import get_config
from ..core import LONGEST_SECONDS
from ..core.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    TASK_QUOTA_EXCEEDED,
)
from ..core.task_contract import Caller, InvalidAnswer, NewTask, QuotaExceeded, TaskNotFound
from ..exceptions import InputRequired, ProtocolError
from .constants import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, TASKS_EXTENSION
from .ports import TaskEngine, TaskView
from .request import RequestInfo, Sink
from .request_backend import RequestBackend
from .stored import is_lookup_key, require_storable
from .task_shapes import detailed_task, legacy_task, not_found, task_fields, task_id_of

logger = logging.getLogger("mcp_tasks.protocol")

#: The longest time to live a 2025-11-25 client may ask for (a century, in ms).
LONGEST_TTL_MS = LONGEST_SECONDS * 1000
#: Seconds a client refused for its quota of active tasks is asked to wait.
QUOTA_RETRY_AFTER = 1
#: The most task ids one ``subscriptions/listen`` may watch.
MAX_WATCHED_TASKS = 1000


def require_tasks_capability(info: RequestInfo) -> None:
    if not info.declares_extension(TASKS_EXTENSION):
        raise ProtocolError(
            MISSING_CLIENT_CAPABILITY,
            f"Missing required client capability: declare the {TASKS_EXTENSION} extension",
            {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )


@dataclass(frozen=True)
class ToolCall:
    """A ``tools/call`` of a task tool, its arguments validated: what starts its task."""

    tool: ToolSpec
    validated: dict[str, Any]
    info: RequestInfo
    sink: Sink
    params: dict[str, Any]


async def _prepare(call: ToolCall) -> tuple[Any, dict[str, Any] | None]:
    """Run ``TaskConfig.prepare`` inline (MRTR rounds); returns (value, input_required)."""
    tool, info, params = call.tool, call.info, call.params
    prepare = tool.task.prepare
    if prepare is None:
        return None, None
    arguments = params.get("arguments") or {}
    backend = RequestBackend(info, call.sink, params, "tools/call", tool.name, arguments)
    accepted = inspect.signature(prepare).parameters
    kwargs = {name: value for name, value in call.validated.items() if name in accepted}
    try:
        value = await invoke(
            prepare, inspect.iscoroutinefunction(prepare), {"ctx": backend.context(), **kwargs}
        )
    except InputRequired as exc:
        return None, backend.input_required(exc)
    return value, None


def _require_storable_request(info: RequestInfo, params: dict[str, Any]) -> None:
    """What a task records of its request: the raw arguments (unknown keys included), the
    request id, the progress token and (modern era) the client's envelope."""
    require_storable(params.get("arguments"), "params.arguments")
    require_storable(info.request_id, "id")
    require_storable(info.progress_token, "params._meta.progressToken")
    if info.modern:  # a legacy session's were checked at initialize
        for key, value in (
            (META_CLIENT_INFO, info.client_info),
            (META_CLIENT_CAPABILITIES, info.client_capabilities),
        ):
            require_storable(value, jsontext.describe("params._meta", (key,)))


def _time_to_live(tool: ToolSpec, info: RequestInfo, params: dict[str, Any]) -> float | None:
    """The tool's TTL; a 2025-11-25 client may ask for a shorter one, never a longer one."""
    ttl = tool.task.ttl
    requested = params.get("task")
    if (
        not info.modern
        and isinstance(requested, dict)
        and isinstance(requested.get("ttl"), int)
        and not isinstance(requested["ttl"], bool)  # JSON true is no number of milliseconds
        and requested["ttl"] > 0
    ):
        asked = min(requested["ttl"], LONGEST_TTL_MS) / 1000
        limit = ttl if ttl is not None else get_config().TASK_TTL
        ttl = asked if limit is None else min(asked, limit)
    return ttl


def _new_task(call: ToolCall, prepared: Any, caller: Caller | None) -> NewTask:
    tool, info, params = call.tool, call.info, call.params
    return NewTask(
        tool_name=tool.name,
        arguments=params.get("arguments") or {},
        caller=caller or info.caller(),
        progress_token=info.progress_token,
        session_id=info.session_id,
        origin_request_id=info.request_id,
        prepared=jsontext.storable(prepared, f"what {tool.name}'s prepare returned"),
        queue=tool.task.queue,
        ttl=_time_to_live(tool, info, params),
        poll_interval=tool.task.poll_interval,
        timeout=tool.task.timeout,
    )


class TaskMethods:
    """The task methods of the modern era, and the start of a task in both eras."""

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine

    async def create(
        self, call: ToolCall, caller: Caller | None = None
    ) -> TaskView | dict[str, Any]:
        """The task, durable and queued; or the ``input_required`` round of its
        ``TaskConfig.prepare`` (modern era), before any task exists. ``caller``: what the
        task keeps of its caller (default: the request's :meth:`RequestInfo.caller`)."""
        _require_storable_request(call.info, call.params)
        prepared, pending = await _prepare(call)
        if pending is not None:
            return pending
        try:
            return await self.engine.create(_new_task(call, prepared, caller))
        except QuotaExceeded as exc:
            raise ProtocolError(
                TASK_QUOTA_EXCEEDED,
                f"Task not started: {exc}; retry once some of them have finished",
                {"limit": exc.setting, "max": exc.limit, "retryAfter": QUOTA_RETRY_AFTER},
            ) from None
        except RuntimeError as exc:
            raise ProtocolError(INTERNAL_ERROR, f"Could not start the task: {exc}") from exc

    async def start(self, call: ToolCall) -> dict[str, Any]:
        """``tools/call`` answered with a ``CreateTaskResult`` once the task is durable."""
        task = await self.create(call)
        if isinstance(task, dict):
            return task
        if not call.info.modern:
            return {"task": legacy_task(task)}
        return {"resultType": "task", **task_fields(task)}

    async def _owned(self, task_id: str, principal: Principal) -> TaskView:
        try:
            return await self.engine.get(task_id, principal.scope)
        except TaskNotFound:
            raise not_found() from None

    async def _detailed(self, task: TaskView) -> dict[str, Any]:
        questions = await self.engine.questions(task) if task.status == "input_required" else []
        return detailed_task(task, questions)

    async def get(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        """The detailed task. A ``working`` task is answered at its next change (a result,
        a question, progress: anything that moves ``lastUpdatedAt``), or after
        ``TASK_GET_HOLD`` seconds: the client hears of it at once, not at its next poll."""
        require_tasks_capability(info)
        task_id = task_id_of(params)
        hold = float(get_config().TASK_GET_HOLD)
        if hold > 0:
            await sink.watch_task(task_id)  # before the read: no change after it is missed
        task = await self._owned(task_id, info.principal)
        seen = task.updated_at
        deadline = time.monotonic() + hold
        while task.status == "working" and (remaining := deadline - time.monotonic()) > 0:
            fields = await sink.wait_for_task(task_id, remaining)
            # The change that ended it may carry what it left: no read back.
            task = (
                self.engine.with_fields(task, fields)
                if fields
                else await self._owned(task_id, info.principal)
            )
            if task.updated_at != seen:
                break  # a wake-up that brought nothing new (read already) waits on
        return await self._detailed(task)

    async def update(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Record each response on its own: one that is refused or fails leaves the others
        recorded, and the error that follows says which one it was."""
        require_tasks_capability(info)
        task_id = task_id_of(params)
        responses = params.get("inputResponses")
        refused: list[str] = []
        answerable: dict[str, Any] = {}
        if isinstance(responses, dict):
            for key, response in responses.items():
                if not is_lookup_key(key):
                    continue  # names no question: ignored, like any unknown key
                try:
                    require_storable(response, jsontext.describe("params.inputResponses", (key,)))
                except ProtocolError as exc:
                    refused.append(exc.message)
                else:
                    answerable[key] = response
        try:
            failed = await self.record_answers(task_id, info.principal.scope, answerable)
        except TaskNotFound:
            raise not_found() from None
        if not isinstance(responses, dict):
            raise ProtocolError(INVALID_PARAMS, "params.inputResponses must be an object")
        if failed:
            raise ProtocolError(
                INTERNAL_ERROR, f"Could not record {', '.join(failed)}; the other responses were"
            )
        if refused:
            raise ProtocolError(
                INVALID_PARAMS, f"{'; '.join(refused)} (the other responses were recorded)"
            )
        return {}

    async def record_answers(
        self, task_id: str, principal_scope: str, responses: dict[str, Any]
    ) -> list[str]:
        """Answer the caller's task (``TaskNotFound`` if it is not theirs), each response in
        a transaction of its own; returns the fields that could not be recorded."""
        if not responses:
            await self.engine.get(task_id, principal_scope)  # nothing to record: theirs?
        failed: list[str] = []
        log = {"task_id": task_id, "principal": principal_scope}
        for number, (key, response) in enumerate(responses.items()):
            try:
                await self.engine.answer(task_id, key, response, principal_scope, strict=True)
            except TaskNotFound:
                if number == 0:
                    raise
                # It expired between two answers: the ones before it were recorded.
                failed.append(jsontext.describe("params.inputResponses", (key,)))
            except InvalidAnswer as exc:
                # Per the extension, unusable responses are ignored; the question stays open.
                logger.info(
                    "ignored an invalid answer to %s of task %s: %s", key, task_id, exc, extra=log
                )
            except Exception:
                logger.exception(
                    "could not record the answer to %s of task %s", key, task_id, extra=log
                )
                failed.append(jsontext.describe("params.inputResponses", (key,)))
        return failed

    async def cancel(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        require_tasks_capability(info)
        try:
            await self.engine.cancel(task_id_of(params), info.principal.scope)
        except TaskNotFound:
            raise not_found() from None
        return {}

    async def watched(self, task_id: str, principal_scope: str) -> dict[str, Any] | None:
        """The detailed task for a ``notifications/tasks`` push, None if not the caller's."""
        try:
            task = await self.engine.get(task_id, principal_scope)
        except TaskNotFound:
            return None
        return await self._detailed(task)

    async def owned_ids(self, task_ids: list[Any], principal_scope: str) -> list[str]:
        """The ``task_ids`` the caller may watch (``-32602`` past :data:`MAX_WATCHED_TASKS`)."""
        if len(task_ids) > MAX_WATCHED_TASKS:
            raise ProtocolError(
                INVALID_PARAMS, f"params.notifications.taskIds: at most {MAX_WATCHED_TASKS} tasks"
            )
        wanted = [str(task_id) for task_id in task_ids if is_lookup_key(task_id)]
        return await self.engine.owned(wanted, principal_scope) if wanted else []

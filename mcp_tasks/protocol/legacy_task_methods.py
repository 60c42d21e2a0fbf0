"""The experimental tasks of protocol 2025-11-25 (SEP-1686) over the same engine: only the
wire shapes differ (``ttl``/``pollInterval``, a tool error is ``failed``, ``tasks/result``
blocks and carries the task's questions on its stream)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from django.core import signing

from ..authoring.registry import MCPServer
from ..core.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from ..core.task_contract import TaskNotFound
from ..exceptions import ProtocolError
from .constants import LEGACY_TASKS_VERSION
from .ports import TaskEngine, TaskView
from .question_relay import QuestionRelay
from .request import RequestInfo, Sink
from .task_shapes import failure, legacy_task, not_found, related, task_id_of

PAGE_SIZE = 50
_CURSOR_SALT = "mcp_tasks.tasks_list_cursor"


def _require_revision(info: RequestInfo, method: str) -> None:
    if info.protocol_version != LEGACY_TASKS_VERSION:
        raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)


def _offset_of(cursor: Any) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, str):
        with contextlib.suppress(signing.BadSignature, TypeError, ValueError):
            return int(signing.loads(cursor, salt=_CURSOR_SALT))
    raise ProtocolError(INVALID_PARAMS, "Invalid cursor")


class LegacyTaskMethods:
    """``tasks/get``, ``tasks/result``, ``tasks/list`` and ``tasks/cancel`` of 2025-11-25,
    and what a session's streams send of its tasks."""

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine
        self.relay = QuestionRelay(engine)

    async def _task(self, info: RequestInfo, params: dict[str, Any], method: str) -> TaskView:
        _require_revision(info, method)
        try:
            return await self.engine.get(task_id_of(params), info.principal.scope)
        except TaskNotFound:
            raise not_found() from None

    async def get(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        return legacy_task(await self._task(info, params, "tasks/get"))

    async def list(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        _require_revision(info, "tasks/list")
        offset = _offset_of(params.get("cursor"))
        tasks = await self.engine.page(info.principal.scope, offset, PAGE_SIZE + 1)
        result: dict[str, Any] = {"tasks": [legacy_task(task) for task in tasks[:PAGE_SIZE]]}
        if len(tasks) > PAGE_SIZE:
            result["nextCursor"] = signing.dumps(offset + PAGE_SIZE, salt=_CURSOR_SALT)
        return result

    async def cancel(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        task = await self._task(info, params, "tasks/cancel")
        if task.is_terminal:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Cannot cancel task in terminal state '{legacy_task(task)['status']}'",
            )
        return legacy_task(await self.engine.cancel(task.id, info.principal.scope))

    async def result(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Block until the task ends and return what the call itself would have returned,
        relaying the task's questions on this stream meanwhile."""
        _require_revision(info, "tasks/result")
        await sink.watch_task(task_id_of(params))  # before the first read: no change is missed
        task = await self._task(info, params, "tasks/result")
        relayed: dict[str, asyncio.Task[None]] = {}
        try:
            while not task.is_terminal:
                if task.status == "input_required":
                    await self.relay.relay_questions(task.id, info.principal.scope, sink, relayed)
                await sink.wait_for_task(
                    task.id, timeout=max((task.poll_interval_ms or 1000) / 1000, 1.0) * 5
                )
                task = await self._task(info, params, "tasks/result")
        finally:
            for pending in relayed.values():
                pending.cancel()
        if task.status == "failed":
            raise failure(task)
        if task.status == "cancelled":
            raise ProtocolError(INTERNAL_ERROR, "The task was cancelled")
        result = dict(task.result or {"content": []})
        result["_meta"] = {**(result.get("_meta") or {}), **related(task.id)}
        return result

    async def status(self, task_id: str, session_id: str) -> dict[str, Any] | None:
        """``notifications/tasks/status`` params for a task of this session, else None."""
        task = await self.engine.of_session(task_id, session_id)
        return legacy_task(task) if task is not None else None

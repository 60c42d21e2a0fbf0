"""The experimental tasks of protocol 2025-11-25 (SEP-1686), over the same engine.

A thin adapter: the same task rows, service and worker as the modern tasks extension;
only the wire shapes differ (``{"task": {...}}``, ``ttl``/``pollInterval``, a tool error is
``failed``, ``tasks/result`` blocks and carries the task's questions on its stream).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.core import signing

from ..db import db
from ..exceptions import ProtocolError, ToolError
from ..models import InputRequest, Task
from ..server import MCPServer
from ..tasks import service
from . import handlers
from .constants import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LEGACY_TASKS_VERSION,
    META_RELATED_TASK,
    METHOD_NOT_FOUND,
)
from .request import RequestInfo, Sink
from .stored import require_storable
from .tasks import NOT_FOUND, task_fields, task_id_of

logger = logging.getLogger("mcp_tasks.protocol")

PAGE_SIZE = 50
_CURSOR_SALT = "mcp_tasks.tasks_list_cursor"


def legacy_task(task: Task) -> dict[str, Any]:
    """The ``Task`` object of 2025-11-25."""
    return task_fields(task, legacy=True)


def related(task_id: str) -> dict[str, Any]:
    return {META_RELATED_TASK: {"taskId": task_id}}


def _require_revision(info: RequestInfo, method: str) -> None:
    if info.protocol_version != LEGACY_TASKS_VERSION:
        raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)


async def _task(info: RequestInfo, params: dict[str, Any], method: str) -> Task:
    _require_revision(info, method)
    try:
        return await service.aget_task(task_id_of(params), info.principal.scope)
    except service.TaskNotFound:
        raise ProtocolError(INVALID_PARAMS, NOT_FOUND) from None


async def get_task(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    return legacy_task(await _task(info, params, "tasks/get"))


async def list_tasks(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    _require_revision(info, "tasks/list")
    offset = 0
    cursor = params.get("cursor")
    if cursor is not None:
        try:
            if not isinstance(cursor, str):
                raise TypeError(cursor)
            offset = int(signing.loads(cursor, salt=_CURSOR_SALT))
        except (signing.BadSignature, TypeError, ValueError):
            raise ProtocolError(INVALID_PARAMS, "Invalid cursor") from None

    def page() -> list[Task]:
        return list(service.list_tasks(info.principal.scope)[offset : offset + PAGE_SIZE + 1])

    tasks = await db(page)()
    result: dict[str, Any] = {"tasks": [legacy_task(task) for task in tasks[:PAGE_SIZE]]}
    if len(tasks) > PAGE_SIZE:
        result["nextCursor"] = signing.dumps(offset + PAGE_SIZE, salt=_CURSOR_SALT)
    return result


async def cancel_task(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    task = await _task(info, params, "tasks/cancel")
    if task.is_terminal:
        raise ProtocolError(
            INVALID_PARAMS, f"Cannot cancel task in terminal state '{legacy_task(task)['status']}'"
        )
    task = await db(service.cancel)(task.id, info.principal.scope)
    return legacy_task(task)


async def _relay(task_id: str, request: InputRequest, principal_scope: str, sink: Sink) -> None:
    """Send one of the task's questions on a stream that claimed it; the reply goes to the
    one answer path. Without a usable answer the claim is released, so it is asked again."""
    params = {**request.params, "_meta": related(task_id)}
    answered = False
    try:
        reply = await sink.request(request.method, params)
        require_storable(reply, "the reply")
        answered = await db(service.answer)(
            task_id, request.key, reply, principal_scope=principal_scope, answered_by="client"
        )
    except ToolError as exc:
        logger.info("question %s of task %s was not answered: %s", request.key, task_id, exc)
    except (service.InvalidAnswer, ProtocolError) as exc:
        logger.info("ignored an invalid answer to %s of task %s: %s", request.key, task_id, exc)
    finally:
        if not answered:
            await db(service.release_relay)(task_id, request.key)


async def relay_questions(
    task_id: str, principal_scope: str, sink: Sink, relayed: dict[str, asyncio.Task[None]]
) -> None:
    """Send the task's waiting questions on this stream, each one once per session: a
    question another stream has claimed is left to it (and retried here if released)."""

    def waiting() -> list[InputRequest]:
        task = service.find_task(task_id)  # by primary key; the owner is checked here
        if task is None or task.principal_scope != principal_scope:
            return []
        return service.outstanding_requests(task)

    for request in await db(waiting)():
        running = relayed.get(request.key)
        if running is not None and not running.done():
            continue
        if await db(service.claim_relay)(task_id, request.key):
            relayed[request.key] = asyncio.ensure_future(
                _relay(task_id, request, principal_scope, sink)
            )


async def task_result(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    """Block until the task ends and return what the call itself would have returned,
    relaying the task's questions on this stream meanwhile."""
    _require_revision(info, "tasks/result")
    await sink.watch_task(task_id_of(params))  # before the first read: no change is missed
    task = await _task(info, params, "tasks/result")
    relayed: dict[str, asyncio.Task[None]] = {}
    try:
        while not task.is_terminal:
            if task.status == "input_required":
                await relay_questions(task.id, info.principal.scope, sink, relayed)
            await sink.wait_for_task(
                task.id, timeout=max((task.poll_interval_ms or 1000) / 1000, 1.0) * 5
            )
            task = await Task.objects.aget(pk=task.id)
    finally:
        for pending in relayed.values():
            pending.cancel()
    if task.status == "failed":
        error = task.error or {"code": INTERNAL_ERROR, "message": "The task failed"}
        raise ProtocolError(
            error.get("code", INTERNAL_ERROR),
            error.get("message", "The task failed"),
            error.get("data"),
        )
    if task.status == "cancelled":
        raise ProtocolError(INTERNAL_ERROR, "The task was cancelled")
    result = dict(task.result or {"content": []})
    result["_meta"] = {**(result.get("_meta") or {}), **related(task.id)}
    return result


def install() -> None:
    """Plug the 2025-11-25 task methods into the legacy method table."""
    handlers.LEGACY_METHODS.update(
        {
            "tasks/get": get_task,
            "tasks/result": task_result,
            "tasks/list": list_tasks,
            "tasks/cancel": cancel_task,
        }
    )


async def legacy_task_status(task_id: str, session: Any) -> dict[str, Any] | None:
    """``notifications/tasks/status`` params for a task of this session, else None."""

    def load() -> dict[str, Any] | None:
        task = service.find_task(task_id)
        return legacy_task(task) if task is not None and task.session_id == session.id else None

    return await db(load)()

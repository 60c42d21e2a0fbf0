"""The tasks extension (``io.modelcontextprotocol/tasks``) on the modern wire.

Turns ``tools/call`` of a task tool into a durable task, and serves ``tasks/get``,
``tasks/update`` and ``tasks/cancel``. The engine (:mod:`mcp_tasks.tasks.service`) owns
the state; this module only translates to and from the wire shapes.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from ..conf import get_config
from ..db import db
from ..exceptions import InputRequired, ProtocolError
from ..models import Task
from ..runner import invoke
from ..server import MCPServer, ToolSpec
from ..tasks import service
from . import handlers
from .constants import INTERNAL_ERROR, INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, TASKS_EXTENSION
from .execution import RequestBackend, gather_answers, input_required_result, make_context
from .request import RequestInfo, Sink

logger = logging.getLogger("mcp_tasks.protocol")

NOT_FOUND = "Task not found"


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def task_fields(task: Task, *, legacy: bool = False) -> dict[str, Any]:
    """The ``Task`` object shared by ``CreateTaskResult``, ``tasks/get`` and notifications.

    ``legacy``: the 2025-11-25 shape (``ttl``/``pollInterval``, and a tool result with
    ``isError`` counts as ``failed``).
    """
    status = task.status
    if (
        legacy
        and status == "completed"
        and isinstance(task.result, dict)
        and task.result.get("isError")
    ):
        status = "failed"
    fields: dict[str, Any] = {
        "taskId": task.id,
        "status": status,
        "createdAt": iso(task.created_at),
        "lastUpdatedAt": iso(task.updated_at),
        "ttl" if legacy else "ttlMs": task.ttl_ms,
    }
    if task.status_message:
        fields["statusMessage"] = task.status_message
    if task.poll_interval_ms is not None:
        fields["pollInterval" if legacy else "pollIntervalMs"] = task.poll_interval_ms
    return fields


def detailed_task(task: Task) -> dict[str, Any]:
    """The ``DetailedTask``: the task plus its questions, result or error (sync: ORM)."""
    fields = task_fields(task)
    if task.status == "input_required":
        fields["inputRequests"] = {
            request.key: {
                "method": request.method,
                **({"params": request.params} if request.params else {}),
            }
            for request in service.outstanding_requests(task)
        }
    elif task.status == "completed":
        fields["result"] = task.result or {"content": []}
    elif task.status == "failed":
        fields["error"] = task.error or {"code": INTERNAL_ERROR, "message": "Failed"}
    return fields


def require_tasks_capability(info: RequestInfo) -> None:
    if TASKS_EXTENSION not in (info.client_capabilities.get("extensions") or {}):
        raise ProtocolError(
            MISSING_CLIENT_CAPABILITY,
            f"Missing required client capability: declare the {TASKS_EXTENSION} extension",
            {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )


def _access_token(info: RequestInfo) -> dict[str, Any] | None:
    token = info.principal.access_token
    if token is None:
        return None
    return {
        "token": token.token,
        "client_id": token.client_id,
        "scopes": list(token.scopes),
        "expires_at": token.expires_at,
        "claims": token.claims,
    }


def _snapshot_headers(info: RequestInfo) -> dict[str, str]:
    keep = {name.lower() for name in get_config()["SNAPSHOT_HEADERS"]}
    return {
        name: value
        for name, value in info.headers.items()
        if name in keep and isinstance(value, str)
    }


async def _prepare(
    tool: ToolSpec, validated: dict[str, Any], info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> tuple[Any, dict[str, Any] | None]:
    """Run ``TaskConfig.prepare`` inline (MRTR rounds); returns (value, input_required)."""
    prepare = tool.task.prepare
    if prepare is None:
        return None, None
    arguments = params.get("arguments") or {}
    backend = RequestBackend(
        info, sink, gather_answers(info, params, "tools/call", tool.name, arguments)
    )
    import inspect

    accepted = inspect.signature(prepare).parameters
    kwargs = {name: value for name, value in validated.items() if name in accepted}
    try:
        value = await invoke(
            prepare,
            inspect.iscoroutinefunction(prepare),
            {"ctx": make_context(info, backend), **kwargs},
        )
    except InputRequired as exc:
        return None, input_required_result(exc, backend, info, "tools/call", tool.name, arguments)
    return value, None


async def start_task(
    server: MCPServer,
    tool: ToolSpec,
    validated: dict[str, Any],
    info: RequestInfo,
    sink: Sink,
    params: dict[str, Any],
) -> dict[str, Any]:
    """``tools/call`` answered with a ``CreateTaskResult`` once the task is durable."""
    prepared, pending = await _prepare(tool, validated, info, sink, params)
    if pending is not None:
        return pending
    config = tool.task
    ttl = config.ttl
    requested = params.get("task")
    if (
        not info.modern
        and isinstance(requested, dict)
        and isinstance(requested.get("ttl"), int)
        and requested["ttl"] > 0
    ):
        # 2025-11-25: the client may ask for a shorter time to live, never a longer one.
        asked = requested["ttl"] / 1000
        limit = ttl if ttl is not None else get_config()["TASK_TTL"]
        ttl = asked if limit is None else min(asked, limit)
    new = service.NewTask(
        tool_name=tool.name,
        arguments=params.get("arguments") or {},
        principal_scope=info.principal.scope,
        era=info.era,
        protocol_version=info.protocol_version,
        client_info=info.client_info,
        client_capabilities=info.client_capabilities,
        log_level=info.log_level,
        progress_token=info.progress_token,
        session_id=info.session_id,
        origin_request_id=info.request_id,
        access_token=_access_token(info),
        headers=_snapshot_headers(info),
        prepared=prepared,
        queue=config.queue,
        ttl=ttl,
        poll_interval=config.poll_interval,
        timeout=config.timeout,
    )
    try:
        task = await db(service.create_task)(new)
    except RuntimeError as exc:
        raise ProtocolError(INTERNAL_ERROR, f"Could not start the task: {exc}") from exc
    if not info.modern:
        from .legacy_tasks import legacy_task

        return {"task": legacy_task(task)}
    return {"resultType": "task", **task_fields(task)}


async def _task_for(info: RequestInfo, params: dict[str, Any]) -> Task:
    require_tasks_capability(info)
    try:
        return await db(service.get_task)(params.get("taskId"), info.principal.scope)
    except service.TaskNotFound:
        raise ProtocolError(INVALID_PARAMS, NOT_FOUND) from None


async def get_task(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    task = await _task_for(info, params)
    return await db(detailed_task)(task)


async def update_task(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    task = await _task_for(info, params)
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise ProtocolError(INVALID_PARAMS, "params.inputResponses must be an object")
    answer = db(service.answer)
    for key, response in responses.items():
        try:
            await answer(
                task.id, key, response, principal_scope=info.principal.scope, answered_by="client"
            )
        except service.InvalidAnswer as exc:
            # Per the extension, unusable responses are ignored; the question stays open.
            logger.info("ignored an invalid answer to %s of task %s: %s", key, task.id, exc)
    return {}


async def cancel_task(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    require_tasks_capability(info)
    task_id = params.get("taskId")
    if not isinstance(task_id, str):
        raise ProtocolError(INVALID_PARAMS, NOT_FOUND)
    try:
        await db(service.cancel)(task_id, info.principal.scope)
    except service.TaskNotFound:
        raise ProtocolError(INVALID_PARAMS, NOT_FOUND) from None
    return {}


async def watched_task(task_id: str, principal_scope: str) -> dict[str, Any] | None:
    """The detailed task for a ``notifications/tasks`` push, None if not the caller's."""

    def load() -> dict[str, Any] | None:
        try:
            return detailed_task(service.get_task(task_id, principal_scope))
        except service.TaskNotFound:
            return None

    return await db(load)()


async def owned_task_ids(task_ids: list[Any], principal_scope: str) -> list[str]:
    """The subset of ``task_ids`` the caller may watch."""
    wanted = [task_id for task_id in task_ids if isinstance(task_id, str)]
    return [
        task.id
        async for task in Task.objects.filter(pk__in=wanted, principal_scope=principal_scope).only(
            "id"
        )
    ]


def install() -> None:
    """Plug the tasks extension into the method tables."""
    from . import legacy_tasks

    handlers.hooks.start_task = start_task
    handlers.MODERN_METHODS.update(
        {"tasks/get": get_task, "tasks/update": update_task, "tasks/cancel": cancel_task}
    )
    legacy_tasks.install()

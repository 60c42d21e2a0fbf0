"""The tasks extension (``io.modelcontextprotocol/tasks``) on the modern wire.

Turns ``tools/call`` of a task tool into a durable task, and serves ``tasks/get``,
``tasks/update`` and ``tasks/cancel``. The engine (:mod:`mcp_tasks.tasks.service`) owns
the state; this module only translates to and from the wire shapes.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from .. import jsontext
from ..conf import get_config
from ..db import db
from ..exceptions import InputRequired, ProtocolError
from ..models import Task
from ..runner import invoke
from ..server import MCPServer, ToolSpec
from ..tasks import service
from . import handlers
from .constants import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    MISSING_CLIENT_CAPABILITY,
    TASKS_EXTENSION,
)
from .execution import RequestBackend, gather_answers, input_required_result, make_context
from .request import RequestInfo, Sink
from .stored import is_lookup_key, require_storable

logger = logging.getLogger("mcp_tasks.protocol")

NOT_FOUND = "Task not found"
#: The longest time to live a 2025-11-25 client may ask for (a century, in ms).
LONGEST_TTL_MS = 100 * 365 * 86400 * 1000
#: The most task ids one ``subscriptions/listen`` may watch.
MAX_WATCHED_TASKS = 1000


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
        # The result exactly as the call itself would have answered (2026-07-28: every
        # Result carries resultType).
        fields["result"] = {**(task.result or {"content": []}), "resultType": "complete"}
    elif task.status == "failed":
        fields["error"] = task.error or {"code": INTERNAL_ERROR, "message": "Failed"}
    return fields


def require_tasks_capability(info: RequestInfo) -> None:
    if not info.declares_extension(TASKS_EXTENSION):
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
        and requested["ttl"] > 0
    ):
        asked = min(requested["ttl"], LONGEST_TTL_MS) / 1000
        limit = ttl if ttl is not None else get_config()["TASK_TTL"]
        ttl = asked if limit is None else min(asked, limit)
    return ttl


async def start_task(
    server: MCPServer,
    tool: ToolSpec,
    validated: dict[str, Any],
    info: RequestInfo,
    sink: Sink,
    params: dict[str, Any],
) -> dict[str, Any]:
    """``tools/call`` answered with a ``CreateTaskResult`` once the task is durable."""
    _require_storable_request(info, params)
    prepared, pending = await _prepare(tool, validated, info, sink, params)
    if pending is not None:
        return pending
    config = tool.task
    ttl = _time_to_live(tool, info, params)
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
        prepared=jsontext.storable(prepared, f"what {tool.name}'s prepare returned"),
        queue=config.queue,
        ttl=ttl,
        poll_interval=config.poll_interval,
        timeout=config.timeout,
    )
    try:
        task = await service.acreate_task(new)
    except RuntimeError as exc:
        raise ProtocolError(INTERNAL_ERROR, f"Could not start the task: {exc}") from exc
    if not info.modern:
        from .legacy_tasks import legacy_task

        return {"task": legacy_task(task)}
    return {"resultType": "task", **task_fields(task)}


def task_id_of(params: dict[str, Any]) -> str:
    """``params.taskId`` when it can name a task; anything else is not found (``-32602``)."""
    task_id = params.get("taskId")
    if not is_lookup_key(task_id):
        raise ProtocolError(INVALID_PARAMS, NOT_FOUND)
    return str(task_id)


async def get_task(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    """The detailed task. A ``working`` task is answered at its next change, or after
    ``TASK_GET_HOLD`` seconds: the client hears of a result at once, not at its next poll."""
    require_tasks_capability(info)
    task_id, scope = task_id_of(params), info.principal.scope
    hold = float(get_config()["TASK_GET_HOLD"])
    if hold > 0:
        await sink.watch_task(task_id)  # before the read: no change after it is missed
    task = await _owned_task(task_id, scope)
    deadline = time.monotonic() + hold
    while task.status == "working" and (remaining := deadline - time.monotonic()) > 0:
        final = await sink.wait_for_task(task_id, remaining)
        # The change that ended it may carry what it left: no read back.
        task = (
            service.with_final_fields(task, final) if final else await _owned_task(task_id, scope)
        )
    if task.status == "input_required":
        return await db(detailed_task)(task)  # its questions: the ORM
    return detailed_task(task)


async def _owned_task(task_id: str, principal_scope: str) -> Task:
    try:
        return await service.aget_task(task_id, principal_scope)
    except service.TaskNotFound:
        raise ProtocolError(INVALID_PARAMS, NOT_FOUND) from None


async def update_task(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
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
        failed = await db(_record_answers)(task_id, info.principal.scope, answerable)
    except service.TaskNotFound:
        raise ProtocolError(INVALID_PARAMS, NOT_FOUND) from None
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


def _record_answers(task_id: str, principal_scope: str, responses: dict[str, Any]) -> list[str]:
    """Answer the caller's task (``TaskNotFound`` if it is not theirs), each response in a
    transaction of its own; returns the fields that could not be recorded (sync: ORM)."""
    if not responses:
        service.get_task(task_id, principal_scope)  # nothing to record: is the task theirs?
    failed: list[str] = []
    for number, (key, response) in enumerate(responses.items()):
        try:
            service.answer(
                task_id,
                key,
                response,
                principal_scope=principal_scope,
                answered_by="client",
                not_found_raises=True,
            )
        except service.TaskNotFound:
            if number == 0:
                raise
            # It expired between two answers: the ones before it were recorded.
            failed.append(jsontext.describe("params.inputResponses", (key,)))
        except service.InvalidAnswer as exc:
            # Per the extension, unusable responses are ignored; the question stays open.
            logger.info("ignored an invalid answer to %s of task %s: %s", key, task_id, exc)
        except Exception:
            logger.exception("could not record the answer to %s of task %s", key, task_id)
            failed.append(jsontext.describe("params.inputResponses", (key,)))
    return failed


async def cancel_task(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    require_tasks_capability(info)
    try:
        await db(service.cancel)(task_id_of(params), info.principal.scope)
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
    """The subset of ``task_ids`` the caller may watch (``-32602`` past
    :data:`MAX_WATCHED_TASKS`)."""
    if len(task_ids) > MAX_WATCHED_TASKS:
        raise ProtocolError(
            INVALID_PARAMS, f"params.notifications.taskIds: at most {MAX_WATCHED_TASKS} tasks"
        )
    wanted = [task_id for task_id in task_ids if is_lookup_key(task_id)]
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

"""The MCP methods of both eras: one coroutine per method, params in, result dict out,
:class:`~mcp_tasks.exceptions.ProtocolError` for JSON-RPC errors. :mod:`.dispatch` adds
the era's extras; :mod:`.methods` builds the tables and binds the task engine."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Literal, Protocol, TypeVar

import mcp_types as types
from pydantic import BaseModel, ValidationError

from ..auth import Principal
from ..auth.permissions import Access, allowed, missing_scopes, visible
from ..authoring.context import LOG_LEVELS
from ..authoring.registry import MCPServer, PromptSpec, ResourceSpec, ToolSpec
from ..authoring.tool_call import (
    describe_validation_error,
    error_result,
    invoke,
    run_tool,
    validate_arguments,
)
from ..conf import get_config
from ..core.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    RESOURCE_NOT_FOUND,
    wire_dict,
)
from ..exceptions import InputRequired, ProtocolError
from .companion_tools import CompanionTools
from .constants import LEGACY_TASKS_VERSION, LEGACY_VERSIONS, MODERN_VERSIONS, TASKS_EXTENSION
from .envelope import check_param_headers
from .request import RequestInfo, Sink
from .request_backend import RequestBackend
from .stored import require_storable
from .task_handles import TaskHandles, inline_window, speaks_tasks
from .task_methods import TaskMethods, ToolCall

logger = logging.getLogger("mcp_tasks.protocol")

Handler = Callable[[MCPServer, RequestInfo, Sink, dict[str, Any]], Awaitable[dict[str, Any]]]


def server_info() -> dict[str, Any]:
    config = get_config()
    return {"name": config.SERVER_NAME, "version": config.SERVER_VERSION}


def server_capabilities(info: RequestInfo, *, tasks: bool) -> dict[str, Any]:
    """What the server offers; ``tasks``: whether a task engine is configured."""
    capabilities: dict[str, Any] = {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "completions": {},
        "logging": {},
    }
    if tasks:
        if info.modern:
            capabilities["extensions"] = {TASKS_EXTENSION: {}}
        elif info.protocol_version == LEGACY_TASKS_VERSION:
            capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return capabilities


def _params_str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise ProtocolError(INVALID_PARAMS, f"params.{key} must be a non-empty string")
    return value


def _params_dict(params: dict[str, Any], key: str) -> dict[str, Any]:
    value = params.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(INVALID_PARAMS, f"params.{key} must be an object")
    return value


class _Guarded(Protocol):
    access: Access


G = TypeVar("G", bound=_Guarded)


async def _named(
    registry: Mapping[str, G], kind: str, info: RequestInfo, params: dict[str, Any]
) -> tuple[str, dict[str, Any], G]:
    """``params.name``, ``params.arguments`` and the tool or prompt so named. One the caller
    may not use answers exactly like one that does not exist."""
    name = _params_str(params, "name")
    arguments = _params_dict(params, "arguments")
    entry = registry.get(name)
    if entry is None or not await allowed(entry.access, info.principal):
        raise ProtocolError(INVALID_PARAMS, f"Unknown {kind}: {name}", {"name": name})
    return name, arguments, entry


def _no_cursor(params: dict[str, Any]) -> None:
    # Everything fits in one page; a cursor can only be one we never issued.
    if params.get("cursor") is not None:
        raise ProtocolError(INVALID_PARAMS, "Invalid cursor")


async def server_discover(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any], *, tasks: bool
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": server_capabilities(info, tasks=tasks),
    }
    if instructions := get_config().INSTRUCTIONS:
        result["instructions"] = instructions
    return result


async def initialize(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any], *, tasks: bool
) -> dict[str, Any]:
    # The session stores what the client tells about itself.
    require_storable(params.get("clientInfo"), "params.clientInfo")
    require_storable(params.get("capabilities"), "params.capabilities")
    requested = params.get("protocolVersion")
    version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": server_capabilities(replace(info, protocol_version=version), tasks=tasks),
        "serverInfo": server_info(),
    }
    if instructions := get_config().INSTRUCTIONS:
        result["instructions"] = instructions
    return result


async def ping(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    return {}


async def set_log_level(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    level = params.get("level")
    if level not in LOG_LEVELS:
        raise ProtocolError(INVALID_PARAMS, f"params.level must be one of {', '.join(LOG_LEVELS)}")
    if info.session is not None:
        await info.session.set_log_level(level)
    return {}


async def list_tools(
    server: MCPServer,
    info: RequestInfo,
    sink: Sink,
    params: dict[str, Any],
    *,
    tasks: bool,
    companions: CompanionTools | None = None,
) -> dict[str, Any]:
    _no_cursor(params)
    tools = await visible(list(server.tools.values()), info.principal)
    if companions is not None and not speaks_tasks(info):
        return {"tools": plain_client_tools(tools, companions, info)}
    task_support = info.protocol_version == LEGACY_TASKS_VERSION and tasks
    return {"tools": [tool.definition(task_support=task_support) for tool in tools]}


def plain_client_tools(
    tools: list[ToolSpec], companions: CompanionTools, info: RequestInfo
) -> list[dict[str, Any]]:
    """The tools for a client without the tasks extension: a tool that may answer with a
    handle has no ``outputSchema`` (clients check results against it), a description that
    says what to do with a handle and, in 2025-11-25 sessions, ``taskSupport: optional``
    (clients refuse plain calls of ``required`` ones); then the companion tools."""
    names = get_config().COMPANION_TOOLS
    legacy_tasks = info.protocol_version == LEGACY_TASKS_VERSION
    listed = []
    for tool in tools:
        handled = TaskHandles.handled(tool)
        definition = tool.definition(task_support=legacy_tasks and not handled)
        if handled:
            definition.pop("outputSchema", None)
            note = (
                f"Runs in the background: if it has not finished within {inline_window(tool):g} seconds, "
                f"its result says so and gives a task_id; then call `{names.check}` with that "
                "task_id for the result."
            )
            description = definition.get("description")
            definition["description"] = f"{description}\n\n{note}" if description else note
        if legacy_tasks and handled:
            definition["execution"] = {"taskSupport": "optional"}
        listed.append(definition)
    if any(TaskHandles.handled(tool) for tool in tools):
        listed += companions.definitions()
    return listed


async def call_tool(
    server: MCPServer,
    info: RequestInfo,
    sink: Sink,
    params: dict[str, Any],
    *,
    tasks: TaskMethods | None,
    companions: CompanionTools | None = None,
) -> dict[str, Any]:
    """A plain call, or (``tasks``: an engine exists) a task's start; for a client without the
    tasks extension (``companions``), a task followed for a window, or a companion tool."""
    plain = companions is not None and not speaks_tasks(info)
    if companions is not None and plain:
        role = companions.role_of(str(params.get("name")))
        if (
            role is not None
            and params.get("name") not in server.tools
            and any(TaskHandles.handled(tool) for tool in server.tools.values())
        ):
            return await companions.call(role, server, info, sink, params)
    name, arguments, tool = await _named(server.tools, "tool", info, params)
    if info.modern:
        check_param_headers(tool.input_schema, arguments, info.headers)
    try:
        validated = validate_arguments(tool, arguments)
    except ValueError as exc:
        return error_result(str(exc))

    handles = plain and TaskHandles.handled(tool)
    how = _how_it_runs(tool, info, params, tasks=tasks is not None, handles=handles)
    if how == "task":
        assert tasks is not None
        return await tasks.start(ToolCall(tool, validated, info, sink, params))
    if how == "handle":
        assert companions is not None
        return await companions.handles.call(ToolCall(tool, validated, info, sink, params))

    backend = RequestBackend(info, sink, params, "tools/call", name, arguments)
    try:
        return await run_tool(tool, validated, backend.context())
    except InputRequired as exc:
        return backend.input_required(exc)


def _how_it_runs(
    tool: ToolSpec, info: RequestInfo, params: dict[str, Any], *, tasks: bool, handles: bool
) -> Literal["task", "handle", "inline"]:
    """``task`` when the client asked for one (modern: the tasks extension declared; 2025-11-25:
    ``params.task``), ``handle`` for a task tool of a client without the extension
    (:mod:`.task_handles`), else ``inline``, where a task-only tool is refused."""
    mode = tool.task.mode
    wanted = False
    if tasks and info.modern:
        wanted = info.declares_extension(TASKS_EXTENSION)
    elif tasks and info.protocol_version == LEGACY_TASKS_VERSION:
        wanted = isinstance(params.get("task"), dict)
        if wanted and mode == "forbidden":
            raise ProtocolError(
                METHOD_NOT_FOUND, f"Tool {tool.name!r} does not support task-augmented calls"
            )
    if mode == "forbidden":
        return "inline"
    if wanted:
        return "task"
    if handles:
        return "handle"
    if mode == "required":
        if info.modern:
            raise ProtocolError(
                MISSING_CLIENT_CAPABILITY,
                f"Tool {tool.name!r} runs only as a background task; declare the {TASKS_EXTENSION} extension",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        raise ProtocolError(
            METHOD_NOT_FOUND,
            f"Tool {tool.name!r} requires task-augmented invocation (params.task, protocol "
            f"{LEGACY_TASKS_VERSION}, or the {TASKS_EXTENSION} extension of {MODERN_VERSIONS[0]})",
        )
    return "inline"


def _listing(key: str, registry: Callable[[MCPServer], Mapping[str, Any]]) -> Handler:
    """A ``*/list`` handler: the entries of ``registry`` the caller may use, under ``key``
    (one page: the lists are small, and a cursor is refused)."""

    async def handler(
        server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        _no_cursor(params)
        entries = await visible(list(registry(server).values()), info.principal)
        return {key: [entry.definition() for entry in entries]}

    return handler


list_prompts = _listing("prompts", lambda server: server.prompts)


def _prompt_messages(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list | tuple) else [value]
    messages = []
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, BaseModel):
            messages.append(wire_dict(item))
        elif isinstance(item, dict):
            messages.append(wire_dict(types.PromptMessage.model_validate(item)))
        else:
            raise TypeError(
                f"a prompt returned {type(item).__name__}; return str, PromptMessage or a list"
            )
    return messages


async def _render_prompt(
    prompt: PromptSpec, backend: RequestBackend, arguments: dict[str, Any]
) -> dict[str, Any]:
    try:
        validated = prompt.metadata.validate_arguments(arguments)
    except ValidationError as exc:
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid arguments for prompt {prompt.name}: {describe_validation_error(exc)}",
        ) from exc
    kwargs = dict(validated)
    if prompt.context_param:
        kwargs[prompt.context_param] = backend.context()
    try:
        value = await invoke(prompt.fn, prompt.is_async, kwargs)
        if isinstance(value, types.GetPromptResult):
            return wire_dict(value)
        result: dict[str, Any] = {"messages": _prompt_messages(value)}
    except (ProtocolError, InputRequired, asyncio.CancelledError):
        raise
    except Exception as exc:
        logger.exception("prompt %r raised", prompt.name)
        raise ProtocolError(INTERNAL_ERROR, f"Error rendering prompt {prompt.name}") from exc
    if prompt.description:
        result["description"] = prompt.description
    return result


async def get_prompt(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    name, arguments, prompt = await _named(server.prompts, "prompt", info, params)
    backend = RequestBackend(info, sink, params, "prompts/get", name, arguments)
    try:
        return await _render_prompt(prompt, backend, arguments)
    except InputRequired as exc:
        return backend.input_required(exc)


list_resources = _listing("resources", lambda server: server.resources)
list_resource_templates = _listing("resourceTemplates", lambda server: server.templates)


def _resource_contents(resource: ResourceSpec, uri: str, value: Any) -> list[dict[str, Any]]:
    if isinstance(value, types.ReadResourceResult):
        return [wire_dict(item) for item in value.contents]
    items = value if isinstance(value, list) else [value]
    contents = []
    for item in items:
        if isinstance(item, BaseModel):
            contents.append(wire_dict(item))
            continue
        entry: dict[str, Any] = {"uri": uri}
        if isinstance(item, bytes):
            entry["blob"] = base64.b64encode(item).decode()
            entry["mimeType"] = resource.mime_type or "application/octet-stream"
        else:
            entry["text"] = item if isinstance(item, str) else json.dumps(item, default=str)
            entry["mimeType"] = resource.mime_type or "text/plain"
        contents.append(entry)
    return contents


async def read_resource(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    uri = _params_str(params, "uri")
    found = server.find_resource(uri)
    if found is None or not await allowed(found[0].access, info.principal):
        code = INVALID_PARAMS if info.modern else RESOURCE_NOT_FOUND
        raise ProtocolError(code, "Resource not found", {"uri": uri})
    resource, variables = found
    backend = RequestBackend(info, sink, params, "resources/read", uri, {})
    kwargs: dict[str, Any] = dict(variables)
    if resource.context_param:
        kwargs[resource.context_param] = backend.context()
    try:
        value = await invoke(resource.fn, resource.is_async, kwargs)
    except InputRequired as exc:
        return backend.input_required(exc)
    except (ProtocolError, asyncio.CancelledError):
        raise
    except Exception as exc:
        logger.exception("resource %r raised", uri)
        raise ProtocolError(INTERNAL_ERROR, f"Error reading resource {uri}") from exc
    return {"contents": _resource_contents(resource, uri, value)}


async def resource_subscription(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any], *, subscribe: bool
) -> dict[str, Any]:
    """``resources/subscribe`` (``subscribe``) and ``resources/unsubscribe`` (legacy era)."""
    uri = _params_str(params, "uri")
    if subscribe:
        require_storable(uri, "params.uri")  # the session keeps its subscriptions
    if info.session is not None:
        change = info.session.subscribe if subscribe else info.session.unsubscribe
        await change(uri)
    return {}


async def complete(
    server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
) -> dict[str, Any]:
    ref = _params_dict(params, "ref")
    argument = _params_dict(params, "argument")
    ref_type = ref.get("type")
    key = ref.get("name") if ref_type == "ref/prompt" else ref.get("uri")
    if ref_type not in ("ref/prompt", "ref/resource") or not isinstance(key, str):
        raise ProtocolError(
            INVALID_PARAMS,
            "params.ref must be a ref/prompt with a name or a ref/resource with a uri",
        )
    if ref_type == "ref/prompt" and (
        key not in server.prompts or not await allowed(server.prompts[key].access, info.principal)
    ):
        raise ProtocolError(INVALID_PARAMS, f"Unknown prompt: {key}")
    if not isinstance(argument.get("name"), str):
        raise ProtocolError(INVALID_PARAMS, "params.argument.name must be a string")
    context_arguments = _params_dict(params, "context").get("arguments") or {}
    if not isinstance(context_arguments, dict):
        raise ProtocolError(INVALID_PARAMS, "params.context.arguments must be an object")
    function = server.completions.get((ref_type, key))
    template = server.templates.get(key) if ref_type == "ref/resource" else None
    if template is not None and not await allowed(template.access, info.principal):
        function = None  # a hidden template completes nothing
    values: list[str] = []
    if function is not None:
        found = await invoke(
            function,
            asyncio.iscoroutinefunction(function),
            {
                "argument_name": argument["name"],
                "value": str(argument.get("value", "")),
                "context_arguments": context_arguments,
            },
        )
        values = [str(value) for value in (found or [])]
    return {
        "completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}
    }


async def scope_challenge(
    server: MCPServer, message: dict[str, Any], principal: Principal
) -> list[str]:
    """The scopes a bearer token lacks for the item this request targets, when that is all
    it lacks (the transport answers HTTP 403 ``insufficient_scope``); else empty."""
    token = principal.access_token
    params = message.get("params")
    if token is None or not isinstance(params, dict):
        return []
    method, key = message.get("method"), params.get("uri") or params.get("name")
    item: ToolSpec | PromptSpec | ResourceSpec | None = None
    if method == "tools/call" and isinstance(key, str):
        item = server.tools.get(key)
    elif method == "prompts/get" and isinstance(key, str):
        item = server.prompts.get(key)
    elif method == "resources/read" and isinstance(key, str):
        found = server.find_resource(key)
        item = found[0] if found else None
    if item is None or not item.access.scopes:
        return []
    missing = missing_scopes(item.access, token, principal.user)
    if missing and item.access.permissions:
        rest = replace(item.access, scopes=())
        if not await allowed(rest, principal):
            return []  # more scopes would not help
    return missing

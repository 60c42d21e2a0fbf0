"""Calling registered functions and turning tool returns into ``CallToolResult`` dicts, for
plain calls and background tasks."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from pydantic import ValidationError

from ..core.jsonrpc import wire_dict
from ..exceptions import ClientCapabilityError, ProtocolError, ToolError
from .context import Context
from .registry import ToolSpec
from .retries import RetryTask

logger = logging.getLogger("mcp_tasks.runner")


def _run_sync(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    close_old_connections()
    try:
        return fn(**kwargs)
    finally:
        close_old_connections()


async def invoke(fn: Callable[..., Any], is_async: bool, kwargs: dict[str, Any]) -> Any:
    """Call a registered function; sync functions run in a worker thread (ORM allowed)."""
    if is_async:
        return await fn(**kwargs)
    return await sync_to_async(functools.partial(_run_sync, fn, kwargs), thread_sensitive=False)()


def describe_validation_error(exc: ValidationError) -> str:
    """``field: problem`` for each invalid argument."""
    parts = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
        parts.append(f"{location}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)


def error_result(message: str) -> dict[str, Any]:
    """A ``CallToolResult`` reporting a tool failure to the model."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


def validate_arguments(tool: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """Validated keyword arguments, or raise ``ValueError`` with an ``isError``-ready text."""
    if tool.raw_input_schema is not None:
        from jsonschema.validators import validator_for  # type: ignore[import-untyped]

        schema = tool.raw_input_schema
        errors = sorted(
            validator_for(schema)(schema).iter_errors(arguments), key=lambda e: list(e.path)
        )
        if errors:
            problems = "; ".join(
                f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors
            )
            raise ValueError(f"Invalid arguments for tool {tool.name}: {problems}")
        return dict(arguments)
    try:
        return tool.metadata.validate_arguments(arguments)
    except ValidationError as exc:
        raise ValueError(
            f"Invalid arguments for tool {tool.name}: {describe_validation_error(exc)}"
        ) from exc


def failure_result(tool: ToolSpec, error: Exception) -> dict[str, Any]:
    """The ``isError`` result of a tool that raised ``error``: its message for a
    ``ToolError``, a missing client capability or a ``RetryTask``; for anything else the
    traceback is logged and the client learns no details."""
    if isinstance(error, ToolError | ClientCapabilityError | RetryTask):
        return error_result(str(error))
    logger.error("tool %r raised", tool.name, exc_info=error)
    return error_result(f"Error executing tool {tool.name}: an internal error occurred")


async def run_tool(
    tool: ToolSpec,
    validated: dict[str, Any],
    context: Context,
    *,
    transient: Callable[[Exception], bool] | None = None,
) -> dict[str, Any]:
    """Run ``tool`` and convert its return value; failures become ``isError`` results
    except those ``transient`` picks, ``InputRequired``, ``ProtocolError`` and cancellation."""
    if tool.approval is not None and not context.is_background_task:
        # Never run unapproved (check mcp_tasks.E018 reports the set-up that allows it).
        return error_result(
            f"Tool {tool.name!r} needs a staff approval and runs only as a background task: "
            "call it from a client that supports tasks (the io.modelcontextprotocol/tasks "
            "extension, or params.task on 2025-11-25)"
        )
    kwargs = dict(validated)
    if tool.context_param:
        kwargs[tool.context_param] = context
    try:
        value = await invoke(tool.fn, tool.is_async, kwargs)
        converted = tool.metadata.convert_result(value)
    except ProtocolError:
        raise
    except Exception as exc:
        if transient is not None and transient(exc):
            raise
        return failure_result(tool, exc)
    result = wire_dict(converted)
    result.pop("resultType", None)  # era-specific: the modern dispatcher adds it back
    return result

"""Tools for the 2025-11-25 task tests (``tests/legacy/``).

Each runs as a background task (its ``TaskConfig`` says how) and shows one part of the
task context to the client: its identity, progress, logs at every level, every kind of
question, both kinds of failure, a cancellable wait and a gate the test opens.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import mcp_types as types
from pydantic import BaseModel, Field, TypeAdapter

from mcp_tasks import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    ProtocolError,
    TaskConfig,
    ToolError,
    mcp,
)
from mcp_tasks.authoring.context import LOG_LEVELS

from .tools import RESPONSE_TYPES, ElicitKind

#: The code of ``lt_protocol_error``'s JSON-RPC error (a server-defined one).
PROTOCOL_ERROR_CODE = -32042


class TaskIdentity(BaseModel):
    """What the task context says about where the task came from."""

    task_id: str | None
    session_id: str | None
    origin_request_id: str | int | None
    request_id: str | int | None
    is_background_task: bool
    request_context_is_none: bool
    protocol_version: str | None
    client_name: str | None
    subject: str | None = None
    client_id: str | None = None


@mcp.tool(task=True)
async def lt_identity(ctx: Context) -> TaskIdentity:
    """The task's identity: task id, creating session, origin request, access token."""
    token = ctx.get_access_token()
    return TaskIdentity(
        task_id=ctx.task_id,
        session_id=ctx.session_id,
        origin_request_id=ctx.origin_request_id,
        request_id=ctx.request_id,
        is_background_task=ctx.is_background_task,
        request_context_is_none=ctx.request_context is None,
        protocol_version=ctx.protocol_version,
        client_name=ctx.client_info.get("name"),
        subject=token.subject if token is not None else None,
        client_id=token.client_id if token is not None else None,
    )


@mcp.tool(task=True)
async def lt_quick(value: str) -> str:
    """Returns at once: ``quick <value>``."""
    return f"quick {value}"


@mcp.tool(task=TaskConfig(mode="required"))
async def lt_required(value: str = "x") -> str:
    """Runs only as a task."""
    return f"required {value}"


@mcp.tool(task=TaskConfig(mode="forbidden"))
async def lt_forbidden(value: str = "x") -> str:
    """Never runs as a task."""
    return f"forbidden {value}"


@mcp.tool(task=TaskConfig(mode="optional", poll_interval=0.25, ttl=600))
async def lt_optional(value: str = "x") -> str:
    """May run as a task (with its own poll interval and time to live)."""
    return f"optional {value}"


@mcp.tool(task=True)
async def lt_progress(
    steps: Annotated[int, Field(ge=1, le=20)],
    ctx: Context,
    pause: Annotated[float, Field(ge=0, le=2)] = 0.0,
) -> str:
    """Reports progress ``steps`` times (``pause`` seconds after each), then returns."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
        await asyncio.sleep(pause)
    return f"progressed {steps} steps"


@mcp.tool(task=True)
async def lt_log_every_level(ctx: Context) -> str:
    """Logs one message at each of the eight levels (logger ``lt``)."""
    for level in LOG_LEVELS:
        await ctx.log(level, f"task {level} message", logger_name="lt")
    return "logged every level"


@mcp.tool(task=True)
async def lt_tool_error(reason: str) -> str:
    """Ends with a tool error (``isError``): a ``failed`` task in 2025-11-25."""
    raise ToolError(f"lt_tool_error: {reason}")


@mcp.tool(task=True)
async def lt_protocol_error() -> str:
    """Ends with a JSON-RPC error: a ``failed`` task whose result is that error."""
    raise ProtocolError(PROTOCOL_ERROR_CODE, "lt_protocol_error: simulated", {"why": "on purpose"})


class Outcome(BaseModel):
    action: str
    data: Any = None
    type_name: str | None = None


@mcp.tool(task=True)
async def lt_elicit(kind: ElicitKind, ctx: Context) -> Outcome:
    """Asks once for a value of one response type and reports what came back."""
    result = await ctx.elicit(f"Task asks for a {kind}", RESPONSE_TYPES[kind])
    match result:
        case AcceptedElicitation(data=data):
            return Outcome(
                action="accept",
                data=TypeAdapter(Any).dump_python(data, mode="json"),
                type_name=type(data).__name__,
            )
        case DeclinedElicitation():
            return Outcome(action="decline")
        case CancelledElicitation():
            return Outcome(action="cancel")
    raise AssertionError(f"unexpected elicitation result {result!r}")


@mcp.tool(task=True)
async def lt_sample(question: str, ctx: Context) -> str:
    """Asks the client's model (``sampling/createMessage``) and returns its answer."""
    result = await ctx.sample(question, max_tokens=32)
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else f"<{content.type}>"
    return f"{result.model} said: {text}"


@mcp.tool(task=True)
async def lt_wait(marker_dir: str, ctx: Context, seconds: float = 120.0) -> str:
    """Writes ``started`` in ``marker_dir`` and waits (to be cancelled: writes ``cancelled``);
    a ``go`` file in ``marker_dir`` ends the wait early."""
    directory = Path(marker_dir)
    (directory / "started").write_text(ctx.task_id or "")
    try:
        for _ in range(int(seconds * 20)):
            if (directory / "go").exists():
                return "released"
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        (directory / "cancelled").write_text(ctx.task_id or "")
        raise
    (directory / "finished").write_text(ctx.task_id or "")
    return "waited to the end"

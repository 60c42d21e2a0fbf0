"""Background-task tools for ``tests/questions/test_context_background_task.py`` (the FastMCP
seed suite, ported) and ``tests/questions/test_background_input.py``.

Every tool here runs only as a background task (``task="required"``), so a test that gets a
result from one knows it came from an rq worker. Tools that must tell the test something the
result cannot carry write it into a marker directory the test passes in.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel

from mcp_tasks import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    ToolError,
    mcp,
)

TASK_ONLY: Literal["required"] = "required"
#: Longest a tool waits for a gate file the test creates (a safety net).
MAX_GATE_WAIT = 60.0


def _append(marker_dir: str | None, name: str, line: str) -> list[str]:
    """Append ``line`` to ``marker_dir/name`` and return all its lines (nothing without a dir)."""
    if not marker_dir:
        return []
    path = Path(marker_dir) / name
    with path.open("a") as handle:
        handle.write(line + "\n")
    return path.read_text().splitlines()


# -- the server lifespan (``MCP_TASKS["LIFESPAN"]`` of the seed-suite servers) -----------------

SEED_LIFESPAN_VALUE = {"db": "mock-db-connection", "cache": "mock-cache"}


@contextlib.asynccontextmanager
async def seed_lifespan(server: Any) -> AsyncIterator[dict[str, str]]:
    yield dict(SEED_LIFESPAN_VALUE)


# -- the Context as a worker restores it ------------------------------------------------------


class Wiring(BaseModel):
    task_id: str | None
    session_id: str | None
    is_background_task: bool
    request_context_is_none: bool
    recorded_session_id: str


@mcp.tool(task=TASK_ONLY)
async def seed_verify_wiring(ctx: Context) -> Wiring:
    """Report the task id, session id and background flag the worker gave the Context."""
    from mcp_tasks.models import Task

    recorded = await Task.objects.filter(pk=ctx.task_id).values_list("session_id", flat=True).aget()
    return Wiring(
        task_id=ctx.task_id,
        session_id=ctx.session_id,
        is_background_task=ctx.is_background_task,
        request_context_is_none=ctx.request_context is None,
        recorded_session_id=recorded,
    )


class OriginCheck(BaseModel):
    origin_request_id: str | int | None
    stored_origin_request_id: str | int | None
    is_background_task: bool
    request_context_is_none: bool


@mcp.tool(task=TASK_ONLY)
async def seed_check_origin_request_id(ctx: Context) -> OriginCheck:
    """``ctx.origin_request_id`` next to the value stored with the task when it was created."""
    from mcp_tasks.models import Task

    stored = (
        await Task.objects.filter(pk=ctx.task_id).values_list("origin_request_id", flat=True).aget()
    )
    return OriginCheck(
        origin_request_id=ctx.origin_request_id,
        stored_origin_request_id=stored,
        is_background_task=ctx.is_background_task,
        request_context_is_none=ctx.request_context is None,
    )


class SessionProbe(BaseModel):
    available: bool
    session_id_attribute: str | None = None  # ``ctx.session.id``, as in a plain legacy call
    error: str | None = None


@mcp.tool(task=TASK_ONLY)
async def seed_session_probe(ctx: Context) -> SessionProbe:
    """What ``ctx.session`` gives in the worker."""
    try:
        session = ctx.session
    except RuntimeError as exc:
        return SessionProbe(available=False, error=str(exc))
    return SessionProbe(available=True, session_id_attribute=getattr(session, "id", None))


@mcp.tool(task=TASK_ONLY)
async def seed_progress_tool(ctx: Context) -> str:
    """Report progress three times, then finish."""
    await ctx.report_progress(0, 100, "Starting...")
    await ctx.report_progress(50, 100, "Half done")
    await ctx.report_progress(100, 100, "Complete")
    return "done"


class ExtensionSupport(BaseModel):
    supports: dict[str, bool]
    is_background_task: bool
    request_context_is_none: bool


@mcp.tool(task=TASK_ONLY)
async def seed_client_extensions(extension_ids: list[str], ctx: Context) -> ExtensionSupport:
    """``ctx.client_supports_extension`` for each id, as seen in the worker."""
    return ExtensionSupport(
        supports={ext: ctx.client_supports_extension(ext) for ext in extension_ids},
        is_background_task=ctx.is_background_task,
        request_context_is_none=ctx.request_context is None,
    )


@mcp.tool(task=TASK_ONLY)
async def seed_log_messages(messages: list[tuple[str, str]], ctx: Context) -> str:
    """Log each ``(level, text)`` in order."""
    for level, text in messages:
        await ctx.log(level, text, logger_name="seed")
    return "logged"


class LifespanProbe(BaseModel):
    lifespan_context: Any
    request_context_is_none: bool


@mcp.tool(task=TASK_ONLY)
async def seed_lifespan_probe(ctx: Context) -> LifespanProbe:
    """What ``ctx.lifespan_context`` holds in the worker."""
    return LifespanProbe(
        lifespan_context=ctx.lifespan_context, request_context_is_none=ctx.request_context is None
    )


async def _wait_for_gate(gate: str | None) -> None:
    if not gate:
        return
    path = Path(gate)
    for _ in range(int(MAX_GATE_WAIT * 20)):
        if path.exists():
            return
        await asyncio.sleep(0.05)
    raise ToolError(f"the gate {gate} never opened")


@mcp.tool(task=TASK_ONLY)
async def seed_check_token(ctx: Context, gate: str | None = None) -> str:
    """``token|client_id`` of the access token the worker restored, or ``no-token``; with
    ``gate``, looks only once that file exists."""
    await _wait_for_gate(gate)
    token = ctx.get_access_token()
    if token is None:
        return "no-token"
    return f"{token.token}|{token.client_id}"


@mcp.tool(task=TASK_ONLY)
async def seed_simple_tool() -> str:
    return "done"


# -- asking the client from a worker ----------------------------------------------------------


@mcp.tool(task=TASK_ONLY)
async def seed_failfast_tool(marker_dir: str, ctx: Context) -> str:
    """Elicit; record what came back (``marker_dir/elicit_result``); finish with ``done``."""
    result = await ctx.elicit("This notification will fail", str)
    _append(marker_dir, "elicit_result", type(result).__name__)
    return "done"


@mcp.tool(task=TASK_ONLY)
async def seed_ask_client(ctx: Context) -> str:
    """Ask the client's LLM from the worker and return its text."""
    if (
        not ctx.is_background_task
        or ctx.request_context is not None
        or ctx.origin_request_id is None
    ):
        raise ToolError("not restored as a background task with its origin request id")
    result = await ctx.sample("Say hello")
    content = result.content
    return content.text if isinstance(content, types.TextContent) else f"<{content.type}>"


@mcp.tool(task=TASK_ONLY)
async def seed_ask_name(ctx: Context) -> str:
    result = await ctx.elicit("What is your name?", str)
    if isinstance(result, AcceptedElicitation):
        return f"Hello, {result.data}!"
    return "No name provided"


@mcp.tool(task=TASK_ONLY)
async def seed_optional_input(ctx: Context) -> str:
    result = await ctx.elicit("Want to provide a name?", str)
    if isinstance(result, DeclinedElicitation):
        return "User declined"
    if isinstance(result, AcceptedElicitation):
        return f"Got: {result.data}"
    return "Cancelled"


class UserInfo(BaseModel):
    name: str
    age: int


@mcp.tool(task=TASK_ONLY)
async def seed_get_user_info(ctx: Context) -> str:
    result = await ctx.elicit("Provide user info", UserInfo)
    if isinstance(result, AcceptedElicitation):
        assert isinstance(result.data, UserInfo)
        return f"{result.data.name} is {result.data.age}"
    return "No info"


# -- background input: hold window, resume, replay (tests/questions/test_background_input.py) ------


class AskOutcome(BaseModel):
    n: int
    action: str
    value: int | None = None
    pid_before: int
    pid_after: int
    runs_seen: int  # how many times the code before the question ran (marker lines)


@mcp.tool(task=TASK_ONLY)
async def bg_ask_number(n: int, ctx: Context, marker_dir: str | None = None) -> AskOutcome:
    """Ask for an integer for ``n``. Code before the question appends a line to
    ``marker_dir/before`` each time it runs (a resume runs it again)."""
    pid_before = os.getpid()
    runs = _append(marker_dir, "before", str(pid_before))
    result = await ctx.elicit(f"Value for task {n}?", int)
    value = result.data if isinstance(result, AcceptedElicitation) else None
    return AskOutcome(
        n=n,
        action=result.action,
        value=value,
        pid_before=pid_before,
        pid_after=os.getpid(),
        runs_seen=len(runs),
    )


class TwoAnswers(BaseModel):
    first: str | None
    second: str | None
    runs_seen: int


@mcp.tool(task=TASK_ONLY)
async def bg_two_questions(marker_dir: str, ctx: Context) -> TwoAnswers:
    """Two questions in a row; each run appends to ``marker_dir/before``."""
    runs = _append(marker_dir, "before", str(os.getpid()))
    first = await ctx.elicit("First name?", str)
    second = await ctx.elicit("Last name?", str)
    return TwoAnswers(
        first=first.data if isinstance(first, AcceptedElicitation) else None,
        second=second.data if isinstance(second, AcceptedElicitation) else None,
        runs_seen=len(runs),
    )


@mcp.tool(task=TASK_ONLY)
async def bg_changing_question(marker_dir: str, ctx: Context) -> str:
    """Asks a question that differs from run to run: a resume cannot replay it."""
    runs = _append(marker_dir, "before", str(os.getpid()))
    result = await ctx.elicit(f"Question from run {len(runs)}?", str)
    return f"got {result.action}"


@mcp.tool(task=TASK_ONLY)
async def bg_ask_or_cancel(ctx: Context) -> str:
    """Elicit; report whether the question was cancelled (timed out)."""
    result = await ctx.elicit("Will anyone answer?", str)
    if isinstance(result, CancelledElicitation):
        return "cancelled"
    return f"answered: {result.action}"


@mcp.tool(task=TASK_ONLY)
async def bg_sample_once(ctx: Context) -> str:
    """Sample once and return the text."""
    result = await ctx.sample("Anyone there?", max_tokens=16)
    content = result.content
    return content.text if isinstance(content, types.TextContent) else f"<{content.type}>"


@mcp.tool(task=TASK_ONLY)
async def bg_roots(ctx: Context) -> list[str]:
    """The client's roots, asked from the worker."""
    return [str(root.uri) for root in await ctx.list_roots()]

"""Background-task tools for the task tests and the task benchmark.

The tools talk to the tests through marker files in a directory the test passes as an
argument (``started`` holds the pid of the process running the tool; ``cancelled``,
``finished``… say how the run ended), and wait on a ``gate`` file the test creates, so
no test depends on timing. Also: a token verifier with short-lived tokens and a lifespan
for ``ctx.lifespan_context``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp_tasks import AcceptedElicitation, AccessToken, Context, TaskConfig, mcp

from .auth import verify as live_verify

#: Longest any tool here waits for its gate (a safety net: tests open gates).
MAX_WAIT = 120.0

SECRET_DETAIL = "task db password is hunter2"


def verify(token: str) -> AccessToken | None:
    """``short-<seconds>-<name>``: valid for that many seconds; else the live verifier's."""
    kind, _, rest = token.partition("-")
    if kind == "short":
        seconds, _, name = rest.partition("-")
        if name and seconds.isdigit():
            return AccessToken(
                token=token,
                client_id=f"client-{name}",
                scopes=["tools:call"],
                expires_at=int(time.time()) + int(seconds),
                claims={"sub": name},
            )
        return None
    return live_verify(token)


@contextlib.asynccontextmanager
async def probe_lifespan(server: Any) -> AsyncIterator[dict[str, Any]]:
    """``MCP_TASKS["LIFESPAN"]`` for tests: what ``ctx.lifespan_context`` shows."""
    yield {"db": "probe-db-handle", "entered_in": os.getpid()}


def _mark(directory: str, name: str, text: str = "") -> None:
    """Write a marker atomically: a reader never sees it created but still empty."""
    target = Path(directory) / name
    partial = target.with_name(f".{name}.{os.getpid()}.partial")
    partial.write_text(text or str(os.getpid()))
    os.replace(partial, target)


# -- trivial (benchmark, smoke) -----------------------------------------------------------


@mcp.tool(task=True)
async def trivial_task(n: int = 0) -> int:
    """Returns ``n`` at once: as a task with the tasks extension, inline without it."""
    return n


@mcp.tool(task=True)
async def bench_sleep(seconds: float = 0.5) -> float:
    """Sleeps ``seconds``; returns when it woke (``time.time()``). The flood of the fairness
    benchmark (``tests/benchmarks/peers/`` has the same tool for the peer)."""
    await asyncio.sleep(seconds)
    return time.time()


@mcp.tool(task=True)
async def bench_ask(ctx: Context) -> str:
    """Asks one form question (a string) and returns the answer (the benchmark's question
    round trip; ``tests/benchmarks/peers/`` has the same tool for the peer)."""
    answer = await ctx.elicit("What is your name?", str)
    if isinstance(answer, AcceptedElicitation):
        return str(answer.data)
    return f"no answer ({answer.action})"


# -- what the tool sees ---------------------------------------------------------------------


@mcp.tool(task=True)
async def context_probe(ctx: Context) -> str:
    """Everything a background tool sees of its context, as a JSON text."""
    token = ctx.get_access_token()
    return json.dumps(
        {
            "is_background_task": ctx.is_background_task,
            "task_id": ctx.task_id,
            "session_id": ctx.session_id,
            "origin_request_id": ctx.origin_request_id,
            "request_id": ctx.request_id,
            "request_context_is_none": ctx.request_context is None,
            "lifespan_context": ctx.lifespan_context,
            "access_token": None
            if token is None
            else {"token": token.token, "client_id": token.client_id, "subject": token.subject},
            "supports_tasks": ctx.client_supports_extension("io.modelcontextprotocol/tasks"),
            "supports_probe_ext": ctx.client_supports_extension("com.example/probe"),
            "supports_unknown_ext": ctx.client_supports_extension("com.example/never-declared"),
            "protocol_version": ctx.protocol_version,
            "client_info": ctx.client_info,
            "headers": ctx.headers,
            "pid": os.getpid(),
        }
    )


@mcp.tool(task=True)
async def gated_task(
    marker_dir: str,
    ctx: Context,
    progress: float = 2,
    total: float = 5,
    message: str = "two of five",
) -> str:
    """Reports progress, logs, then waits for ``marker_dir/gate`` before finishing."""
    _mark(marker_dir, "started")
    await ctx.report_progress(progress, total, message)
    await ctx.debug("debug line", logger_name="gated")
    await ctx.info({"waiting": "for the gate"}, logger_name="gated")
    await ctx.warning("warning line", logger_name="gated")
    gate = Path(marker_dir) / "gate"
    deadline = time.monotonic() + MAX_WAIT
    try:
        while not gate.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        _mark(marker_dir, "cancelled")
        raise
    _mark(marker_dir, "finished")
    return f"gate opened after {message}"


@mcp.tool(task=True)
async def async_wait_task(marker_dir: str) -> str:
    """Waits (awaiting every 50 ms) until cancelled or ``gate``; records a CancelledError."""
    _mark(marker_dir, "started")
    gate = Path(marker_dir) / "gate"
    deadline = time.monotonic() + MAX_WAIT
    try:
        while not gate.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        _mark(marker_dir, "cancelled")
        raise
    _mark(marker_dir, "finished")
    return "finished without being cancelled"


@mcp.tool(task=TaskConfig(mode="optional", inline_window=30))
async def patient_task(marker_dir: str) -> str:
    """``async_wait_task`` whose call, from a client without tasks, waits up to 30 s."""
    return await async_wait_task(marker_dir)


@mcp.tool(task=TaskConfig(mode="optional", inline_window=0))
async def eager_handle_task(n: int = 0) -> int:
    """Answers a client without tasks with a handle at once, however quick it is."""
    return n


@mcp.tool(task=True)
def blocking_task(marker_dir: str) -> str:
    """A sync tool that blocks (no awaits) until ``gate``: only a forking worker can stop it."""
    _mark(marker_dir, "started")
    gate = Path(marker_dir) / "gate"
    deadline = time.monotonic() + MAX_WAIT
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    _mark(marker_dir, "finished")
    return "blocking task finished"


@mcp.tool(task=True)
async def stubborn_task(marker_dir: str) -> str:
    """Swallows its cancellation and returns a (late) result anyway."""
    _mark(marker_dir, "started")
    gate = Path(marker_dir) / "gate"
    deadline = time.monotonic() + MAX_WAIT
    try:
        while not gate.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        _mark(marker_dir, "swallowed")
    _mark(marker_dir, "returning")
    return "a late result"


# -- failures ---------------------------------------------------------------------------------


@mcp.tool(task=True)
async def raising_task() -> str:
    """Raises a plain exception whose details must not reach the client."""
    raise RuntimeError(SECRET_DETAIL)


@mcp.tool(task=TaskConfig(mode="optional", ttl=1.0, poll_interval=0.1))
async def short_lived_task() -> str:
    """A task kept for one second only."""
    return "short-lived"


# -- the concurrent worker ----------------------------------------------------------------------


@mcp.tool(task=True)
def cooperative_sync_task(marker_dir: str, ctx: Context) -> str:
    """A sync tool that looks at ``ctx.is_cancelled`` in its loop until ``gate``."""
    _mark(marker_dir, "started")
    gate = Path(marker_dir) / "gate"
    deadline = time.monotonic() + MAX_WAIT
    while not gate.exists() and time.monotonic() < deadline:
        try:
            ctx.raise_if_cancelled()
        except asyncio.CancelledError:
            _mark(marker_dir, "stopped")
            raise
        time.sleep(0.05)
    _mark(marker_dir, "finished")
    return "cooperative task finished"


@mcp.tool(task=TaskConfig(mode="optional", timeout=1))
async def overrunning_task(marker_dir: str) -> str:
    """Outlives its one-second job timeout unless ``gate`` opens first."""
    _mark(marker_dir, "started")
    gate = Path(marker_dir) / "gate"
    deadline = time.monotonic() + MAX_WAIT
    try:
        while not gate.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        _mark(marker_dir, "cancelled")
        raise
    _mark(marker_dir, "finished")
    return "finished in time"


# -- per-tool permissions (tests/signin/test_permissions_live.py) --------------------------------


@mcp.tool(task=True, permissions=["mcp_tasks.view_task"])
async def guarded_task() -> str:
    """Runs only for users holding ``mcp_tasks.view_task``."""
    return "guarded done"


@mcp.tool(task=True, permissions=["mcp_tasks.view_task"])
async def guarded_question(ctx: Context) -> str:
    """Asks one yes/no question, for users holding ``mcp_tasks.view_task``."""
    answer = await ctx.elicit("Go on?", bool)
    return f"answered: {answer.action}"

"""Tools for the tests of fair share, concurrency limits and retries (``tests/limits/``).

Like ``task_tools``, they talk to the tests through marker files in a directory the test
passes: ``started-<label>`` (the pid of the process running the tool), one line per start
in ``order``, and they wait on ``gate-<label>``, so no test depends on timing.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from mcp_tasks import AcceptedElicitation, Context, Retry, RetryTask, TaskConfig, mcp

from .task_tools import MAX_WAIT, _mark


async def _take_turn(marker_dir: str, label: str) -> str:
    """Note the start, then wait for ``gate-<label>``."""
    with open(Path(marker_dir) / "order", "a") as order:  # one short append: atomic
        order.write(f"{label}\n")
    _mark(marker_dir, f"started-{label}")
    gate = Path(marker_dir) / f"gate-{label}"
    deadline = time.monotonic() + MAX_WAIT
    while not gate.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return label


@mcp.tool(task=True)
async def turn_task(marker_dir: str, label: str) -> str:
    """Notes when it starts, then waits for its gate."""
    return await _take_turn(marker_dir, label)


@mcp.tool(task=TaskConfig(concurrency=1, concurrency_key="customer"))
async def limited_task(marker_dir: str, label: str, customer: str) -> str:
    """One at a time per customer, across all workers."""
    return await _take_turn(marker_dir, label)


def _attempt(marker_dir: str) -> int:
    """Count this run in ``marker_dir/attempts``; the number of this attempt."""
    with open(Path(marker_dir) / "attempts", "a") as attempts:
        attempts.write(f"{os.getpid()}\n")
    return len((Path(marker_dir) / "attempts").read_text().splitlines())


@mcp.tool(task=TaskConfig(retries=Retry(attempts=3, delay=1.0, backoff=2.0, on=(ConnectionError,))))
async def flaky_task(marker_dir: str, failures: int, ctx: Context) -> str:
    """Asks once, then fails with ConnectionError ``failures`` times before it succeeds."""
    answer = await ctx.elicit("Go ahead?", bool)
    attempt = _attempt(marker_dir)
    if attempt <= failures:
        raise ConnectionError(f"upstream down (attempt {attempt})")
    agreed = answer.data if isinstance(answer, AcceptedElicitation) else None
    return f"done after {attempt} attempts, answer {agreed}"


@mcp.tool(task=True)
async def not_ready_task(marker_dir: str) -> str:
    """Asks for another attempt once (``RetryTask``), then succeeds."""
    attempt = _attempt(marker_dir)
    if attempt == 1:
        raise RetryTask("the report is not ready yet", delay=0.2)
    return f"ready on attempt {attempt}"

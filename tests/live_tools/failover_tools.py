"""The tool the failover tests run under load while Redis or PostgreSQL fail over
(``tests/resilience/test_redis_failover.py``, ``test_postgres_restart.py``).

Each run leaves a file of its own in ``marker_dir`` as it starts (``start-<key>-…``) and
another as it reaches its end (``done-<key>-…``), so a test counts how many times each task
ran and ran to completion: a task without a question runs once (one that asks runs again
from the start when it resumes).
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

from mcp_tasks import AcceptedElicitation, Context, mcp


@mcp.tool(task=True)
async def failover_task(
    marker_dir: str,
    key: str,
    ctx: Context,
    seconds: float = 0.0,
    ask: bool = False,
    progress: bool = False,
) -> str:
    """Reports progress (``progress``), sleeps ``seconds``, asks one question (``ask``),
    then marks that it ran to completion and returns ``key`` with the answer."""
    _mark(marker_dir, "start", key)
    if progress:
        await ctx.report_progress(1, 2, "half way")
    if seconds:
        await asyncio.sleep(seconds)
    answer = ""
    if ask:
        reply = await ctx.elicit("Go on?", str)
        answer = str(reply.data) if isinstance(reply, AcceptedElicitation) else reply.action
    _mark(marker_dir, "done", key, answer)
    return f"{key}:{answer}"


def _mark(directory: str, what: str, key: str, text: str = "") -> None:
    (Path(directory) / f"{what}-{key}-{os.getpid()}-{secrets.token_hex(4)}").write_text(text)

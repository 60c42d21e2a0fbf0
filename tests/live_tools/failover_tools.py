"""The tool the failover tests run under load while Redis or PostgreSQL fail over
(``tests/resilience/test_redis_failover.py``, ``test_postgres_restart.py``).

Each run that reaches its end leaves a file of its own in ``marker_dir`` (``done-<key>-…``),
so a test counts how many times each task ran to completion: once, never twice.
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
    if progress:
        await ctx.report_progress(1, 2, "half way")
    if seconds:
        await asyncio.sleep(seconds)
    answer = ""
    if ask:
        reply = await ctx.elicit("Go on?", str)
        answer = str(reply.data) if isinstance(reply, AcceptedElicitation) else reply.action
    name = f"done-{key}-{os.getpid()}-{secrets.token_hex(4)}"
    (Path(marker_dir) / name).write_text(answer)
    return f"{key}:{answer}"

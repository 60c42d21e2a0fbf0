"""The server lifespan: entered once per process, its value shown as ``ctx.lifespan_context``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ..conf import get_config, imported
from .registry import mcp

_entered: dict[Any, Any] = {}
_stack = contextlib.AsyncExitStack()
_lock = asyncio.Lock()


async def lifespan_context() -> Any:
    """Enter ``MCP_TASKS["LIFESPAN"]`` on first use and return its value (``{}`` if unset)."""
    path = get_config().LIFESPAN
    if not path:
        return {}
    if path in _entered:
        return _entered[path]
    async with _lock:
        if path not in _entered:
            factory = imported(path)
            _entered[path] = await _stack.enter_async_context(factory(mcp))
    return _entered[path]

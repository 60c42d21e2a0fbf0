"""Shared by the client scripts: arguments, JSON output, waiting for marker files.

The scripts run in the client virtualenvs (``.venv-mcp1``, ``.venv-fastmcp3``), so this
module uses the standard library only. A script is run as::

    python <script> <scenario> <url> '<json options>'

and prints one JSON document on its last line of standard output.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

# The experimental task APIs warn on every call; the tests read stdout only, keep stderr clean.
warnings.simplefilter("ignore")

#: Longest a script waits for something the server does (a safety net, never a measurement).
WAIT = 60.0


def arguments() -> tuple[str, str, dict[str, Any]]:
    scenario, url = sys.argv[1], sys.argv[2]
    options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    return scenario, url, options


def emit(value: Any) -> None:
    """Print the script's result: one JSON document on the last line."""
    sys.stdout.write(json.dumps(value, default=str) + "\n")
    sys.stdout.flush()


def jsonable(value: Any) -> Any:
    """A pydantic model (or anything holding them) as plain JSON data, wire names kept."""
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return value


def error_of(exc: BaseException) -> dict[str, Any]:
    """An ``McpError``'s JSON-RPC error (code, message, data), or the exception's text."""
    error = getattr(exc, "error", None)
    if error is not None and hasattr(error, "code"):
        return {"code": error.code, "message": error.message, "data": jsonable(error.data)}
    return {"code": None, "message": f"{type(exc).__name__}: {exc}", "data": None}


async def wait_for_path(path: Path, timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        await asyncio.sleep(0.05)
    return path.exists()


async def wait_until(predicate: Any, timeout: float = WAIT) -> bool:
    """Until ``predicate()`` is true (False when it never is within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return bool(predicate())

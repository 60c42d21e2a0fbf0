"""Call MCP tools from Python: in tests, in-process like Django's test client, or against a
live server; plainly or as background tasks, with their questions answered::

    from mcp_tasks.testing import McpClient

    with McpClient.in_process() as client:  # or McpClient("https://example.com/mcp")
        assert client.call("add", {"a": 1, "b": 2})["structuredContent"] == {"result": 3}
        run = client.start("long_report", {"quarter": "Q3"})
        run.wait(answer={"Include draft figures?": True})
        assert run.text == "Report for Q3: 3 sections with drafts."

It speaks the 2026-07-28 era: stateless, the ``_meta`` envelope on every request, the tasks
extension (``io.modelcontextprotocol/tasks``) for :meth:`McpClient.start`. Needs httpx
(``pip install "django-mcp-tasks[testing]"``).

Under pytest, the plugin :mod:`mcp_tasks.testing.plugin` (loaded by pytest itself) gives
the fixtures ``mcp_client`` and ``mcp_tasks_worker``; elsewhere (a ``TransactionTestCase``),
``with task_worker():`` runs the embedded task worker around a test. ``approve(run, user)``
and ``reject(run, user, reason)`` decide a task's approval as an operator does in the admin.

Importable before Django is set up (pytest loads the plugin first)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .client import McpClient, TaskRun
from .results import (
    InputRequiredError,
    McpClientError,
    McpError,
    NotATaskError,
    Progress,
    Question,
    lookup,
    response_to,
    text_of,
)

if TYPE_CHECKING:
    from .staff import approve, reject
    from .worker import task_worker

__all__ = [
    "InputRequiredError",
    "McpClient",
    "McpClientError",
    "McpError",
    "NotATaskError",
    "Progress",
    "Question",
    "TaskRun",
    "approve",
    "lookup",
    "reject",
    "response_to",
    "task_worker",
    "text_of",
]


def __getattr__(name: str) -> Any:
    """:func:`task_worker`, :func:`approve` and :func:`reject` need the task engine, which
    needs Django set up: imported when asked for."""
    if name == "task_worker":
        from .worker import task_worker

        return task_worker
    if name in ("approve", "reject"):
        from . import staff

        return getattr(staff, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The text of a tool's result, the two shapes the tests read it in.

- :func:`text_of`: an ``mcp`` SDK ``CallToolResult`` (``tests/clients/test_sdk_client.py``,
  ``tests/clients/test_legacy.py``).
- :func:`task_text_of`: a task dict from ``tasks/get`` over raw HTTP (``tests.support.task_driver``,
  ``tests.support.worker_fixtures``' task client), whose ``result`` is a ``CallToolResult`` as JSON.

Not here: ``tests/benchmarks/bench_client.py``'s ``text_of`` (a result dict; it raises the
benchmark's ``BenchError`` on an error result) and the one inside the FastMCP 4 client script of
``tests/clients/test_tasks_fastmcp_client.py`` (it runs in FastMCP's own venv, and reads FastMCP's
result objects).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def task_text_of(task: dict[str, Any]) -> str:
    """The text of a completed task's ``CallToolResult``."""
    assert task["status"] == "completed", task
    return "".join(
        block.get("text", "") for block in task["result"]["content"] if block.get("type") == "text"
    )

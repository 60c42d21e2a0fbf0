"""A real third-party client of the tasks extension (issue 10 §5): the official TypeScript
client ``@modelcontextprotocol/client`` 2.4 with ``@modelcontextprotocol/ext-tasks`` 0.2.2,
at protocol 2026-07-28, against a live server with a real rq worker on a real Redis.

Its task ``settle()`` validates every ``tasks/get`` against the 2026-07-28 schema, which
requires ``resultType`` on every Result — including the ``CallToolResult`` a completed task
inlines (the tasks extension: ``tasks/get`` returns the result exactly as the underlying
request would have).

Node and the client come from ``tests.support.ts_client`` (the ``node`` fixture).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LiveServer
from tests.support.ts_client import SCRIPT_TIMEOUT, script
from tests.support.worker_fixtures import wait_for_path

pytestmark = [pytest.mark.live, pytest.mark.redis]


@pytest.fixture
def run_client(node: Path, tmp_path: Path) -> Any:
    """``run_client(server, scenario, argument)``: what ``tests/clients/ts_client/tasks.mjs``
    saw."""

    def run(server: LiveServer, scenario: str, argument: dict[str, Any]) -> dict[str, Any]:
        result = subprocess.run(
            [str(node), str(script("tasks.mjs")), server.mcp_url, scenario, json.dumps(argument)],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
            check=False,
        )
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        assert result.returncode == 0 and lines, (
            f"the TypeScript client failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
        report: dict[str, Any] = json.loads(lines[-1])
        assert report["era"] == "modern", report
        assert "exception" not in report, report
        return report

    return run


def test_task_polled_to_completion_settles_with_the_tool_result(
    stack: LiveServer, run_client: Any
) -> None:
    report = run_client(stack, "complete", {"tool": "trivial_task", "arguments": {"n": 7}})
    assert report["kind"] == "task"
    assert report["status"] == "completed", report  # the schema accepted the inlined result
    assert report["result"]["structuredContent"] == {"result": 7}
    assert report["result"]["resultType"] == "complete"


def test_task_question_answered_by_the_client_completes(stack: LiveServer, run_client: Any) -> None:
    report = run_client(
        stack,
        "question",
        {"tool": "lt_elicit", "arguments": {"kind": "str"}, "answer": {"value": "Ada"}},
    )
    assert report["kind"] == "task"
    assert "input_required" in report["events"], report
    assert report["status"] == "completed", report
    assert report["result"]["structuredContent"] == {
        "action": "accept",
        "data": "Ada",
        "type_name": "str",
    }


@pytest.mark.cancel
def test_cancelled_task_settles_as_cancelled(
    stack: LiveServer, run_client: Any, tmp_path: Path
) -> None:
    report = run_client(
        stack, "cancel", {"tool": "async_wait_task", "arguments": {"marker_dir": str(tmp_path)}}
    )
    assert report["kind"] == "task"
    assert report["status"] == "cancelled", report
    assert wait_for_path(tmp_path / "cancelled")  # the running tool got its CancelledError

"""A host's client without the tasks extension: the official TypeScript client
``@modelcontextprotocol/client`` 2.4 alone (no ``ext-tasks``), in both eras, with a request
timeout (3 s) shorter than the tools it calls, against a live server with a real rq worker
on a real Redis (``tests/clients/ts_client/plain.mjs``; Node from
``tests.support.ts_client``). It follows each handle to the result as a model would."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.handles.test_handles_live import approve_in_the_admin
from tests.support.ts_client import SCRIPT_TIMEOUT, script
from tests.support.worker_fixtures import RedisProcess, TaskStack, module_task_stack, wait_for_path

pytestmark = [pytest.mark.live, pytest.mark.redis]

TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def module_stack(request: pytest.FixtureRequest, stack_redis: RedisProcess) -> Iterator[TaskStack]:
    env = {
        "MCP_TASKS_TEST_INLINE_WINDOW": "1",
        "MCP_TASKS_TEST_CHECK_WAIT": "2",
        "MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "0.3",
    }
    yield from module_task_stack(request, stack_redis, env, label="handles-ts")


@pytest.fixture
def stack(request: pytest.FixtureRequest, module_stack: TaskStack) -> TaskStack:
    module_stack.attach(request)
    return module_stack


@pytest.fixture(params=["modern", "legacy"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def start_client(node: Path, stack: TaskStack, era: str) -> Any:
    """``start_client(scenario, options)``: ``plain.mjs`` running; ``.communicate()`` it."""

    def start(scenario: str, options: dict[str, Any]) -> subprocess.Popen[str]:
        options = {"era": era, "timeoutMs": TIMEOUT_MS, **options}
        return subprocess.Popen(
            [str(node), str(script("plain.mjs")), stack.url, scenario, json.dumps(options)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    return start


def report_of(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=SCRIPT_TIMEOUT)
    lines = [line for line in out.splitlines() if line.strip()]
    assert process.returncode == 0 and lines, f"the client failed:\n{out}\n{err}"
    report: dict[str, Any] = json.loads(lines[-1])
    assert "exception" not in report, report
    return report


def test_a_tool_longer_than_the_timeout_reaches_its_result(start_client: Any, era: str) -> None:
    report = report_of(
        start_client("follow", {"tool": "slow_compute", "arguments": {"seconds": 5, "label": "ts"}})
    )
    assert report["era"] == era
    assert {"check_task", "answer_task", "cancel_task", "list_tasks"} <= set(report["tools"])
    first, *checks = report["calls"]
    assert first["name"] == "slow_compute" and first["structured"]["status"] == "working"
    assert checks and {call["name"] for call in checks} == {"check_task"}
    assert all(call["ms"] < TIMEOUT_MS for call in report["calls"])
    assert report["final"]["text"] == "slow_compute ts finished after 5s"


def test_a_question_is_answered_through_the_answer_tool(start_client: Any) -> None:
    report = report_of(
        start_client(
            "follow",
            {"tool": "long_report", "arguments": {"quarter": "Q1", "steps": 1}, "answer": True},
        )
    )
    names = [call["name"] for call in report["calls"]]
    assert names[:2] == ["long_report", "answer_task"]
    assert report["calls"][0]["structured"]["waitingFor"] == "answer"
    assert report["final"]["text"] == "Report for Q1: 1 sections with drafts."


def test_a_client_that_can_answer_is_asked_inline(start_client: Any) -> None:
    report = report_of(
        start_client(
            "follow",
            {
                "tool": "long_report",
                "arguments": {"quarter": "Q2", "steps": 1},
                "elicit": {"value": False},
            },
        )
    )
    assert report["asked"] == ["Include draft figures?"]
    assert [call["name"] for call in report["calls"]] == ["long_report"]
    assert report["final"]["text"] == "Report for Q2: 1 sections."


async def test_an_approval_approved_in_the_admin_reaches_its_result(
    start_client: Any, stack: TaskStack, tmp_path: Path
) -> None:
    process = start_client(
        "approval",
        {"tool": "refund", "arguments": {"customer": "ts", "amount": 12}, "markers": str(tmp_path)},
    )
    assert await asyncio.to_thread(wait_for_path, tmp_path / "waiting")
    await approve_in_the_admin(stack, (tmp_path / "waiting").read_text())
    (tmp_path / "approved").write_text("yes")
    report = await asyncio.to_thread(report_of, process)
    assert report["calls"][0]["structured"]["waitingFor"] == "staff"
    assert report["final"]["isError"] is False
    assert report["final"]["structured"] == {"customer": "ts", "amount": 12.0, "note": ""}


@pytest.mark.cancel
def test_cancel_task_stops_the_task(start_client: Any) -> None:
    report = report_of(
        start_client("cancel", {"tool": "slow_compute", "arguments": {"seconds": 60}})
    )
    assert [call["name"] for call in report["calls"]] == [
        "slow_compute",
        "cancel_task",
        "check_task",
    ]
    assert report["calls"][1]["structured"]["status"] == "cancelled"
    assert report["final"]["isError"] is True
    assert "was cancelled" in report["final"]["text"]

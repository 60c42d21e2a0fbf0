"""``McpClient(url)`` and ``mcp_tasks_call --url`` against a live server: the example project
in embedded mode (its own worker thread) in a subprocess, over real HTTP."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from mcp_tasks.testing import McpClient, Progress
from tests.support.live import CLIENT_TOKEN

pytestmark = pytest.mark.live


@pytest.fixture
def server(task_server: Any) -> Any:
    return task_server(redis=False)


def test_live_client_calls_and_runs_a_task_with_its_question_answered(server: Any) -> None:
    seen: list[Progress] = []
    with McpClient(server.mcp_url, token=CLIENT_TOKEN) as client:
        assert client.call("add", {"a": 1, "b": 2})["structuredContent"] == {"result": 3}
        client.call("slow_count", {"n": 2, "delay": 0}, on_progress=seen.append)
        run = client.start("confirm_delete", {"filename": "a.txt"})
        task = run.wait(answer={"confirm": True})
    assert task["status"] == "completed"
    assert run.text == "Deleted a.txt."
    assert [progress.message for progress in seen] == ["step 1", "step 2"]


def test_the_command_calls_a_live_server(server: Any) -> None:
    out, err = io.StringIO(), io.StringIO()
    arguments = ["multi_input", "--task", "--url", server.mcp_url, "--answer", "name=Ada"]
    arguments += ["--answer", "confirm=true"]
    if CLIENT_TOKEN:
        arguments += ["--token", CLIENT_TOKEN]
    call_command("mcp_tasks_call", *arguments, stdin=io.StringIO(), stdout=out, stderr=err)
    assert out.getvalue().startswith("multi_input: name=Ada, confirm=True\n")
    assert "started (multi_input)" in err.getvalue()

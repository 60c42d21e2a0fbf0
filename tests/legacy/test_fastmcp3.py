"""The seed's task flows with the seed's own client library, FastMCP 3 (``fastmcp==3.4.7``).

``Client(url).call_tool(name, args, task=True)`` returns a ``ToolTask`` handle (``status``,
``wait``, ``result``, ``cancel``). FastMCP 3 pins ``mcp`` 1.x, so it runs in its own
virtualenv (``.venv-fastmcp3``) as ``tests/legacy_clients/fastmcp3_tasks.py`` scenarios,
against the example project over real HTTP (embedded mode; one flow on Redis with a real
``manage.py rqworker``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LiveServer
from tests.support.legacy_client_fixtures import LegacyClient
from tests.support.live import LEGACY

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]

RELATED_TASK = "io.modelcontextprotocol/related-task"


def run(client: LegacyClient, scenario: str, url: str, **options: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.run(
        "fastmcp3_tasks.py", scenario, url, json.dumps(options)
    ).result
    return result


def test_call_tool_task_true_gives_a_handle(
    fastmcp3_client: LegacyClient, server: LiveServer
) -> None:
    out = run(fastmcp3_client, "handle", server.mcp_url)
    assert out["protocol_version"] == LEGACY
    assert out["capabilities_tasks"]["requests"] == {"tools": {"call": {}}}
    assert out["execution"]["lt_quick"] == "optional"
    # The client declares no tasks capability: a task-only tool is listed as optional, since
    # a plain call runs it as a task too (README "Clients without tasks").
    assert out["execution"]["lt_required"] == "optional"
    assert out["execution"]["summarize"] == "forbidden"
    assert out["returned_immediately"] is False  # a real background task
    assert out["first_status"]["taskId"] == out["task_id"]
    assert out["first_status"]["status"] in {"working", "completed"}
    assert out["waited"]["status"] == "completed"
    assert out["is_error"] is False
    assert out["meta"][RELATED_TASK] == {"taskId": out["task_id"]}
    assert out["task_id"] in out["listed"]
    identity = out["identity"]
    assert identity["task_id"] == out["identity_task_id"]
    assert identity["is_background_task"] is True
    assert identity["request_context_is_none"] is True


def test_the_handle_sees_status_notifications(
    fastmcp3_client: LegacyClient, server: LiveServer
) -> None:
    out = run(fastmcp3_client, "handle", server.mcp_url)
    mine = [
        n["params"] for n in out["status_notifications"] if n["params"]["taskId"] == out["task_id"]
    ]
    assert mine and mine[-1]["status"] == "completed"


def test_result_text(fastmcp3_client: LegacyClient, server: LiveServer) -> None:
    out = run(fastmcp3_client, "handle", server.mcp_url)
    # FastMCP wraps our {"result": ...} structured output into its data; the text is in it.
    assert "quick fm" in str(out["data"])
    assert out["await_data"] == out["data"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param(
            {"kind": "bool", "answer": "accept", "value": True},
            {"action": "accept", "data": True, "type_name": "bool"},
            id="accept",
        ),
        pytest.param(
            {"kind": "str", "answer": "decline"},
            {"action": "decline", "data": None, "type_name": None},
            id="decline",
        ),
        pytest.param(
            {"kind": "model", "answer": "pydantic", "value": {"name": "Ada", "age": 36}},
            {"action": "accept", "data": {"name": "Ada", "age": 36}, "type_name": "Person"},
            id="pydantic",
        ),
    ],
)
def test_elicitation_handler_answers_the_task(
    fastmcp3_client: LegacyClient,
    server: LiveServer,
    options: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    """``task.result()`` waits for a terminal status before ``tasks/result`` (FastMCP 3's
    ``ToolTask._wait_terminal``); the question must reach its ``elicitation_handler`` while
    the task is ``input_required`` for the task to finish."""
    out = run(fastmcp3_client, "elicit", server.mcp_url, result_timeout=30, **options)
    assert out["asked"], (
        f"the elicitation_handler was never called; the task stayed {out['status']}"
    )
    assert out["asked"][0]["message"] == f"Task asks for a {options['kind']}"
    assert out["finished"] is True
    assert out["data"] == expected
    assert out["status"]["status"] == "completed"


def test_progress_and_status_changes(fastmcp3_client: LegacyClient, server: LiveServer) -> None:
    out = run(fastmcp3_client, "progress", server.mcp_url, steps=3, progress_token="tok-fm")
    progress = [n["params"] for n in out["progress"]]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert all(p["progressToken"] == "tok-fm" for p in progress)
    assert all(p["_meta"][RELATED_TASK] == {"taskId": out["task_id"]} for p in progress)
    assert "progressed 3 steps" in str(out["data"])
    assert out["status_changes"] and out["status_changes"][-1]["status"] == "completed"


@pytest.mark.cancel
def test_cancel_through_the_handle(
    fastmcp3_client: LegacyClient, server: LiveServer, tmp_path: Path
) -> None:
    out = run(fastmcp3_client, "cancel", server.mcp_url, marker_dir=str(tmp_path))
    assert out["started"] is True
    assert out["status"]["status"] == "cancelled"
    assert out["waited"]["status"] == "cancelled"
    assert out["cancel_again"]["error"]["code"] == -32602
    assert out["tool_saw_cancellation"] is True


def test_a_tool_error_fails_the_task_and_result_raises(
    fastmcp3_client: LegacyClient, server: LiveServer
) -> None:
    out = run(fastmcp3_client, "tool_error", server.mcp_url)
    assert out["waited"]["status"] == "failed"
    assert out["result"] == {"raised": True, "message": "lt_tool_error: fastmcp"}
    assert out["quiet_is_error"] is True
    assert out["quiet_text"] == ["lt_tool_error: quiet"]


def test_access_tokens_bind_tasks_to_their_principal(
    fastmcp3_client: LegacyClient, server: LiveServer
) -> None:
    out = run(
        fastmcp3_client, "tokens", server.mcp_url, token="valid-fmalice", other_token="valid-fmbob"
    )
    identity = out["identity"]
    assert identity["subject"] == "fmalice"
    assert identity["client_id"] == "client-fmalice"
    assert identity["task_id"] == out["task_id"]
    assert out["task_id"] in out["owner_list"]
    assert out["task_id"] not in out["other_list"]
    assert out["other_get"]["error"]["code"] == -32602
    assert out["other_cancel"]["error"]["code"] == -32602
    assert out["other_result"]["error"]["code"] == -32602
    assert out["owner_status"]["status"] == "completed"


@pytest.mark.redis
def test_the_handle_on_redis_with_a_real_worker(
    fastmcp3_client: LegacyClient, task_server: Any, rq_worker: Any
) -> None:
    stack = task_server(label="redis server")
    rq_worker(stack)
    out = run(fastmcp3_client, "handle", stack.mcp_url)
    assert out["returned_immediately"] is False
    assert out["waited"]["status"] == "completed"
    assert "quick fm" in str(out["data"])
    mine = [
        n["params"]["status"]
        for n in out["status_notifications"]
        if n["params"]["taskId"] == out["task_id"]
    ]
    assert mine and mine[-1] == "completed"

"""``mcp==1.30.0``'s experimental task API (``session.experimental``) against the server.

The client runs in its own virtualenv (``.venv-mcp1``, see ``tests/support/legacy_client_fixtures.py``)
as ``tests/legacy_clients/mcp1_tasks.py`` scenarios. Most run against one embedded-mode
server; the admin flows run on Redis with a real ``manage.py rqworker``, the answer given
through ``mcp_tasks.tasks.state.service.answer`` exactly as the admin view gives it.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LiveServer
from tests.live_tools.legacy_task_tools import PROTOCOL_ERROR_CODE
from tests.support.legacy_client_fixtures import LegacyClient, background, manage_py
from tests.support.live import LEGACY, wait_for_file

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]

RELATED_TASK = "io.modelcontextprotocol/related-task"
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def run(client: LegacyClient, scenario: str, url: str, **options: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.run("mcp1_tasks.py", scenario, url, json.dumps(options)).result
    return result


def related(message: dict[str, Any]) -> Any:
    return ((message.get("_meta") or {}).get(RELATED_TASK) or {}).get("taskId")


# -- the whole life of a task -----------------------------------------------------------------------


def test_create_poll_and_fetch_the_result(mcp1_client: LegacyClient, server: LiveServer) -> None:
    out = run(mcp1_client, "lifecycle", server.mcp_url)
    assert out["protocol_version"] == LEGACY
    assert out["capabilities_tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    execution = out["execution"]
    # The client declares no tasks capability, so it may also call a task-only tool plainly
    # (README "Clients without tasks"): it is listed as optional.
    assert (execution["lt_required"], execution["lt_forbidden"], execution["lt_optional"]) == (
        "optional",
        "forbidden",
        "optional",
    )
    assert execution["long_report"] == "optional"
    created = out["created"]["task"]
    assert created["status"] == "working"
    assert created["ttl"] == 60000
    task_id = created["taskId"]
    assert out["polls"][-1]["status"] == "completed"
    assert all(poll["taskId"] == task_id for poll in out["polls"])
    result = out["result"]["result"]
    assert result["content"] == [{"type": "text", "text": "quick a"}]
    assert result["isError"] is False
    assert result["_meta"][RELATED_TASK] == {"taskId": task_id}
    assert out["final"]["status"] == "completed"


def test_the_task_runs_in_the_creating_session(
    mcp1_client: LegacyClient, server: LiveServer
) -> None:
    out = run(mcp1_client, "lifecycle", server.mcp_url)
    identity = out["identity"]["result"]["structuredContent"]
    assert identity["session_id"] == out["session_id"]
    assert identity["task_id"] == out["identity_task_id"]
    assert identity["is_background_task"] is True
    assert identity["request_context_is_none"] is True
    assert identity["request_id"] is None
    assert isinstance(identity["origin_request_id"], int)
    assert identity["protocol_version"] == LEGACY
    assert identity["client_name"] == "mcp"


def test_status_notifications_reach_the_client(
    mcp1_client: LegacyClient, server: LiveServer
) -> None:
    out = run(mcp1_client, "lifecycle", server.mcp_url)
    statuses: dict[str, list[str]] = {}
    for notification in out["status_notifications"]:
        params = notification["params"]
        statuses.setdefault(params["taskId"], []).append(params["status"])
        assert RELATED_TASK not in (params.get("_meta") or {})
    for task_id in (out["created"]["task"]["taskId"], out["identity_task_id"]):
        assert statuses[task_id][-1] == "completed", statuses
    assert set(statuses) == {out["created"]["task"]["taskId"], out["identity_task_id"]}


# -- questions through tasks/result ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "reply", "expected"),
    [
        (
            "bool",
            {"action": "accept", "content": {"value": True}},
            {"action": "accept", "data": True, "type_name": "bool"},
        ),
        (
            "model",
            {"action": "accept", "content": {"name": "Ada", "age": 36}},
            {"action": "accept", "data": {"name": "Ada", "age": 36}, "type_name": "Person"},
        ),
        ("str", {"action": "decline"}, {"action": "decline", "data": None, "type_name": None}),
        ("int", {"action": "cancel"}, {"action": "cancel", "data": None, "type_name": None}),
    ],
)
def test_elicitation_through_tasks_result(
    mcp1_client: LegacyClient,
    server: LiveServer,
    kind: str,
    reply: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    out = run(mcp1_client, "elicit", server.mcp_url, kind=kind, reply=reply)
    task_id = out["task_id"]
    # The question goes out once, on whichever of the session's streams gets it first (the
    # GET stream or tasks/result), so polling may or may not see input_required before it
    # is answered.
    assert len(out["asked"]) == 1
    asked = out["asked"][0]
    assert asked["params"]["message"] == f"Task asks for a {kind}"
    assert asked["params"]["mode"] == "form"
    # The request carries the related task, in params._meta (what the handler's context sees).
    assert related(asked["params"]) == task_id
    assert asked["context_meta"][RELATED_TASK] == {"taskId": task_id}
    result = out["result"]["result"]
    assert result["structuredContent"] == expected
    assert result["_meta"][RELATED_TASK] == {"taskId": task_id}
    assert out["final"]["status"] == "completed"


def test_elicitation_when_the_client_waits_in_tasks_result_at_once(
    mcp1_client: LegacyClient, server: LiveServer
) -> None:
    """No polling: ``tasks/result`` right after creation; the question comes on it."""
    out = run(mcp1_client, "elicit", server.mcp_url, kind="bool", poll=False)
    assert len(out["asked"]) == 1
    assert out["result"]["result"]["structuredContent"]["data"] is True


def test_sampling_through_tasks_result(mcp1_client: LegacyClient, server: LiveServer) -> None:
    out = run(mcp1_client, "sample", server.mcp_url)
    task_id = out["task_id"]
    (asked,) = out["asked"]
    assert asked["method"] == "sampling/createMessage"
    assert related(asked["params"]) == task_id
    assert asked["context_meta"][RELATED_TASK] == {"taskId": task_id}
    assert asked["params"]["messages"][0]["content"]["text"] == "Six times seven?"
    assert asked["params"]["maxTokens"] == 32
    result = out["result"]["result"]
    assert result["content"][0]["text"] == "test-model said: forty-two"
    assert result["_meta"][RELATED_TASK] == {"taskId": task_id}


# -- listing and cancelling ------------------------------------------------------------------------


def test_list_tasks_pages_with_next_cursor(mcp1_client: LegacyClient, server: LiveServer) -> None:
    token = f"valid-pager{uuid.uuid4().hex[:8]}"  # a principal of its own: exactly its tasks
    out = run(mcp1_client, "paginate", server.mcp_url, token=token, count=55)
    pages = out["pages"]
    assert [len(page["ids"]) for page in pages] == [50, 5]
    assert pages[0]["nextCursor"]
    assert pages[1]["nextCursor"] is None
    listed = [task_id for page in pages for task_id in page["ids"]]
    assert len(listed) == len(set(listed)) == 55
    assert set(listed) == set(out["created"])
    assert all(RELATED_TASK not in page["meta"] for page in pages)
    assert out["forged_cursor"]["error"]["code"] == -32602


@pytest.mark.cancel
def test_cancel_task_and_cancelling_a_terminal_task(
    mcp1_client: LegacyClient, server: LiveServer, tmp_path: Path
) -> None:
    out = run(mcp1_client, "cancel", server.mcp_url, marker_dir=str(tmp_path))
    assert out["started"] is True
    assert out["cancelled"]["status"] == "cancelled"
    assert out["cancelled"]["taskId"] == out["task_id"]
    assert out["after"]["status"] == "cancelled"
    assert out["tool_saw_cancellation"] is True
    assert out["cancel_again"]["error"]["code"] == -32602
    assert out["cancel_completed"]["error"]["code"] == -32602
    assert "completed" in out["cancel_completed"]["error"]["message"]
    assert out["cancel_unknown"]["error"]["code"] == -32602
    assert "error" in out["result"]  # a cancelled task has no result
    assert not (tmp_path / "finished").exists()


# -- failures and task-support modes ------------------------------------------------------------------


def test_errors_and_task_support_modes(mcp1_client: LegacyClient, server: LiveServer) -> None:
    out = run(mcp1_client, "errors", server.mcp_url)
    # A tool error: the task is failed (2025-11-25), tasks/result is the isError result.
    assert out["tool_error_polls"][-1]["status"] == "failed"
    assert out["tool_error_get"]["status"] == "failed"
    tool_error = out["tool_error_result"]["result"]
    assert tool_error["isError"] is True
    assert tool_error["content"][0]["text"] == "lt_tool_error: bad input"
    assert tool_error["_meta"][RELATED_TASK] == {"taskId": out["tool_error_task_id"]}
    # A protocol error: tasks/result is that JSON-RPC error.
    assert out["protocol_error_polls"][-1]["status"] == "failed"
    assert out["protocol_error_result"]["error"] == {
        "code": PROTOCOL_ERROR_CODE,
        "message": "lt_protocol_error: simulated",
        "data": {"why": "on purpose"},
    }
    # Called plainly, a task-only tool still runs as a task and answers in its window.
    assert out["required_plain"]["result"]["content"][0]["text"] == "required x"
    assert out["forbidden_task"]["error"]["code"] == -32601
    assert out["optional_plain"]["result"]["content"][0]["text"] == "optional inline"
    assert out["required_task_result"]["result"]["content"][0]["text"] == "required as task"
    assert out["get_unknown"]["error"]["code"] == -32602
    assert out["result_unknown"]["error"]["code"] == -32602


# -- progress and logs ---------------------------------------------------------------------------------


def test_progress_reaches_the_progress_token(mcp1_client: LegacyClient, server: LiveServer) -> None:
    out = run(mcp1_client, "progress", server.mcp_url, steps=3, progress_token="tok-mcp1")
    progress = [notification["params"] for notification in out["progress"]]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert all(p["progressToken"] == "tok-mcp1" and p["total"] == 3 for p in progress)
    assert all(related(p) == out["task_id"] for p in progress)
    assert out["result"]["result"]["content"][0]["text"] == "progressed 3 steps"


@pytest.mark.parametrize(
    ("level", "expected"),
    [("warning", LEVELS[3:]), ("critical", LEVELS[5:]), ("debug", LEVELS)],
)
def test_worker_logs_are_gated_by_the_sessions_level(
    mcp1_client: LegacyClient, server: LiveServer, level: str, expected: list[str]
) -> None:
    out = run(mcp1_client, "logs", server.mcp_url, level=level)
    assert [entry["level"] for entry in out["logs"]] == expected
    assert [entry["data"] for entry in out["logs"]] == [f"task {name} message" for name in expected]
    assert all(entry["logger"] == "lt" for entry in out["logs"])


# -- Redis, a real rq worker, the admin ----------------------------------------------------------------

ADMIN_ANSWER = """
from mcp_tasks.models import InputRequest
from mcp_tasks.tasks.state import service
task_id = {task_id!r}
key = InputRequest.objects.get(task_id=task_id, status="pending").key
ok = service.answer(task_id, key, {{"action": "accept", "content": {content!r}}}, principal_scope=None, answered_by="admin:test")
print("ANSWERED", ok, key)
"""


def admin_answer(server: LiveServer, task_id: str, content: dict[str, Any]) -> str:
    """Answer the task's pending question as the admin view does, in the server's environment."""
    output = manage_py(server.env, ADMIN_ANSWER.format(task_id=task_id, content=content))
    assert "ANSWERED True" in output, output
    return output


@pytest.mark.redis
@pytest.mark.parametrize(
    "hold_window",
    [
        pytest.param("120", id="answered-while-the-worker-holds"),
        pytest.param("0.2", id="answered-after-the-job-suspended"),
    ],
)
def test_a_task_answered_in_the_admin_completes_the_pending_tasks_result(
    mcp1_client: LegacyClient, task_server: Any, rq_worker: Any, tmp_path: Path, hold_window: str
) -> None:
    stack = task_server({"MCP_TASKS_TEST_INPUT_HOLD_WINDOW": hold_window}, label="redis server")
    rq_worker(stack)
    options = {"marker_dir": str(tmp_path), "tool": "lt_elicit", "arguments": {"kind": "model"}}
    with background(
        mcp1_client, "mcp1_tasks.py", "admin_pending", stack.mcp_url, json.dumps(options)
    ) as process:
        assert wait_for_file(tmp_path / "asked", timeout=60), (
            "the question never reached the client"
        )
        task_id = (tmp_path / "task_id").read_text()
        assert process.poll() is None  # still waiting in tasks/result
        admin_answer(stack, task_id, {"name": "Grace", "age": 85})
        out = mcp1_client.finish(process, "mcp1_tasks.py admin_pending").result
    assert out["task_id"] == task_id
    assert out["asked"][0]["context_meta"][RELATED_TASK] == {"taskId": task_id}
    result = out["result"]["result"]
    assert result["structuredContent"] == {
        "action": "accept",
        "data": {"name": "Grace", "age": 85},
        "type_name": "Person",
    }
    assert result["_meta"][RELATED_TASK] == {"taskId": task_id}
    assert out["final"]["status"] == "completed"


@pytest.mark.redis
def test_the_example_long_report_answered_in_the_admin(
    mcp1_client: LegacyClient, task_server: Any, rq_worker: Any, tmp_path: Path
) -> None:
    stack = task_server(label="redis server")
    rq_worker(stack)
    options = {
        "marker_dir": str(tmp_path),
        "tool": "long_report",
        "arguments": {"quarter": "Q3", "steps": 2},
    }
    with background(
        mcp1_client, "mcp1_tasks.py", "admin_pending", stack.mcp_url, json.dumps(options)
    ) as process:
        assert wait_for_file(tmp_path / "asked", timeout=60), (
            "the question never reached the client"
        )
        assert (tmp_path / "asked").read_text() == "Include draft figures?"
        admin_answer(stack, (tmp_path / "task_id").read_text(), {"value": True})
        out = mcp1_client.finish(process, "mcp1_tasks.py admin_pending").result
    assert out["result"]["result"]["content"][0]["text"] == "Report for Q3: 2 sections with drafts."


@pytest.mark.redis
def test_flows_on_redis_with_a_real_worker(
    mcp1_client: LegacyClient, task_server: Any, rq_worker: Any
) -> None:
    stack = task_server(label="redis server")
    rq_worker(stack)
    out = run(mcp1_client, "lifecycle", stack.mcp_url)
    identity = out["identity"]["result"]["structuredContent"]
    assert identity["session_id"] == out["session_id"]
    assert out["result"]["result"]["content"][0]["text"] == "quick a"
    statuses = [
        n["params"]["status"]
        for n in out["status_notifications"]
        if n["params"]["taskId"] == out["identity_task_id"]
    ]
    assert statuses and statuses[-1] == "completed"
    elicited = run(mcp1_client, "elicit", stack.mcp_url, kind="bool")
    assert elicited["result"]["result"]["structuredContent"]["data"] is True
    logs = run(mcp1_client, "logs", stack.mcp_url, level="error")
    assert [entry["level"] for entry in logs["logs"]] == LEVELS[4:]

"""The tasks extension (``io.modelcontextprotocol/tasks``) on the modern wire, over real HTTP
against live servers with real rq workers on a real Redis (``tests.support.worker_fixtures``).

The tests share the module's server and worker (``stack``): they count tasks by delta, gate
a task whose state they read before it may run, and open their gates before they end
(``open_gates``). Those that need a process of their own (a worker started late, other
settings) start it (``own_server``)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from mcp_tasks.core import groups
from tests.live_tools.task_tools import SECRET_DETAIL
from tests.support.worker_fixtures import (
    TASKS_EXTENSION,
    ListenStream,
    capabilities,
    db_rows,
    job_exists,
    task_row,
    wait_for_path,
)

pytestmark = [pytest.mark.live, pytest.mark.redis, pytest.mark.usefixtures("open_gates")]

NO_TASKS = capabilities(tasks=False)
WITH_ELICITATION = capabilities(elicitation=True)


def iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def task_count(server: Any) -> int:
    return int(db_rows(server.database_url, "SELECT COUNT(*) FROM mcp_tasks_task")[0][0])


def without_meta(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key != "_meta"}


def is_empty_ack(result: dict[str, Any]) -> bool:
    """An empty result (a modern result also carries ``resultType`` and may carry ``_meta``)."""
    return without_meta(result) in ({}, {"resultType": "complete"})


@pytest.fixture
def server(stack: Any) -> Any:
    """The module's server; its worker runs every task at once."""
    return stack


@pytest.fixture
def client(server: Any, task_client: Any) -> Any:
    return task_client(server)


# -- tools/call of a task tool ----------------------------------------------------------------


def test_optional_task_tool_with_extension_answers_a_flat_create_task_result(client: Any) -> None:
    result = client.start("trivial_task", {"n": 1})
    assert result["resultType"] == "task"
    assert isinstance(result["taskId"], str) and len(result["taskId"]) >= 40
    assert result["status"] == "working"
    assert isinstance(result["statusMessage"], str)
    assert iso(result["createdAt"]).tzinfo is not None
    assert iso(result["lastUpdatedAt"]) >= iso(result["createdAt"])
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] > 0
    assert isinstance(result["pollIntervalMs"], int) and result["pollIntervalMs"] > 0
    assert not {"task", "content", "structuredContent", "isError"} & set(result)


def test_optional_task_tool_without_extension_runs_as_a_task_and_answers_in_its_window(
    client: Any, server: Any
) -> None:
    """A client without the tasks extension gets the tool's result exactly as an inline call
    gave it: the task ended inside the call's window (README "Clients without tasks")."""
    before = task_count(server)
    message = client.call("trivial_task", {"n": 5}, caps=NO_TASKS)
    assert message["result"]["resultType"] == "complete"
    assert message["result"]["structuredContent"] == {"result": 5}
    assert message["result"].get("isError") is not True
    assert task_count(server) == before + 1


def test_required_task_tool_without_extension_runs_as_a_task_too(client: Any) -> None:
    message = client.call("lt_required", {"value": "plain"}, caps=NO_TASKS)
    assert message["result"]["resultType"] == "complete"
    assert message["result"]["content"][0]["text"] == "required plain"


def test_a_required_tool_that_opts_out_is_a_missing_capability_error(client: Any) -> None:
    """``TaskConfig(for_all_clients=False)``: as without handles (the conformance suite's
    contract for ``failing_job``)."""
    status, message = client.post(
        "tools/call", {"name": "failing_job", "arguments": {}}, name="failing_job", caps=NO_TASKS
    )
    assert status == 400
    assert message["error"]["code"] == -32021
    assert message["error"]["data"]["requiredCapabilities"] == {"extensions": {TASKS_EXTENSION: {}}}


def test_invalid_arguments_give_the_plain_call_error_result_and_no_task(
    client: Any, server: Any
) -> None:
    before = task_count(server)
    as_task = client.call("trivial_task", {"n": "not a number"})
    inline = client.call("trivial_task", {"n": "not a number"}, caps=NO_TASKS)
    assert as_task["result"]["isError"] is True
    assert without_meta(as_task["result"]) == without_meta(inline["result"])
    assert task_count(server) == before


# -- durable creation -------------------------------------------------------------------------


def test_task_is_found_by_tasks_get_right_after_creation(client: Any, tmp_path: Path) -> None:
    created = client.start("gated_task", {"marker_dir": str(tmp_path)})  # working till the gate
    task = client.get(created["taskId"])
    assert task["taskId"] == created["taskId"]
    assert task["status"] == "working"
    assert task["createdAt"] == created["createdAt"]
    (tmp_path / "gate").touch()
    assert client.wait_terminal(created["taskId"])["status"] == "completed"


def test_task_row_snapshot_and_job_exist_when_the_create_result_arrives(
    client: Any, server: Any, tmp_path: Path
) -> None:
    created = client.start("gated_task", {"marker_dir": str(tmp_path)})  # working till the gate
    task_id = created["taskId"]
    assert task_row(server.database_url, task_id)["status"] == "working"
    snapshots = db_rows(
        server.database_url,
        "SELECT era, protocol_version FROM mcp_tasks_tasksnapshot WHERE task_id = %s",
        (task_id,),
    )
    assert snapshots == [("modern", "2026-07-28")]
    assert job_exists(server.env["REDIS_URL"], f"mcp_tasks-{task_id}-0")
    (tmp_path / "gate").touch()
    assert client.wait_terminal(task_id)["status"] == "completed"


# -- tasks/get by status ------------------------------------------------------------------------


def test_tasks_get_of_a_working_task_shows_progress_as_status_message(
    client: Any, tmp_path: Path
) -> None:
    created = client.start("gated_task", {"marker_dir": str(tmp_path), "message": "halfway there"})
    assert wait_for_path(tmp_path / "started")
    task = client.wait_for(created["taskId"], lambda t: t.get("statusMessage") == "halfway there")
    assert task["status"] == "working"
    assert task["resultType"] == "complete"
    assert not {"result", "error", "inputRequests"} & set(task)
    (tmp_path / "gate").touch()
    assert client.wait_terminal(created["taskId"])["status"] == "completed"


def test_tasks_get_of_an_input_required_task_lists_its_input_requests(
    task_client: Any, server: Any
) -> None:
    client = task_client(server, caps=WITH_ELICITATION)
    created = client.start("confirm_delete", {"filename": "report.txt"})
    task = client.wait_for(created["taskId"], "input_required")
    requests = task["inputRequests"]
    assert len(requests) == 1
    (request,) = requests.values()
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Delete report.txt?"
    assert request["params"]["requestedSchema"]["properties"]["confirm"]["type"] == "boolean"
    assert "result" not in task and "error" not in task


def test_tasks_get_of_a_completed_task_includes_the_tool_result(client: Any) -> None:
    created = client.start("slow_compute", {"seconds": 0, "label": "quick"})
    task = client.wait_terminal(created["taskId"])
    assert task["status"] == "completed"
    assert task["result"]["content"] == [
        {"type": "text", "text": "slow_compute quick finished after 0s"}
    ]
    assert task["result"].get("isError") in (None, False)
    assert "error" not in task


def test_protocol_error_in_the_tool_fails_the_task_with_the_error_object(client: Any) -> None:
    created = client.start("protocol_error_job")
    task = client.wait_terminal(created["taskId"])
    assert task["status"] == "failed"
    assert task["error"] == {
        "code": -32603,
        "message": "protocol_error_job: simulated internal failure",
    }
    assert "result" not in task


def test_exception_in_the_tool_completes_with_the_same_masked_error_as_a_plain_call(
    client: Any,
) -> None:
    created = client.start("raising_task")
    task = client.wait_terminal(created["taskId"])
    assert task["status"] == "completed"
    assert task["result"]["isError"] is True
    assert SECRET_DETAIL not in json.dumps(task)
    inline = client.call("raising_task", caps=NO_TASKS)["result"]
    assert task["result"]["content"] == inline["content"]


# -- tasks/update -------------------------------------------------------------------------------


ACCEPT_NAME = {"action": "accept", "content": {"name": "Ada"}}
ACCEPT_CONFIRM = {"action": "accept", "content": {"confirm": True}}


def test_tasks_update_with_part_of_the_answers_leaves_the_rest_outstanding(
    task_client: Any, server: Any
) -> None:
    client = task_client(server, caps=WITH_ELICITATION)
    task_id = client.start("multi_input")["taskId"]
    task = client.wait_for(task_id, "input_required")
    assert set(task["inputRequests"]) == {"name", "confirm"}
    assert is_empty_ack(client.update(task_id, {"name": ACCEPT_NAME}))
    task = client.wait_for(task_id, lambda t: set(t.get("inputRequests") or {}) == {"confirm"})
    assert task["status"] == "input_required"
    client.update(task_id, {"confirm": ACCEPT_CONFIRM})
    final = client.wait_terminal(task_id)
    assert final["result"]["content"][0]["text"] == "multi_input: name=Ada, confirm=True"


def test_tasks_update_ignores_unknown_and_already_answered_keys(
    task_client: Any, server: Any
) -> None:
    client = task_client(server, caps=WITH_ELICITATION)
    task_id = client.start("multi_input")["taskId"]
    client.wait_for(task_id, "input_required")
    client.update(task_id, {"name": ACCEPT_NAME})
    client.wait_for(task_id, lambda t: set(t.get("inputRequests") or {}) == {"confirm"})
    ack = client.update(
        task_id,
        {
            "name": {"action": "accept", "content": {"name": "Mallory"}},
            "no-such-key": ACCEPT_CONFIRM,
        },
    )
    assert is_empty_ack(ack)
    task = client.get(task_id)
    assert task["status"] == "input_required" and set(task["inputRequests"]) == {"confirm"}
    client.update(task_id, {"confirm": ACCEPT_CONFIRM})
    final = client.wait_terminal(task_id)
    assert final["result"]["content"][0]["text"] == "multi_input: name=Ada, confirm=True"


def test_answer_after_the_hold_window_resumes_the_task_on_a_new_job(
    task_server: Any, rq_worker: Any, task_client: Any
) -> None:
    server = task_server({"MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "0.2"})
    rq_worker(server)
    client = task_client(server, caps=WITH_ELICITATION)
    task_id = client.start("confirm_delete", {"filename": "old.log"})["taskId"]
    task = client.wait_for(task_id, "input_required")
    deadline = time.monotonic() + 30
    while db_rows(
        server.database_url, "SELECT waiting_worker FROM mcp_tasks_task WHERE id = %s", (task_id,)
    )[0][0]:
        assert time.monotonic() < deadline, "the worker never let go of the waiting task"
        time.sleep(0.05)
    (key,) = task["inputRequests"]
    client.update(task_id, {key: ACCEPT_CONFIRM})
    final = client.wait_terminal(task_id)
    assert final["result"]["content"][0]["text"] == "Deleted old.log."
    assert task_row(server.database_url, task_id)["runs"] == 1


# -- tasks/cancel ack, errors -------------------------------------------------------------------


def test_mcp_name_header_other_than_the_task_id_is_a_header_mismatch(client: Any) -> None:
    task_id = client.start("trivial_task")["taskId"]
    status, message = client.post("tasks/get", {"taskId": task_id}, name="not-" + task_id)
    assert status == 400
    assert message["error"]["code"] == -32020


@pytest.mark.parametrize(
    "method", ["tasks/get", "tasks/update", pytest.param("tasks/cancel", marks=pytest.mark.cancel)]
)
def test_tasks_methods_without_the_extension_are_a_missing_capability_error(
    client: Any, method: str
) -> None:
    task_id = client.start("trivial_task")["taskId"]
    extra: dict[str, Any] = {"inputResponses": {}} if method == "tasks/update" else {}
    status, message = client.task_request(method, task_id, extra, caps=NO_TASKS)
    assert status == 400
    assert message["error"]["code"] == -32021
    assert message["error"]["data"]["requiredCapabilities"] == {"extensions": {TASKS_EXTENSION: {}}}


def _not_found(client: Any, method: str, task_id: str) -> tuple[int, dict[str, Any]]:
    extra: dict[str, Any] = (
        {"inputResponses": {"k": {"action": "cancel"}}} if method == "tasks/update" else {}
    )
    status, message = client.task_request(method, task_id, extra)
    return status, message.get("error", {"unexpected result": message.get("result")})


@pytest.mark.parametrize(
    "method", ["tasks/get", "tasks/update", pytest.param("tasks/cancel", marks=pytest.mark.cancel)]
)
def test_unknown_task_is_invalid_params(client: Any, method: str) -> None:
    status, error = _not_found(client, method, "no-such-task-0000000000000000000000000000")
    assert status == 400
    assert error["code"] == -32602


@pytest.mark.parametrize(
    "method", ["tasks/get", "tasks/update", pytest.param("tasks/cancel", marks=pytest.mark.cancel)]
)
def test_another_principals_task_is_not_found_like_an_unknown_one(
    task_client: Any, server: Any, method: str
) -> None:
    alice = task_client(server, token="valid-alice")
    bob = task_client(server, token="valid-bob")
    task_id = alice.start("trivial_task")["taskId"]
    assert _not_found(bob, method, task_id) == _not_found(
        bob, method, "no-such-task-0000000000000000000000000000"
    )
    assert alice.get(task_id)["status"] in ("working", "completed")


def test_anonymous_caller_cannot_see_a_token_holders_task(task_client: Any, server: Any) -> None:
    alice = task_client(server, token="valid-alice")
    anonymous = task_client(server)
    task_id = alice.start("trivial_task")["taskId"]
    assert _not_found(anonymous, "tasks/get", task_id) == _not_found(
        anonymous, "tasks/get", "unknown-" + task_id[8:]
    )


def test_expired_task_is_not_found_like_an_unknown_one(client: Any) -> None:
    task_id = client.start("short_lived_task")["taskId"]
    deadline = time.monotonic() + 30
    while True:
        status, error = _not_found(client, "tasks/get", task_id)
        if "code" in error:
            break
        assert time.monotonic() < deadline, "the task never expired"
        time.sleep(0.1)
    assert (status, error) == _not_found(
        client, "tasks/get", "no-such-task-0000000000000000000000000000"
    )


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
def test_legacy_task_methods_are_method_not_found_on_the_modern_era(
    client: Any, method: str
) -> None:
    task_id = client.start("trivial_task")["taskId"]
    params = {"taskId": task_id} if method == "tasks/result" else {}
    status, message = client.post(
        method, params, name=task_id if method == "tasks/result" else None
    )
    assert status == 404
    assert message["error"]["code"] == -32601


# -- subscriptions/listen -----------------------------------------------------------------------


def _is_task_notification(task_id: str, status: str) -> Any:
    return lambda m: (
        m.get("method") == "notifications/tasks"
        and m["params"]["taskId"] == task_id
        and m["params"]["status"] == status
    )


def test_listen_pushes_detailed_task_notifications_from_the_worker(
    own_client: Any, own_server: Any, rq_worker: Any, tmp_path: Path
) -> None:
    client, server = own_client, own_server
    task_id = client.start(
        "gated_task", {"marker_dir": str(tmp_path), "message": "pushed progress"}
    )["taskId"]
    with ListenStream(client, {"taskIds": [task_id]}) as stream:
        ack = stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"]["taskIds"] == [task_id]
        subscription = ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
        rq_worker(server)  # only now: the stream hears the progress the tool reports first
        stream.until(
            lambda m: (
                m.get("method") == "notifications/tasks"
                and m["params"].get("statusMessage") == "pushed progress"
            )
        )
        (tmp_path / "gate").touch()
        seen = stream.until(_is_task_notification(task_id, "completed"))
    final = seen[-1]["params"]
    assert final["result"]["content"][0]["text"] == "gate opened after pushed progress"
    assert final["_meta"]["io.modelcontextprotocol/subscriptionId"] == subscription
    polled = client.get(task_id)
    assert {k: v for k, v in final.items() if k not in ("_meta", "resultType")} == {
        k: v for k, v in polled.items() if k not in ("_meta", "resultType")
    }


def test_listen_pushes_nothing_of_other_tasks_that_share_the_listened_tasks_shard(
    task_client: Any, server: Any, tmp_path: Path
) -> None:
    """Task changes go to shard groups: a stream that joined one hears the changes of every
    task of the shard, and must push only those of the tasks it listens to."""
    alice = task_client(server, token="valid-alice")
    bob = task_client(server, token="valid-bob")
    listened = alice.start("gated_task", {"marker_dir": str(tmp_path), "message": "m"})["taskId"]
    shard = groups.task_shard_group(listened)
    with ListenStream(alice, {"taskIds": [listened]}) as stream:
        stream.next()  # acknowledged
        neighbours = {"alice": "", "bob": ""}
        for _ in range(2000):  # ~64 tries each on average
            for name, client in (("alice", alice), ("bob", bob)):
                if not neighbours[name]:
                    task_id = client.start("trivial_task", {"n": 1})["taskId"]
                    if groups.task_shard_group(task_id) == shard:
                        neighbours[name] = task_id
            if all(neighbours.values()):
                break
        for name, client in (("alice", alice), ("bob", bob)):
            assert client.wait_terminal(neighbours[name])["status"] == "completed"
        (tmp_path / "gate").touch()
        seen = stream.until(_is_task_notification(listened, "completed"))
    assert {m["params"]["taskId"] for m in seen if m.get("method") == "notifications/tasks"} == {
        listened
    }


def test_listen_does_not_acknowledge_someone_elses_task_ids(task_client: Any, server: Any) -> None:
    alice = task_client(server, token="valid-alice")
    bob = task_client(server, token="valid-bob")
    own = bob.start("trivial_task", {"n": 1})["taskId"]
    foreign = alice.start("trivial_task", {"n": 2})["taskId"]
    with ListenStream(bob, {"taskIds": [own, foreign, "no-such-task"]}) as stream:
        ack = stream.next()
    assert ack["params"]["notifications"]["taskIds"] == [own]

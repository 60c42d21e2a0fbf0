"""Fair share, quotas, concurrency limits and retries with a live server, real
``manage.py rqworker`` processes and a Redis of their own.

What must hold: two principals' tasks start in turn on two worker processes, whatever
one of them queued; a task call past ``MAX_ACTIVE_TASKS`` is refused on both eras and
writes nothing; a concurrency limit holds across two workers, and the slot of a worker
killed while holding it comes back; a transient failure is retried with back-off, the
answer given before it replayed; fair share holds after Redis restarts.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer
from tests.support.worker_fixtures import (
    WAIT,
    RedisProcess,
    TaskClient,
    capabilities,
    db_rows,
    envelope,
    headers_for,
    module_redis,
    parse_messages,
    task_row,
    wait_for_path,
)

pytestmark = [pytest.mark.live, pytest.mark.redis]

#: Active tasks a principal may hold on the module's server.
QUOTA = 6
#: Workers of these tests: one task at a time each, leases of 2 s, a fast housekeeping.
ONE_AT_A_TIME = {"MCP_TASKS_TEST_CONCURRENCY": "1"}
FAST = {
    "MCP_TASKS_TEST_HEARTBEAT_INTERVAL": "0.2",
    "MCP_TASKS_TEST_LOST_AFTER": "2",
    "MCP_TASKS_TEST_REQUEUE_AFTER": "1",
    "MCP_TASKS_TEST_MAINTENANCE_INTERVAL": "1",
}


@pytest.fixture(scope="module")
def limits_redis(request: pytest.FixtureRequest) -> Iterator[RedisProcess]:
    yield from module_redis(request, "limits redis")


@pytest.fixture(scope="module")
def server_env(limits_redis: RedisProcess) -> dict[str, str]:
    return {
        "REDIS_URL": limits_redis.url,
        "REDIS_PREFIX": f"limits_{uuid.uuid4().hex[:10]}",
        "MCP_TASKS_TEST_MAX_ACTIVE_TASKS": str(QUOTA),
    }


def principal(name: str) -> str:
    """A bearer token of a principal no other test uses."""
    return f"valid-{name}{secrets.token_hex(3)}"


def started(directory: Path) -> list[str]:
    """The labels of the tasks that started, in order."""
    path = directory / "order"
    return path.read_text().split() if path.exists() else []


def next_start(directory: Path, seen: int) -> str:
    """The label of the next task to start after ``seen`` starts."""
    deadline = time.monotonic() + WAIT
    while len(order := started(directory)) <= seen:
        assert time.monotonic() < deadline, f"no task started after {order}"
        time.sleep(0.02)
    return order[seen]


def open_gate(directory: Path, label: str) -> None:
    (directory / f"gate-{label}").touch()


# -- fair share ------------------------------------------------------------------------------------


def test_two_principals_tasks_start_in_turn_on_two_worker_processes(
    server: LiveServer, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    for _ in range(2):
        rq_worker(server, env=ONE_AT_A_TIME)
    flood, victim = (
        task_client(server, token=principal("flood")),
        task_client(server, token=principal("victim")),
    )
    for number in range(1, 7):
        flood.start("turn_task", {"marker_dir": str(tmp_path), "label": f"A{number}"})
    first_two = {next_start(tmp_path, 0), next_start(tmp_path, 1)}
    assert first_two == {"A1", "A2"}  # both slots taken by A's first tasks
    for number in (1, 2):
        victim.start("turn_task", {"marker_dir": str(tmp_path), "label": f"B{number}"})

    # Each freed slot goes to the next principal in turn: B's first task waits about one
    # turn, not behind A's four queued tasks (first in, first out would start A3..A6 first).
    # One slot frees at a time (the oldest running task's gate opens), so the start order
    # is the order the workers took the jobs in.
    order = started(tmp_path)
    running = list(order)
    while len(order) < 8:
        open_gate(tmp_path, running.pop(0))
        running.append(next_start(tmp_path, len(order)))
        order = started(tmp_path)
    after = order[2:]
    assert after.index("B1") <= 1, order
    assert after.index("B2") <= 3, order
    assert [label for label in after if label.startswith("A")] == ["A3", "A4", "A5", "A6"]
    for label in order:
        open_gate(tmp_path, label)


# -- quotas ----------------------------------------------------------------------------------------


def _task_rows(server: LiveServer, token_principal: str) -> int:
    rows = db_rows(
        server.database_url,
        "SELECT COUNT(*) FROM mcp_tasks_task WHERE principal_scope = %s",
        (token_principal,),
    )
    return int(rows[0][0])


def test_a_task_call_past_the_quota_is_refused_on_both_eras_and_writes_nothing(
    server: LiveServer, task_client: Any, tmp_path: Path
) -> None:
    token = principal("greedy")
    scope = f"client:client-{token.removeprefix('valid-')}:{token.removeprefix('valid-')}"
    greedy: TaskClient = task_client(server, token=token)
    arguments = {"marker_dir": str(tmp_path), "label": "held"}
    task_ids = [greedy.start("turn_task", arguments)["taskId"] for _ in range(QUOTA)]

    # The modern era: HTTP 429 with Retry-After, a JSON-RPC error naming the limit.
    body = envelope("tools/call", {"name": "turn_task", "arguments": arguments})
    response = httpx.post(
        server.mcp_url, json=body, headers=headers_for("tools/call", "turn_task", token)
    )
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) >= 1
    [message] = parse_messages(response)
    error = message["error"]
    assert error["code"] == -32029
    assert error["data"]["limit"] == "MAX_ACTIVE_TASKS" and error["data"]["max"] == QUOTA
    assert f"MAX_ACTIVE_TASKS = {QUOTA}" in error["message"]
    assert _task_rows(server, scope) == QUOTA

    # The 2025-11-25 era, same principal: the same error in the JSON-RPC answer.
    legacy = _legacy_session(server, token)
    refused = legacy.post(
        server.mcp_url,
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "turn_task", "arguments": arguments, "task": {"ttl": 60000}},
        },
    )
    [legacy_message] = parse_messages(refused)
    assert legacy_message["error"]["code"] == -32029
    assert legacy_message["error"]["data"]["limit"] == "MAX_ACTIVE_TASKS"
    assert _task_rows(server, scope) == QUOTA

    # Someone else is not affected; a finished task frees a place.
    other = task_client(server, token=principal("other"))
    assert other.start("trivial_task", {"n": 1})["status"] == "working"
    greedy.cancel(task_ids[0])
    assert greedy.start("turn_task", arguments)["status"] == "working"


def _legacy_session(server: LiveServer, token: str) -> httpx.Client:
    """An initialized 2025-11-25 session (its id in the client's headers)."""
    client = httpx.Client(
        timeout=WAIT,
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
        },
    )
    opened = client.post(
        server.mcp_url,
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}},
                "clientInfo": {"name": "quota-test", "version": "0"},
            },
        },
    )
    assert opened.status_code == 200, opened.text
    client.headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    client.headers["MCP-Protocol-Version"] = "2025-11-25"
    done = client.post(
        server.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert done.status_code == 202, done.text
    return client


# -- concurrency limits ----------------------------------------------------------------------------


def test_a_concurrency_limit_holds_across_two_workers_and_a_dead_workers_slot_comes_back(
    server: LiveServer, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    workers = [rq_worker(server, env=FAST) for _ in range(2)]
    clients = [task_client(server, token=principal(name)) for name in ("ann", "ben", "cat")]

    def start(client: TaskClient, label: str, customer: str) -> str:
        arguments = {"marker_dir": str(tmp_path), "label": label, "customer": customer}
        task_id: str = client.start("limited_task", arguments)["taskId"]
        return task_id

    first = start(clients[0], "L1", "acme")
    assert wait_for_path(tmp_path / "started-L1")
    second = start(clients[1], "L2", "acme")
    start(clients[2], "Z1", "zeta")
    assert wait_for_path(tmp_path / "started-Z1")  # another customer: its own slot
    waiting = clients[1].wait_for(
        second, lambda task: "Waiting for a free slot" in task.get("statusMessage", "")
    )
    assert waiting["status"] == "working"
    assert 'customer="acme"' in waiting["statusMessage"]
    assert not (tmp_path / "started-L2").exists()
    assert task_row(server.database_url, second)["waiting_for"] == "limit"

    # The worker holding acme's slot dies: its lease is not renewed and runs out.
    holder = int((tmp_path / "started-L1").read_text())
    [dead] = [worker for worker in workers if worker.pid == holder]
    dead.kill()
    assert wait_for_path(tmp_path / "started-L2"), "the dead worker's slot never came back"
    assert clients[0].wait_terminal(first)["status"] == "failed"  # its worker died

    # A slot given back by a task that ends goes to the next task at once.
    third = start(clients[2], "L3", "acme")
    clients[2].wait_for(third, lambda task: "Waiting for a free slot" in task["statusMessage"])
    open_gate(tmp_path, "L2")
    assert wait_for_path(tmp_path / "started-L3")
    for label in ("Z1", "L3"):
        open_gate(tmp_path, label)
    assert clients[2].wait_terminal(third)["status"] == "completed"


# -- retries ---------------------------------------------------------------------------------------


def test_a_transient_failure_is_retried_with_back_off_and_the_answer_is_replayed(
    server: LiveServer, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    rq_worker(server)
    client = task_client(server, token=principal("retry"), caps=capabilities(elicitation=True))
    task_id = client.start("flaky_task", {"marker_dir": str(tmp_path), "failures": 2})["taskId"]
    asking = client.wait_for(task_id, "input_required")
    [key] = asking["inputRequests"]
    client.update(task_id, {key: {"action": "accept", "content": {"value": True}}})

    between = client.wait_for(
        task_id, lambda task: task.get("statusMessage", "").startswith("Attempt 2 of 3 in 1 s")
    )
    assert between["status"] == "working"
    assert "ConnectionError: upstream down (attempt 1)" in between["statusMessage"]
    assert task_row(server.database_url, task_id)["waiting_for"] == "retry"
    client.wait_for(task_id, lambda task: task.get("statusMessage", "").startswith("Attempt 3"))

    done = client.wait_terminal(task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "done after 3 attempts, answer True"
    assert task_row(server.database_url, task_id)["attempt"] == 3
    questions = db_rows(
        server.database_url,
        "SELECT COUNT(*) FROM mcp_tasks_inputrequest WHERE task_id = %s",
        (task_id,),
    )
    assert questions[0][0] == 1  # asked once, replayed on the later attempts


def test_the_last_attempt_ends_the_task_as_any_failure_does(
    server: LiveServer, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    rq_worker(server)
    client = task_client(server, token=principal("doomed"), caps=capabilities(elicitation=True))
    task_id = client.start("flaky_task", {"marker_dir": str(tmp_path), "failures": 9})["taskId"]
    [key] = client.wait_for(task_id, "input_required")["inputRequests"]
    client.update(task_id, {key: {"action": "accept", "content": {"value": True}}})
    done = client.wait_terminal(task_id)
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert "internal error" in done["result"]["content"][0]["text"]
    assert len((tmp_path / "attempts").read_text().splitlines()) == 3


def test_a_tool_may_ask_for_another_attempt(
    server: LiveServer, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    rq_worker(server)
    client = task_client(server, token=principal("later"))
    task_id = client.start("not_ready_task", {"marker_dir": str(tmp_path)})["taskId"]
    done = client.wait_terminal(task_id)
    assert done["result"]["content"][0]["text"] == "ready on attempt 2"
    assert task_row(server.database_url, task_id)["attempt"] == 2


# -- Redis restarts --------------------------------------------------------------------------------


def test_fair_share_holds_after_redis_restarts_and_no_task_is_lost(
    task_server: Any, redis_process: Any, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    redis: RedisProcess = redis_process()
    server = task_server(FAST, redis=redis)
    rq_worker(server, env={**FAST, **ONE_AT_A_TIME})
    flood = task_client(server, token=principal("flood"))
    victim = task_client(server, token=principal("victim"))
    ids = [
        flood.start("turn_task", {"marker_dir": str(tmp_path), "label": f"A{n}"})["taskId"]
        for n in range(1, 5)
    ]
    assert next_start(tmp_path, 0) == "A1"
    redis.restart()  # keeps nothing: A2..A4's jobs are gone; they are queued again
    ids.append(victim.start("turn_task", {"marker_dir": str(tmp_path), "label": "B1"})["taskId"])
    order = started(tmp_path)
    while len(order) < 5:
        for label in order:
            open_gate(tmp_path, label)
        next_start(tmp_path, len(order))
        order = started(tmp_path)
    for label in order:
        open_gate(tmp_path, label)
    assert order[1:].index("B1") <= 1, order  # B waited one turn, not behind A2..A4
    assert sorted(order) == ["A1", "A2", "A3", "A4", "B1"]  # nothing lost
    for task_id in ids:
        client = victim if task_id == ids[-1] else flood
        assert client.wait_terminal(task_id)["status"] == "completed"

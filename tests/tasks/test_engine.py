"""The task engine seen from the tool: its context in the worker process, progress and logs,
cancellation under both worker classes, the encrypted snapshot, and expiry — with live
servers, real ``manage.py rqworker`` processes and a real Redis.

Most tests share the module's server and worker (``stack``, a ``TaskWorker``); those that
need processes of their own (a forking worker, a worker started late or with other
settings) start them (``own_server``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.results import task_text_of as text_of
from tests.support.worker_fixtures import (
    TASKS_EXTENSION,
    capabilities,
    db_rows,
    job_ids,
    pid_alive,
    run_manage,
    task_exists,
    task_row,
    wait_for_exit,
    wait_for_path,
)

pytestmark = [pytest.mark.live, pytest.mark.redis, pytest.mark.usefixtures("open_gates")]


@pytest.fixture
def server(stack: Any) -> Any:
    """The module's server; its worker (``module_stack.worker``) runs every task at once."""
    return stack


@pytest.fixture
def worker(module_stack: Any) -> Any:
    return module_stack.worker


@pytest.fixture
def client(server: Any, task_client: Any) -> Any:
    return task_client(server)


def probe(client: Any, **kwargs: Any) -> tuple[str, dict[str, Any]]:
    """Run ``context_probe`` as a task; returns (task id, what the tool saw)."""
    task_id = client.start("context_probe", **kwargs)["taskId"]
    task = client.wait_terminal(task_id)
    assert task["status"] == "completed", task
    return task_id, json.loads(task["result"]["content"][0]["text"])


# -- the Context a background tool gets ---------------------------------------------------------


def test_worker_context_is_a_background_task_with_the_task_id(client: Any, worker: Any) -> None:
    task_id, seen = probe(client)
    assert seen["is_background_task"] is True
    assert seen["task_id"] == task_id
    assert seen["pid"] == worker.pid  # the TaskWorker process itself ran it, no fork


def test_forking_worker_runs_the_tool_in_a_work_horse(
    own_client: Any, own_server: Any, rq_worker: Any
) -> None:
    worker = rq_worker(own_server, kind="forking")
    task_id, seen = probe(own_client)
    assert seen["task_id"] == task_id
    assert seen["pid"] not in (worker.pid, own_server.process.pid)


def test_worker_context_has_no_request_context(client: Any) -> None:
    _, seen = probe(client)
    assert seen["request_context_is_none"] is True


def test_worker_context_session_id_is_not_empty(client: Any) -> None:
    _, seen = probe(client)
    assert isinstance(seen["session_id"], str) and seen["session_id"]


@pytest.mark.parametrize("request_id", ["origin-call-42", 4242])
def test_worker_context_origin_request_id_is_the_tools_call_id(
    client: Any, request_id: Any
) -> None:
    _, seen = probe(client, request_id=request_id)
    assert seen["origin_request_id"] == request_id


def test_worker_context_lifespan_context_is_empty_without_a_lifespan(client: Any) -> None:
    _, seen = probe(client)
    assert seen["lifespan_context"] == {}


def test_worker_context_lifespan_context_comes_from_the_configured_lifespan(
    task_server: Any, task_client: Any, rq_worker: Any
) -> None:
    server = task_server({"MCP_TASKS_TEST_LIFESPAN": "tests.live_tools.task_tools.probe_lifespan"})
    rq_worker(server)
    _, seen = probe(task_client(server))
    assert seen["lifespan_context"]["db"] == "probe-db-handle"


def test_worker_context_access_token_is_the_snapshotted_token(
    server: Any, task_client: Any
) -> None:
    _, seen = probe(task_client(server, token="valid-alice"))
    assert seen["access_token"] == {
        "token": "valid-alice",
        "client_id": "client-alice",
        "subject": "alice",
    }


def test_worker_context_access_token_is_none_once_it_expired(
    own_server: Any, task_client: Any, rq_worker: Any
) -> None:
    client = task_client(own_server, token="short-2-carol")
    task_id = client.start("context_probe")["taskId"]
    time.sleep(3)  # the token expires while the task waits in the queue
    rq_worker(own_server)
    task = client.wait_terminal(task_id)
    assert json.loads(text_of(task))["access_token"] is None


def test_worker_context_never_sees_a_previous_jobs_token(server: Any, task_client: Any) -> None:
    # The module's one worker process runs both jobs.
    _first_id, first = probe(task_client(server, token="valid-alice"))
    _, second = probe(task_client(server))
    assert first["access_token"]["token"] == "valid-alice"
    assert second["pid"] == first["pid"]
    assert second["access_token"] is None


def test_worker_context_client_supports_extension_from_the_snapshotted_capabilities(
    server: Any, task_client: Any
) -> None:
    client = task_client(server, caps=capabilities(extra={"com.example/probe": {}}))
    _, seen = probe(client)
    assert seen["supports_tasks"] is True
    assert seen["supports_probe_ext"] is True
    assert seen["supports_unknown_ext"] is False


def test_worker_context_keeps_protocol_version_and_client_info(client: Any) -> None:
    _, seen = probe(client)
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["client_info"] == {"name": "task-tests", "version": "1.0"}


def test_report_progress_sets_the_progress_fields_and_status_message(
    client: Any, server: Any, tmp_path: Path
) -> None:
    task_id = client.start(
        "gated_task",
        {"marker_dir": str(tmp_path), "progress": 3, "total": 8, "message": "three of eight"},
    )["taskId"]
    task = client.wait_for(task_id, lambda t: t.get("statusMessage") == "three of eight")
    assert task["status"] == "working"
    row = task_row(server.database_url, task_id)
    assert (row["progress"], row["progress_total"]) == (3, 8)
    (tmp_path / "gate").touch()
    client.wait_terminal(task_id)


def test_tool_log_messages_are_stored_with_the_task(
    client: Any, server: Any, tmp_path: Path
) -> None:
    (tmp_path / "gate").touch()
    task_id = client.start("gated_task", {"marker_dir": str(tmp_path)}, log_level="debug")["taskId"]
    assert client.wait_terminal(task_id)["status"] == "completed"
    rows = db_rows(
        server.database_url,
        "SELECT level, logger_name, CAST(data AS TEXT) FROM mcp_tasks_tasklogentry"
        " WHERE task_id = %s ORDER BY id",
        (task_id,),
    )
    assert [(level, name, json.loads(data)) for level, name, data in rows] == [
        ("debug", "gated", "debug line"),
        ("info", "gated", {"waiting": "for the gate"}),
        ("warning", "gated", "warning line"),
    ]


# -- cancel ---------------------------------------------------------------------------------------


@pytest.mark.cancel
def test_cancel_removes_a_queued_job(
    own_client: Any, own_server: Any, rq_worker: Any, tmp_path: Path
) -> None:
    client, server = own_client, own_server  # no worker takes the job before the cancel
    task_id = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    job_id = f"mcp_tasks-{task_id}-0"
    assert job_id in job_ids(server.env["REDIS_URL"])
    client.cancel(task_id)
    assert client.get(task_id)["status"] == "cancelled"
    assert job_id not in job_ids(server.env["REDIS_URL"])
    rq_worker(server)
    client.barrier()
    assert not (tmp_path / "started").exists()
    assert client.get(task_id)["status"] == "cancelled"


@pytest.mark.cancel
def test_cancel_raises_cancelled_error_in_a_running_async_tool(client: Any, tmp_path: Path) -> None:
    task_id = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    client.cancel(task_id)
    assert wait_for_path(tmp_path / "cancelled"), "the tool never saw CancelledError"
    assert not (tmp_path / "finished").exists()
    task = client.get(task_id)
    assert task["status"] == "cancelled"
    assert "result" not in task


@pytest.mark.cancel
def test_cancel_raises_cancelled_error_in_an_async_tool_under_the_forking_worker(
    own_client: Any, own_server: Any, rq_worker: Any, tmp_path: Path
) -> None:
    client = own_client
    rq_worker(own_server, kind="forking")
    task_id = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    client.cancel(task_id)
    assert wait_for_path(tmp_path / "cancelled", timeout=15), (
        "the async tool was not given CancelledError at its next await (was its work-horse killed first?)"
    )
    assert client.get(task_id)["status"] == "cancelled"


@pytest.mark.cancel
def test_cancel_stops_a_running_sync_tool_under_the_forking_worker(
    own_client: Any, own_server: Any, rq_worker: Any, tmp_path: Path
) -> None:
    client = own_client
    worker = rq_worker(own_server, kind="forking")
    task_id = client.start("blocking_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    horse = int((tmp_path / "started").read_text())
    assert horse != worker.pid
    client.cancel(task_id)
    assert wait_for_exit(horse), "the work-horse running the sync tool was not stopped"
    assert not (tmp_path / "finished").exists()
    assert client.get(task_id)["status"] == "cancelled"
    assert worker.alive()
    client.barrier()  # the worker goes on with the next job
    assert client.get(task_id)["status"] == "cancelled"


@pytest.mark.cancel
def test_cancelling_a_finished_task_changes_nothing(client: Any) -> None:
    task_id = client.start("trivial_task", {"n": 9})["taskId"]
    before = client.wait_terminal(task_id)
    assert before["status"] == "completed"
    client.cancel(task_id)
    after = client.get(task_id)
    assert after["status"] == "completed"
    assert after["result"] == before["result"]
    assert after["lastUpdatedAt"] == before["lastUpdatedAt"]


@pytest.mark.cancel
def test_a_late_result_after_cancel_does_not_replace_cancelled(
    client: Any, server: Any, tmp_path: Path
) -> None:
    task_id = client.start("stubborn_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    client.cancel(task_id)
    assert wait_for_path(tmp_path / "returning")
    client.barrier()
    task = client.get(task_id)
    assert task["status"] == "cancelled"
    assert "result" not in task
    assert task_row(server.database_url, task_id)["result"] is None


@pytest.mark.cancel
def test_a_sync_tool_finishing_after_cancel_in_the_worker_process_leaves_it_cancelled(
    client: Any, worker: Any, tmp_path: Path
) -> None:
    task_id = client.start("blocking_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    assert int((tmp_path / "started").read_text()) == worker.pid  # runs in the worker itself
    client.cancel(task_id)
    (tmp_path / "gate").touch()
    assert wait_for_path(tmp_path / "finished")
    client.barrier()
    assert client.get(task_id)["status"] == "cancelled"
    assert pid_alive(worker.pid)


# -- the snapshot's secrets ---------------------------------------------------------------------


def test_snapshot_secrets_are_encrypted_at_rest(server: Any, task_client: Any) -> None:
    client = task_client(server, token="valid-zebra")
    task_id = client.start("context_probe", headers={"X-Request-Id": "rid-needle-4711"})["taskId"]
    rows = db_rows(
        server.database_url, "SELECT * FROM mcp_tasks_tasksnapshot WHERE task_id = %s", (task_id,)
    )
    assert len(rows) == 1
    raw = repr(rows[0])
    assert "valid-zebra" not in raw
    assert "rid-needle-4711" not in raw
    (sealed,) = db_rows(
        server.database_url,
        "SELECT sealed FROM mcp_tasks_tasksnapshot WHERE task_id = %s",
        (task_id,),
    )[0]
    assert sealed  # the secrets are there, sealed


def test_snapshot_headers_reach_the_tool(server: Any, task_client: Any) -> None:
    client = task_client(server)
    _, seen = probe(client, headers={"X-Request-Id": "rid-needle-4711"})
    assert seen["headers"].get("x-request-id") == "rid-needle-4711"


def test_rotated_secret_key_opens_the_snapshot_through_secret_key_fallbacks(
    task_server: Any, task_client: Any, rq_worker: Any
) -> None:
    server = task_server({"DJANGO_SECRET_KEY": "the-old-secret-key-" + "x" * 40})
    client = task_client(server, token="valid-alice")
    task_id = client.start("context_probe")["taskId"]
    rq_worker(
        server,
        env={
            "DJANGO_SECRET_KEY": "the-new-secret-key-" + "y" * 40,
            "MCP_TASKS_TEST_SECRET_KEY_FALLBACKS": "the-old-secret-key-" + "x" * 40,
        },
    )
    task = client.wait_terminal(task_id)
    assert task["status"] == "completed", task
    assert json.loads(text_of(task))["access_token"]["token"] == "valid-alice"


def test_undecryptable_snapshot_fails_the_task_with_a_clear_message(
    task_server: Any, task_client: Any, rq_worker: Any
) -> None:
    server = task_server({"DJANGO_SECRET_KEY": "the-old-secret-key-" + "x" * 40})
    client = task_client(server, token="valid-alice")
    task_id = client.start("context_probe")["taskId"]
    rq_worker(server, env={"DJANGO_SECRET_KEY": "an-unrelated-secret-key-" + "z" * 40})
    task = client.wait_terminal(task_id)
    assert task["status"] == "failed"
    assert "SECRET_KEY" in task["statusMessage"]
    assert "decrypt" in task["error"]["message"]


# -- expiry -----------------------------------------------------------------------------------------

#: A worker whose housekeeping (which purges expired tasks too) runs only at its start.
NO_HOUSEKEEPING = {"MCP_TASKS_TEST_MAINTENANCE_INTERVAL": "3600"}


def test_cleanup_command_purges_expired_tasks(
    own_client: Any, own_server: Any, rq_worker: Any
) -> None:
    rq_worker(own_server, env=NO_HOUSEKEEPING)  # the module's worker could purge it first
    expired_id = own_client.start("short_lived_task")["taskId"]
    kept_id = own_client.start("trivial_task", {"n": 1})["taskId"]
    own_client.wait_terminal(kept_id)
    deadline = time.monotonic() + 30
    while own_client.post("tasks/get", {"taskId": expired_id}, name=expired_id)[0] != 400:
        assert time.monotonic() < deadline, "the short-lived task never expired"
        time.sleep(0.1)
    assert task_exists(own_server.database_url, expired_id)  # expired, not yet purged
    run_manage(own_server, "mcp_tasks_cleanup")
    assert not task_exists(own_server.database_url, expired_id)
    assert db_rows(
        own_server.database_url,
        "SELECT COUNT(*) FROM mcp_tasks_tasksnapshot WHERE task_id = %s",
        (expired_id,),
    ) == [(0,)]
    assert own_client.get(kept_id)["status"] == "completed"


def test_cleanup_command_reports_the_number_of_expired_tasks_deleted(
    own_client: Any, own_server: Any, rq_worker: Any
) -> None:
    rq_worker(own_server, env=NO_HOUSEKEEPING)  # the module's worker could purge it first
    task_id = own_client.start("short_lived_task")["taskId"]
    own_client.wait_terminal(task_id)
    deadline = time.monotonic() + 30
    while own_client.post("tasks/get", {"taskId": task_id}, name=task_id)[0] != 400:
        assert time.monotonic() < deadline, "the short-lived task never expired"
        time.sleep(0.1)
    output = run_manage(own_server, "mcp_tasks_cleanup")
    assert "expired tasks deleted: 1" in output  # one task (its snapshot is not a task)


def test_tasks_extension_is_advertised_by_server_discover(client: Any) -> None:
    status, message = client.post("server/discover", {})
    assert status == 200
    assert TASKS_EXTENSION in message["result"]["capabilities"]["extensions"]

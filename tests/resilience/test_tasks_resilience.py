"""Nothing is lost when a worker dies, Redis restarts or the ASGI server restarts: real
``manage.py rqworker`` processes killed with SIGKILL, a private ``redis-server`` restarted
without persistence, daphne servers stopped and started on the same database."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.worker_fixtures import (
    job_ids,
    run_manage,
    task_row,
    wait_for_exit,
    wait_for_path,
)

pytestmark = [pytest.mark.live, pytest.mark.redis]

#: Small liveness timings (seconds) for the server, the workers and the cleanup command.
FAST_LIVENESS = {
    "MCP_TASKS_TEST_HEARTBEAT_INTERVAL": "0.2",
    "MCP_TASKS_TEST_LOST_AFTER": "2",
    "MCP_TASKS_TEST_REQUEUE_AFTER": "1",
}


# -- a worker that dies -----------------------------------------------------------------------------


def test_work_horse_killed_mid_task_fails_the_task_with_a_clear_message(
    task_server: Any, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    server = task_server()
    worker = rq_worker(server, kind="forking")
    client = task_client(server)
    task_id = client.start("gated_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    horse = int((tmp_path / "started").read_text())
    assert horse != worker.pid
    os.kill(horse, signal.SIGKILL)
    task = client.wait_terminal(task_id)
    assert task["status"] == "failed"
    assert "worker process running this task died" in task["statusMessage"]
    assert "signal 9" in task["statusMessage"]
    assert task["error"]["code"] == -32603
    assert worker.alive()
    client.barrier()


def test_worker_killed_mid_task_fails_the_task_once_its_heartbeat_is_lost(
    task_server: Any, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    server = task_server(FAST_LIVENESS)
    worker = rq_worker(server)  # the tool runs in the worker process itself
    client = task_client(server)
    task_id = client.start("gated_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    worker.kill()
    task = client.wait_terminal(task_id)  # tasks/get checks the heartbeat
    assert task["status"] == "failed"
    assert "stopped unexpectedly" in task["statusMessage"]
    assert not (tmp_path / "finished").exists()


def test_maintenance_fails_the_task_of_a_dead_worker(
    task_server: Any, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    server = task_server(FAST_LIVENESS)
    worker = rq_worker(server)
    client = task_client(server)
    task_id = client.start("gated_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    worker.kill()
    time.sleep(3)  # past TASK_LOST_AFTER, without polling the task
    output = run_manage(server, "mcp_tasks_cleanup")
    assert "stalled tasks: 1" in output
    row = task_row(server.database_url, task_id)
    assert row["status"] == "failed" and "stopped unexpectedly" in row["status_message"]


def test_whole_forking_worker_killed_mid_task_fails_the_task(
    task_server: Any, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    server = task_server(FAST_LIVENESS)
    worker = rq_worker(server, kind="forking")
    client = task_client(server)
    task_id = client.start("blocking_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    horse = int((tmp_path / "started").read_text())
    worker.kill()  # the main process first: no one is left to see the horse die
    os.kill(horse, signal.SIGKILL)
    assert wait_for_exit(horse)
    task = client.wait_terminal(task_id)
    assert task["status"] == "failed"
    assert "stopped unexpectedly" in task["statusMessage"]


# -- Redis restarted ----------------------------------------------------------------------------------


def test_queued_task_whose_job_was_lost_with_redis_is_queued_again(
    task_server: Any, task_client: Any, rq_worker: Any, redis_process: Any
) -> None:
    redis = redis_process()
    server = task_server(FAST_LIVENESS, redis=redis)
    client = task_client(server)
    task_id = client.start("trivial_task", {"n": 42})["taskId"]
    assert f"mcp_tasks-{task_id}-0" in job_ids(redis.url)
    redis.restart()
    assert job_ids(redis.url) == []
    rq_worker(server)
    task = client.wait_terminal(task_id)
    assert task["status"] == "completed"
    assert task["result"]["structuredContent"] == {"result": 42}
    assert task_row(server.database_url, task_id)["runs"] == 1


def test_maintenance_queues_again_a_job_lost_with_redis(
    task_server: Any, task_client: Any, rq_worker: Any, redis_process: Any
) -> None:
    redis = redis_process()
    server = task_server(FAST_LIVENESS, redis=redis)
    client = task_client(server)
    task_id = client.start("trivial_task", {"n": 7})["taskId"]
    redis.restart()
    time.sleep(1.5)  # past TASK_REQUEUE_AFTER, without polling the task
    output = run_manage(server, "mcp_tasks_cleanup")
    assert "stalled tasks: 1" in output
    assert f"mcp_tasks-{task_id}-1" in job_ids(redis.url)
    rq_worker(server)
    assert client.wait_terminal(task_id)["status"] == "completed"


def test_running_task_and_its_result_survive_a_redis_restart(
    task_server: Any, task_client: Any, rq_worker: Any, redis_process: Any, tmp_path: Path
) -> None:
    redis = redis_process()
    server = task_server(redis=redis)
    rq_worker(server)
    client = task_client(server)
    task_id = client.start(
        "gated_task", {"marker_dir": str(tmp_path), "message": "before the restart"}
    )["taskId"]
    assert wait_for_path(tmp_path / "started")
    redis.restart()
    (tmp_path / "gate").touch()
    task = client.wait_terminal(task_id)
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"] == "gate opened after before the restart"


def test_worker_takes_new_tasks_after_a_redis_restart(
    task_server: Any, task_client: Any, rq_worker: Any, redis_process: Any
) -> None:
    redis = redis_process()
    server = task_server(redis=redis)
    rq_worker(server)
    client = task_client(server)
    client.barrier()
    redis.restart()
    client.barrier()


def test_a_worker_running_tasks_lives_through_a_redis_outage(
    task_server: Any, task_client: Any, rq_worker: Any, redis_process: Any, tmp_path: Path
) -> None:
    """Redis down for longer than the worker's heartbeat interval while its one slot is
    taken (it beats between looks at its slots): rq's work loop would quit on the
    heartbeat's error; the worker waits for Redis instead."""
    redis = redis_process()
    server = task_server(redis=redis)
    worker = rq_worker(server, env={"MCP_TASKS_TEST_CONCURRENCY": "1"})
    client = task_client(server)
    task_id = client.start("gated_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    redis.stop()
    time.sleep(7)  # past the worker's rq heartbeat (every 5 s)
    redis.start()
    (tmp_path / "gate").touch()
    assert client.wait_terminal(task_id)["status"] == "completed"
    assert worker.alive()
    client.barrier()  # and it takes new tasks
    assert worker.alive()


# -- the ASGI server restarted --------------------------------------------------------------------


def test_task_finishes_while_the_asgi_server_restarts(
    task_server: Any, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    first = task_server(label="server before the restart")
    rq_worker(first)
    task_id = task_client(first).start(
        "gated_task", {"marker_dir": str(tmp_path), "message": "across restarts"}
    )["taskId"]
    assert wait_for_path(tmp_path / "started")
    first.stop()
    (tmp_path / "gate").touch()
    assert wait_for_path(tmp_path / "finished")
    second = task_server(
        database_url=first.database_url,
        prefix=first.env["REDIS_PREFIX"],
        label="server after the restart",
    )
    task = task_client(second).wait_terminal(task_id)
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["text"] == "gate opened after across restarts"


def test_new_server_process_serves_a_task_created_by_the_old_one(
    task_server: Any, task_client: Any, rq_worker: Any
) -> None:
    first = task_server(label="server before the restart")
    task_id = task_client(first).start("trivial_task", {"n": 11})["taskId"]
    first.stop()
    second = task_server(
        database_url=first.database_url,
        prefix=first.env["REDIS_PREFIX"],
        label="server after the restart",
    )
    rq_worker(second)
    task = task_client(second).wait_terminal(task_id)
    assert task["status"] == "completed"
    assert task["result"]["structuredContent"] == {"result": 11}

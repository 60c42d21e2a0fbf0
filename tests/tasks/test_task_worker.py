"""The concurrent ``TaskWorker``: many task jobs at once in one process, with real
``manage.py rqworker`` processes, a live server and a private Redis.

What must hold: jobs run side by side without a process each; a blocking sync tool or a
crashing one does not hold up the others; cancel reaches async tools at once and sync
tools at their next ``Context`` call; a job past its timeout fails and frees its slot; a
worker that dies fails every task it was running; shutdown is warm, then cold; rq's
registries show what runs.

Most tests share the module's server and worker (``stack``); those that stop or kill a
worker, or run a pool of them, start their own (``own_server``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from rq.registry import StartedJobRegistry

from tests.conftest import ROOT
from tests.support.worker_fixtures import (
    QUEUE,
    wait_for_exit,
    wait_for_path,
)

pytestmark = [pytest.mark.live, pytest.mark.redis, pytest.mark.usefixtures("open_gates")]

#: Fast liveness for the tests that kill a worker (seconds, as strings for the env).
FAST_LIVENESS = {
    "MCP_TASKS_TEST_HEARTBEAT_INTERVAL": "0.2",
    "MCP_TASKS_TEST_LOST_AFTER": "2",
    "MCP_TASKS_TEST_REQUEUE_AFTER": "1",
}


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


def trivial(client: Any, n: int = 0) -> dict[str, Any]:
    """Run ``trivial_task`` to its end (a task that does nothing else)."""
    task_id = client.start("trivial_task", {"n": n})["taskId"]
    task: dict[str, Any] = client.wait_terminal(task_id)
    return task


def started(directories: list[Path]) -> bool:
    return all(wait_for_path(directory / "started") for directory in directories)


def test_one_worker_process_runs_many_tasks_at_once(
    client: Any, worker: Any, tmp_path: Path
) -> None:
    directories = [tmp_path / f"task-{number}" for number in range(5)]
    task_ids = []
    for directory in directories:
        directory.mkdir()
        task_ids.append(client.start("async_wait_task", {"marker_dir": str(directory)})["taskId"])
    # All five wait for their gate at the same time, in the worker process itself.
    assert started(directories)
    assert {int((directory / "started").read_text()) for directory in directories} == {worker.pid}
    for directory in directories:
        (directory / "gate").touch()
    for task_id in task_ids:
        assert client.wait_terminal(task_id)["status"] == "completed"


def test_a_blocking_sync_tool_does_not_stall_the_other_tasks(client: Any, tmp_path: Path) -> None:
    blocking = client.start("blocking_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    # The sync tool holds a thread of the pool, not the event loop: others go on.
    assert trivial(client, 7)["status"] == "completed"
    assert client.get(blocking)["status"] == "working"
    (tmp_path / "gate").touch()
    assert client.wait_terminal(blocking)["status"] == "completed"


def test_a_crashing_tool_does_not_disturb_the_other_tasks(
    client: Any, worker: Any, tmp_path: Path
) -> None:
    waiting = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    crashed = client.wait_terminal(client.start("raising_task")["taskId"])
    assert crashed["status"] == "completed" and crashed["result"]["isError"] is True
    assert client.get(waiting)["status"] == "working"
    (tmp_path / "gate").touch()
    assert client.wait_terminal(waiting)["status"] == "completed"
    assert worker.alive()


@pytest.mark.cancel
def test_cancel_gives_a_running_async_tool_cancelled_error_at_once(
    client: Any, tmp_path: Path
) -> None:
    task_id = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    client.cancel(task_id)
    assert wait_for_path(tmp_path / "cancelled"), "the tool never saw CancelledError"
    assert not (tmp_path / "finished").exists()
    assert client.get(task_id)["status"] == "cancelled"


@pytest.mark.cancel
def test_cancel_stops_a_sync_tool_at_its_next_context_call(client: Any, tmp_path: Path) -> None:
    task_id = client.start("cooperative_sync_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    client.cancel(task_id)
    assert wait_for_path(tmp_path / "stopped"), "ctx.is_cancelled never turned true"
    assert not (tmp_path / "finished").exists()
    assert client.get(task_id)["status"] == "cancelled"
    assert trivial(client)["status"] == "completed"  # the worker goes on


@pytest.mark.cancel
def test_a_task_past_its_timeout_fails_and_its_tool_is_cancelled(
    client: Any, tmp_path: Path
) -> None:
    task_id = client.start("overrunning_task", {"marker_dir": str(tmp_path)})["taskId"]
    task = client.wait_terminal(task_id)
    assert task["status"] == "failed"
    assert task["statusMessage"] == "The task timed out after 1 s"
    assert task["error"]["code"] == -32603
    assert wait_for_path(tmp_path / "cancelled")
    assert not (tmp_path / "finished").exists()
    assert trivial(client)["status"] == "completed"


def test_a_job_delivered_twice_runs_its_tool_once(server: Any, client: Any, tmp_path: Path) -> None:
    """A Redis failover can lose the record of a job's start: the job waits on the new
    master again and a worker takes it while the first run goes on. The second job finds
    the task held and ends: the tool runs once (not a second time beside the first, to be
    cancelled when the first ends)."""
    import asyncio

    from tests.support.task_driver import django_shell

    arguments = {"marker_dir": str(tmp_path), "key": "twice", "seconds": 6.0}
    task_id = client.start("failover_task", arguments)["taskId"]
    client.wait_for(task_id, lambda task: task.get("statusMessage") == "Working")
    asyncio.run(
        django_shell(
            server,
            """
            from mcp_tasks.models import Task
            from mcp_tasks.tasks.queues import queue
            task = Task.objects.get(pk=task_id)
            assert task.status == "working" and task.heartbeat_at is not None  # still running
            queue.enqueue(task)  # the same job, waiting again
            result = None
            """,
            task_id=task_id,
        )
    )
    task = client.wait_terminal(task_id)
    assert task["status"] == "completed"
    assert trivial(client)["status"] == "completed"  # the second job has been taken
    assert len(list(tmp_path.glob("start-twice-*"))) == 1
    assert len(list(tmp_path.glob("done-twice-*"))) == 1


def test_a_killed_worker_fails_every_task_it_was_running(
    task_server: Any, task_client: Any, rq_worker: Any, tmp_path: Path
) -> None:
    server = task_server(FAST_LIVENESS)
    client = task_client(server)
    worker = rq_worker(server)
    directories = [tmp_path / f"task-{number}" for number in range(3)]
    task_ids = []
    for directory in directories:
        directory.mkdir()
        task_ids.append(client.start("gated_task", {"marker_dir": str(directory)})["taskId"])
    assert started(directories)
    worker.kill()
    for task_id in task_ids:
        task = client.wait_terminal(task_id)  # tasks/get checks the heartbeat
        assert task["status"] == "failed"
        assert "stopped unexpectedly" in task["statusMessage"]
    assert not any((directory / "finished").exists() for directory in directories)


def test_warm_shutdown_lets_the_running_tasks_finish(
    own_client: Any, own_server: Any, rq_worker: Any, tmp_path: Path
) -> None:
    client = own_client
    worker = rq_worker(own_server)
    task_id = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    worker.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert worker.alive()  # waiting for the running task
    (tmp_path / "gate").touch()
    assert client.wait_terminal(task_id)["status"] == "completed"
    assert worker.process.wait(timeout=30) == 0


def test_cold_shutdown_fails_the_running_tasks_with_a_clear_message(
    own_client: Any, own_server: Any, rq_worker: Any, tmp_path: Path
) -> None:
    client = own_client
    worker = rq_worker(own_server)
    task_id = client.start("async_wait_task", {"marker_dir": str(tmp_path)})["taskId"]
    assert wait_for_path(tmp_path / "started")
    worker.process.send_signal(signal.SIGTERM)
    time.sleep(1.5)  # a second signal within a second counts as the same one
    worker.process.send_signal(signal.SIGTERM)
    assert wait_for_exit(worker.pid)
    task = client.get(task_id)
    assert task["status"] == "failed"
    assert task["statusMessage"] == "The worker running this task was stopped (cold shutdown)"
    assert wait_for_path(tmp_path / "cancelled")


def test_rq_started_registry_shows_the_running_jobs(
    client: Any, server: Any, tmp_path: Path
) -> None:
    connection = redis.Redis.from_url(server.env["REDIS_URL"])
    task_ids = []
    for number in range(2):
        directory = tmp_path / f"task-{number}"
        directory.mkdir()
        task_ids.append(client.start("async_wait_task", {"marker_dir": str(directory)})["taskId"])
        assert wait_for_path(directory / "started")
    ours = {f"mcp_tasks-{task_id}-0" for task_id in task_ids}
    # (The module's Redis may hold jobs of other tests too.)
    running = set(StartedJobRegistry(QUEUE, connection=connection).get_job_ids())
    assert ours <= running
    for number in range(2):
        (tmp_path / f"task-{number}" / "gate").touch()
    for task_id in task_ids:
        assert client.wait_terminal(task_id)["status"] == "completed"
    deadline = time.monotonic() + 10
    while ours & set(StartedJobRegistry(QUEUE, connection=connection).get_job_ids()):
        assert time.monotonic() < deadline, "finished jobs stayed in the started registry"
        time.sleep(0.05)
    # result_ttl=0: a finished task job leaves nothing in rq (the task row has the result).
    assert not connection.exists(*(f"rq:job:mcp_tasks-{task_id}-0" for task_id in task_ids))


def test_rqworker_pool_runs_task_jobs(own_client: Any, own_server: Any, tmp_path: Path) -> None:
    client, server = own_client, own_server  # the pool's workers alone take its jobs
    log = (tmp_path / "pool.log").open("wb")
    pool = subprocess.Popen(
        [sys.executable, "manage.py", "rqworker-pool", QUEUE, "--num-workers", "2"],
        cwd=ROOT,
        env=server.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        task_ids = [client.start("trivial_task", {"n": n})["taskId"] for n in range(6)]
        for n, task_id in enumerate(task_ids):
            task = client.wait_terminal(task_id)
            assert task["status"] == "completed"
            assert task["result"]["structuredContent"] == {"result": n}
    finally:
        pool.send_signal(signal.SIGTERM)
        try:
            pool.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pool.kill()
        log.close()


def test_the_workers_event_loop_is_uvloops_when_it_is_installed() -> None:
    """uvloop (the ``uvicorn`` extra) runs the worker's loop: psycopg's and redis-py's waits
    and the hand-overs from the dequeuing thread cost less on it (worker CPU per task about
    6% lower, A/B with two workers); without it, asyncio's own loop."""
    import uvloop

    from mcp_tasks.tasks.worker.loop_thread import new_event_loop

    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()

"""``/metrics`` of a live server whose tasks ran on two ``manage.py rqworker`` processes:
the server and both workers share ``PROMETHEUS_MULTIPROC_DIR`` (the example project then
turns ``MCP_TASKS["METRICS"]`` on), and one scrape of the server finds every process's
counts: the tasks the server created, the tasks each worker ran and ended, their queue
waits and run times, the requests the server answered, and the workers' slots."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import LiveServer
from tests.support.worker_fixtures import WAIT, db_rows, wait_for_path

pytestmark = [pytest.mark.live, pytest.mark.redis]

#: Tasks the test runs; each worker runs one at a time, so the first two run one on each.
TASKS = 6
TOOL = "turn_task"


def scrape(server: LiveServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics``: (name, sorted labels) → value."""
    response = httpx.get(f"{server.url}/metrics", timeout=WAIT)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_one_scrape_finds_the_counts_of_the_server_and_of_two_worker_processes(
    task_server: Any, rq_worker: Any, task_client: Any, tmp_path: Path
) -> None:
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    server = task_server({"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)})
    workers = [rq_worker(server, env={"MCP_TASKS_TEST_CONCURRENCY": "1"}) for _ in range(2)]
    client = task_client(server)
    gates = tmp_path / "gates"
    gates.mkdir()

    task_ids = [
        client.start(TOOL, {"marker_dir": str(gates), "label": f"t{n}"})["taskId"]
        for n in range(TASKS)
    ]
    # One slot each: the first two tasks run at once, one on each worker.
    assert wait_for_path(gates / "started-t0") and wait_for_path(gates / "started-t1")
    runners = {int((gates / f"started-t{n}").read_text()) for n in (0, 1)}
    assert runners == {worker.pid for worker in workers}
    while_running = scrape(server)
    assert value(while_running, "mcp_tasks_worker_slots") == 2
    assert value(while_running, "mcp_tasks_worker_slots_busy") == 2
    assert value(while_running, "mcp_tasks_tasks_active", status="working") == TASKS
    for n in range(TASKS):
        (gates / f"gate-t{n}").touch()
    for task_id in task_ids:
        assert client.wait_terminal(task_id)["status"] == "completed"
    ran_on = db_rows(
        server.database_url,
        "SELECT DISTINCT worker_name FROM mcp_tasks_task WHERE tool_name = %s",
        (TOOL,),
    )
    assert {int(name.split(":")[1]) for (name,) in ran_on} == {w.pid for w in workers}

    # A worker counts a task's end just after it commits it: wait for the last few.
    deadline = time.monotonic() + WAIT
    samples = scrape(server)
    finished = {"tool": TOOL, "status": "completed"}
    while value(samples, "mcp_tasks_tasks_finished_total", **finished) < TASKS:
        assert time.monotonic() < deadline, samples
        time.sleep(0.05)
        samples = scrape(server)

    assert value(samples, "mcp_tasks_tasks_created_total", tool=TOOL) == TASKS
    assert value(samples, "mcp_tasks_tasks_finished_total", **finished) == TASKS
    assert value(samples, "mcp_tasks_task_queue_wait_seconds_count", tool=TOOL) == TASKS
    assert value(samples, "mcp_tasks_task_run_seconds_count", **finished) == TASKS
    assert value(samples, "mcp_tasks_task_run_seconds_sum", **finished) > 0
    assert value(samples, "mcp_tasks_request_duration_seconds_count", method="tools/call") >= TASKS
    assert value(samples, "mcp_tasks_request_duration_seconds_count", method="tasks/get") >= TASKS
    assert value(samples, "mcp_tasks_worker_slots_busy") == 0
    assert value(samples, "mcp_tasks_tasks_active", status="working") == 0
    # Each process wrote its own files in the shared directory: the server's and two workers'.
    writers = {path.stem.rsplit("_", 1)[1] for path in metrics_dir.glob("*.db")}
    assert {str(worker.pid) for worker in workers} <= writers and len(writers) >= 3

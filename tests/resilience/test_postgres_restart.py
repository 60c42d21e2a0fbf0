"""PostgreSQL restarts under load, and its primary is replaced at the same address: a
cluster of the test's own (``initdb`` in a temporary folder, on a loopback port), an ASGI
server (uvicorn) and two task workers on it, and clients that start, follow and answer
tasks while the server is stopped and started again (a clean fast shutdown, a crash), or
its synchronous standby is promoted and takes its address.

What must hold: the processes reconnect on their own (none is restarted), every request
is answered (an error is an answer), no task is stuck or runs twice to completion, every
task the clients were told of ends (completed, or failed with its reason). The figures are
printed (``-s``) and, with ``MCP_TASKS_TEST_FAILOVER_REPORT=<file>``, appended to it.
``MCP_TASKS_TEST_FAILOVER=long``: more clients, longer load, each fault three times.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, LiveServer, _server_env, launch_server, service_missing
from tests.support.failover import (
    LONG,
    Load,
    PostgresCluster,
    audit,
    postgres_unavailable,
    report,
)
from tests.support.live import LIVE_SETTINGS
from tests.support.worker_fixtures import RqWorker, start_rq_worker

pytestmark = [pytest.mark.live, pytest.mark.redis, pytest.mark.failover]

TIMINGS = {
    "MCP_TASKS_TEST_HEARTBEAT_INTERVAL": "0.5",
    "MCP_TASKS_TEST_LOST_AFTER": "10",
    "MCP_TASKS_TEST_REQUEUE_AFTER": "3",
    "MCP_TASKS_TEST_MAINTENANCE_INTERVAL": "2",
    "MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "1",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    why = postgres_unavailable()
    if why is not None:
        service_missing("A PostgreSQL cluster of the test's own", why)
    cluster = PostgresCluster()
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def pg_stack(
    cluster: PostgresCluster, stack_redis: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, list[RqWorker]]]:
    """An ASGI server (uvicorn) and two task workers on the module's cluster and Redis,
    shared by the module's tests (each counts the tasks it made, by their creation time)."""
    database = cluster.create_database(f"mcp_{uuid.uuid4().hex[:8]}")
    env = {
        "DATABASE_URL": database,
        **LIVE_SETTINGS,
        "REDIS_URL": stack_redis.url,
        "REDIS_PREFIX": f"pg_{uuid.uuid4().hex[:10]}",
        **TIMINGS,
    }
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=_server_env(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    logs = tmp_path_factory.mktemp("pg-stack")
    server = launch_server(env, logs / "server.log", label="server", server="uvicorn")
    workers: list[RqWorker] = []
    try:
        for number in (1, 2):
            workers.append(
                start_rq_worker(
                    server.env, logs / f"worker-{number}.log", label=f"rq worker {number}"
                )
            )
        for worker in workers:
            worker.wait_ready(stack_redis.url)
        yield server, workers
    finally:
        for worker in workers:
            worker.stop()
        server.stop()


@pytest.fixture
def stack(
    request: pytest.FixtureRequest,
    pg_stack: tuple[LiveServer, list[RqWorker]],
    cluster: PostgresCluster,
) -> tuple[LiveServer, list[RqWorker]]:
    """The module's stack; its and the cluster's output go to a failed test's report."""
    from tests.conftest import _SERVERS

    server, workers = pg_stack
    request.node.stash.setdefault(_SERVERS, []).extend([server, cluster, *workers])
    return pg_stack


def _under_load(
    server: LiveServer,
    workers: list[RqWorker],
    markers: Path,
    title: str,
    fault: Callable[[], None],
    prepare: Callable[[], None] | None = None,
) -> None:
    markers.mkdir()
    since = datetime.now(UTC)
    load = Load(server.url, markers, clients=8 if LONG else 4)
    load.park(4 if LONG else 2)
    load.start()
    began = time.monotonic()
    for number in range(3 if LONG else 1):
        if number:
            load.park(2)  # questions waiting across this fault too
        if prepare is not None:
            prepare()  # under load, before the fault
        time.sleep(8 if LONG else 3)
        fault()
        time.sleep(1)
        load.answer_parked()
        time.sleep(8 if LONG else 3)
    load.stop()
    ended = time.monotonic()
    assert all(worker.alive() for worker in workers), "a worker exited"
    assert server.process.poll() is None, "the server exited"
    result = audit(server.database_url, load, settle=40, since=since)
    outage = {
        "task creation": load.longest_gap("create", began, ended),
        "tasks/get": load.longest_gap("get", began, ended),
    }
    report(title, load, result, outage)

    assert load.unanswered() == []
    # No task lost its result or failed with the restart: the workers' writes waited for it.
    assert result.failures == {}
    assert result.stuck == []
    assert result.runs_twice == []
    assert result.started_twice == []
    assert set(load.created) <= result.ids
    assert result.statuses["completed"] > 0


def test_a_restart_under_load(
    stack: tuple[LiveServer, list[RqWorker]], cluster: PostgresCluster, tmp_path: Path
) -> None:
    server, workers = stack
    _under_load(
        server,
        workers,
        tmp_path / "markers",
        "PostgreSQL: fast shutdown, started again after 1 s",
        lambda: cluster.restart("fast", down_for=1.0),
    )


def test_a_crash_under_load(
    stack: tuple[LiveServer, list[RqWorker]], cluster: PostgresCluster, tmp_path: Path
) -> None:
    server, workers = stack
    _under_load(
        server,
        workers,
        tmp_path / "markers",
        "PostgreSQL: postmaster SIGKILLed, started again (crash recovery)",
        lambda: cluster.restart("kill"),
    )


def test_a_primary_replaced_at_the_same_address_under_load(
    stack: tuple[LiveServer, list[RqWorker]], cluster: PostgresCluster, tmp_path: Path
) -> None:
    server, workers = stack

    _under_load(
        server,
        workers,
        tmp_path / "markers",
        "PostgreSQL: primary SIGKILLed, its synchronous standby promoted at its address",
        cluster.replace_primary,
        prepare=cluster.add_standby,
    )

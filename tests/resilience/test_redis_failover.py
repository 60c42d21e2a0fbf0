"""Redis fails over under load: a primary, a replica and three Sentinels of the test's own;
an ASGI server (uvicorn) and two task workers configured for Sentinel (the example
project's ``REDIS_SENTINELS``: django-rq's ``SENTINELS`` for the queue, channels_redis'
``sentinels`` for the channel layer); clients start, follow and answer tasks while the
primary is SIGKILLed and the Sentinels promote the replica.

What must hold: every request is answered (an error is an answer), no task is stuck or
runs twice to completion, every task the clients were told of ends. The figures (tasks,
failures and their reasons, errors, the longest outage) are printed (``-s``) and, with
``MCP_TASKS_TEST_FAILOVER_REPORT=<file>``, appended to that file.
``MCP_TASKS_TEST_FAILOVER=long``: more clients, longer load, three failovers in a row.
"""

from __future__ import annotations

import functools
import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LiveServer, launch_server, service_missing
from tests.support.failover import LONG, Load, SentinelSet, audit, report
from tests.support.live import LIVE_SETTINGS
from tests.support.worker_fixtures import RqWorker, start_rq_worker

pytestmark = [pytest.mark.live, pytest.mark.failover]

#: Liveness timings of the stack (seconds): a lost job is queued again within a few.
TIMINGS = {
    "MCP_TASKS_TEST_HEARTBEAT_INTERVAL": "0.5",
    "MCP_TASKS_TEST_LOST_AFTER": "10",
    "MCP_TASKS_TEST_REQUEUE_AFTER": "3",
    "MCP_TASKS_TEST_MAINTENANCE_INTERVAL": "2",
    "MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "1",
    # Few slots: a burst of tasks waits in the queue, where a failover can lose it.
    "MCP_TASKS_TEST_CONCURRENCY": "4",
}


@pytest.fixture(scope="module")
def sentinels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelSet]:
    if shutil.which("redis-server") is None:
        service_missing("Redis with Sentinels of the test's own", "redis-server is not installed")
    topology = SentinelSet(tmp_path_factory.mktemp("sentinels"))
    try:
        topology.start()
        yield topology
    finally:
        topology.stop()


@pytest.fixture
def stack(
    request: pytest.FixtureRequest,
    sentinels: SentinelSet,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LiveServer, list[RqWorker]]]:
    from tests.conftest import _SERVERS

    databases = request.getfixturevalue("_live_databases")
    logs = tmp_path_factory.mktemp("failover-stack")
    env = {
        "DATABASE_URL": databases.new(),
        **LIVE_SETTINGS,
        **sentinels.env(),
        "REDIS_PREFIX": f"fo_{uuid.uuid4().hex[:10]}",
        **TIMINGS,
    }
    server = launch_server(env, logs / "server.log", label="server", server="uvicorn")
    workers: list[RqWorker] = []
    reported: list[Any] = request.node.stash.setdefault(_SERVERS, [])
    reported += [server, sentinels]
    try:
        master = f"redis://127.0.0.1:{sentinels.master()}/0"
        for number in (1, 2):
            worker = start_rq_worker(
                server.env, logs / f"worker-{number}.log", label=f"rq worker {number}"
            )
            workers.append(worker)
            reported.append(worker)
        for worker in workers:
            worker.wait_ready(master)
        yield server, workers
    finally:
        for worker in workers:
            worker.stop()
        server.stop()


def test_every_redis_client_of_mcp_tasks_follows_the_sentinels(
    sentinels: SentinelSet, settings: Any
) -> None:
    """The clients built from the settings (django-rq's for the queue, the queue's async
    sender, the process bus's client of the channel layer's Redis) and the channel layer
    itself reach the master the Sentinels name, and the new one after a failover."""
    import asyncio

    from channels.layers import get_channel_layer

    from mcp_tasks.core import redis_clients

    host = {"sentinels": sentinels.sentinels, "master_name": sentinels.master_name}
    settings.RQ_QUEUES = {
        "mcp_tasks": {"SENTINELS": sentinels.sentinels, "MASTER_NAME": sentinels.master_name}
    }
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [host], "prefix": f"clients_{uuid.uuid4().hex[:6]}"},
        }
    }
    settings.MCP_TASKS = {"REDIS_FAILOVER_WAIT": 15.0}

    def where_the_keys_are() -> dict[str, int]:
        """For each key written, the port of the data node that has it."""
        found = {}
        for port, node in sentinels.data.items():
            if node.process is None:
                continue
            client = node.client()
            try:
                for key in client.scan_iter("clients-*"):
                    found[key.decode()] = port
            finally:
                client.close()
        return found

    async def write_through_each(label: str) -> None:
        queue_async = redis_clients.queue_async_client("mcp_tasks")
        bus = redis_clients.layer_async_client("default")
        assert queue_async is not None and bus is not None
        try:
            for name, client in (("queue-async", queue_async), ("bus", bus)):
                await redis_clients.riding_out(
                    functools.partial(client.set, f"clients-{name}-{label}", 1)
                )
        finally:
            await queue_async.aclose()
            await bus.aclose()

    async def hears(layer: Any, channel: str) -> str:
        """A message sent to ``channel`` arrives. Pub/sub keeps nothing for a subscriber
        that is not connected (while its reader reconnects after a failover): send again
        until one arrives (the read is never cancelled, which would unsubscribe it)."""
        receiving = asyncio.ensure_future(layer.receive(channel))
        deadline = time.monotonic() + 15
        while not receiving.done() and time.monotonic() < deadline:
            await redis_clients.riding_out(lambda: layer.send(channel, {"type": "hello"}))
            await asyncio.wait({receiving}, timeout=0.5)
        assert receiving.done(), f"nothing arrived on {channel} for 15 s"
        return str(receiving.result()["type"])

    def sync_write(label: str) -> None:
        """The sync client's next command goes to the new master (it fails while none)."""
        deadline = time.monotonic() + 15
        while True:
            try:
                sync.set(f"clients-sync-{label}", 1)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    async def scenario() -> tuple[int, int]:
        layer = get_channel_layer()
        try:
            early = await layer.new_channel()  # subscribed before the failover
            assert await hears(layer, early) == "hello"
            await write_through_each("before")
            first = sentinels.master()
            loop = asyncio.get_running_loop()
            old = await loop.run_in_executor(None, sentinels.kill_master)
            second = await loop.run_in_executor(None, sentinels.wait_for_new_master, old)
            await write_through_each("after")
            assert await hears(layer, early) == "hello"  # its subscription came back
            assert await hears(layer, await layer.new_channel()) == "hello"
            await loop.run_in_executor(None, sync_write, "after")
            return first, second
        finally:
            await layer.flush()

    sync = redis_clients.queue_client("mcp_tasks")
    sync.set("clients-sync-before", 1)
    first, second = asyncio.run(scenario())
    old = first
    keys = where_the_keys_are()
    assert keys["clients-queue-async-after"] == keys["clients-bus-after"] == second
    assert keys["clients-sync-after"] == second != first
    sentinels.restart(old)
    sentinels.wait_until_healthy(second)  # a replica again, for the next test's failover


def test_a_failover_under_load_loses_no_task_and_leaves_no_request_unanswered(
    stack: tuple[LiveServer, list[RqWorker]], sentinels: SentinelSet, tmp_path: Path
) -> None:
    server, workers = stack
    markers = tmp_path / "markers"
    markers.mkdir()
    since = datetime.now(UTC)
    load = Load(server.url, markers, clients=8 if LONG else 4)
    load.park(4 if LONG else 2)
    load.start()
    began = time.monotonic()
    failovers: list[float] = []
    cycles = 3 if LONG else 1
    for number in range(cycles):
        if number:
            load.park(2)  # questions waiting across this fault too
        time.sleep(10 if LONG else 3)
        killed_at = time.monotonic()
        if number % 2 == 0:
            # The replica falls behind first: what the master takes meanwhile (new jobs, a
            # burst of them waiting for a slot; jobs taken by a worker) is lost with it.
            old = sentinels.kill_master_ahead_of_its_replica(
                behind=0.6, meanwhile=lambda: load.burst(12, seconds=1.5)
            )
        else:
            old = sentinels.kill_master()
        sentinels.wait_for_new_master(old)
        failovers.append(time.monotonic() - killed_at)
        time.sleep(2)
        load.answer_parked()
        time.sleep(8 if LONG else 4)
        sentinels.restart(old)  # back as a replica of the new master
        if number + 1 < cycles:  # the Sentinels must know it before the next failover
            sentinels.wait_until_healthy(sentinels.master())
    time.sleep(3)
    load.stop()
    ended = time.monotonic()
    assert all(worker.alive() for worker in workers)
    result = audit(server.database_url, load, settle=30, since=since)
    outage = {
        "sentinels' failover": max(failovers),
        "task creation": load.longest_gap("create", began, ended),
        "tasks/get": load.longest_gap("get", began, ended),
    }
    report("Redis: primary SIGKILLed, replica promoted", load, result, outage)

    assert load.unanswered() == []
    # A job that could not be queued within REDIS_FAILOVER_WAIT fails its task, and its
    # client was told; nothing else fails.
    assert set(result.failures) <= {"The task could not be queued"}
    assert result.stuck == []
    assert result.runs_twice == []
    assert result.started_twice == []
    assert set(load.created) <= result.ids
    assert result.statuses["completed"] > 0

"""A task's job queued from the event loop (``mcp_tasks.tasks.queues.loop_redis``) is what rq's
own enqueue writes, on the real Redis, over an async client made from the queue's
``RQ_QUEUES`` entry; where none can be made (embedded mode's fake Redis), the job is queued
from a thread. A Redis that is unreachable for a while (restarting) is waited for, up to
``REDIS_FAILOVER_WAIT``."""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
from rq import Queue

from mcp_tasks.core import redis_clients
from mcp_tasks.models import Task
from mcp_tasks.tasks.queues import fair_queue, loop_redis, queue
from tests.support.worker_fixtures import free_port

pytestmark = pytest.mark.redis

TIME = re.compile(rb"^\d{4}-\d\d-\d\dT[\d:.]+Z?$")


def configure(settings: Any, name: str, url: str) -> Queue:
    """``RQ_QUEUES[name]`` on ``url`` (the queues and the loops' clients follow the
    setting); its queue, as ``queue.get_queue`` gives it."""
    settings.RQ_QUEUES = {**settings.RQ_QUEUES, name: {"URL": url}}
    return queue.get_queue(name)


@pytest.fixture
def task_queue(redis_url: str, settings: Any) -> Iterator[Queue]:
    """A queue of its own on the real Redis, as ``queue.get_queue`` gives it."""
    own = configure(settings, f"loop-redis-{secrets.token_hex(4)}", redis_url)
    connection = own.connection
    yield own
    loop_redis.forget_clients()
    for key in connection.scan_iter(match=f"*{own.name}*"):
        connection.delete(key)
    connection.srem(own.redis_queues_keys, own.key)


def a_task(queue_name: str) -> Task:
    task_id = secrets.token_urlsafe(32)
    return Task(id=task_id, tool_name="trivial_task", queue=queue_name, job_timeout=600, runs=0)


def job_hash(connection: redis.Redis, task: Task) -> dict[bytes, bytes]:
    """The job's hash, its id and times replaced by placeholders."""
    stored: dict[bytes, bytes] = connection.hgetall(f"rq:job:{task.job_id}")  # type: ignore[assignment]
    assert stored, f"no job for task {task.id}"
    return {
        key: b"<time>"
        if TIME.match(value)
        else value.replace(task.id.encode(), b"<task>").replace(task.id[:8].encode(), b"<task>")
        for key, value in stored.items()
        if key != b"data"  # pickled arguments: compared through the job below
    }


def test_a_job_queued_from_the_loop_is_the_one_rq_queues(task_queue: Queue) -> None:
    by_rq, by_loop = a_task(task_queue.name), a_task(task_queue.name)
    queue.enqueue(by_rq)
    asyncio.run(loop_redis.aenqueue(by_loop))

    connection = task_queue.connection
    assert job_hash(connection, by_loop) == job_hash(connection, by_rq)
    assert job_hash(connection, by_rq)[b"status"] == b"queued"
    assert fair_queue.job_ids(task_queue.connection, task_queue.name) == [
        by_rq.job_id,
        by_loop.job_id,
    ]
    assert task_queue.key.encode() in connection.smembers(task_queue.redis_queues_keys)
    job = task_queue.fetch_job(by_loop.job_id)
    assert job is not None and job.args == (by_loop.id, 0) and job.func_name == queue.JOB_FUNCTION
    assert job.timeout == 600 and job.result_ttl == 0
    assert queue.job_exists(by_loop)


def test_staging_a_job_sends_nothing(task_queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    task_queue.get_redis_server_version()  # known once the queue's first job went out
    sent: list[Any] = []
    with monkeypatch.context() as patched:
        patched.setattr(task_queue.connection, "execute_command", lambda *a, **k: sent.append(a))
        commands = queue.stage_enqueue(a_task(task_queue.name))
    assert sent == []
    # rq's own writes of the job, its push to rq's list replaced by the fair queue's.
    assert [args[0] for args, _ in commands][-1] == "EVALSHA"
    assert not any(args[0] in ("RPUSH", "LPUSH") for args, _ in commands)
    assert any(args[:2] == ("SADD", task_queue.redis_queues_keys) for args, _ in commands)


def test_unreachable_redis_raises_once_the_wait_is_over(settings: Any) -> None:
    settings.MCP_TASKS = {"REDIS_FAILOVER_WAIT": 0.3}
    closed = configure(settings, "loop-redis-nowhere", f"redis://127.0.0.1:{free_port()}/0")
    closed.redis_server_version = (7, 0, 0)  # as if it had answered before
    started = time.monotonic()
    with pytest.raises(redis.exceptions.ConnectionError):
        asyncio.run(loop_redis.aenqueue(a_task(closed.name)))
    assert time.monotonic() - started >= 0.3  # tried again until the wait was over
    loop_redis.forget_clients()


def test_the_async_client_talks_to_the_queues_database_with_its_name(
    redis_url: str, settings: Any
) -> None:
    url = redis_url.rsplit("/", 1)[0] + "/14?client_name=mcp-tasks-twin"
    configure(settings, "loop-redis-named", url)
    client = redis_clients.queue_async_client("loop-redis-named")
    assert client is not None
    connection = redis.Redis.from_url(url)

    async def written() -> Any:
        try:
            await client.set("loop-redis-twin", "here")
            return await client.client_getname()
        finally:
            await client.aclose()

    try:
        assert asyncio.run(written()) in ("mcp-tasks-twin", b"mcp-tasks-twin")
        assert connection.get("loop-redis-twin") == b"here"
    finally:
        connection.delete("loop-redis-twin")
        connection.close()


def test_embedded_mode_and_a_caches_client_have_no_async_client(settings: Any) -> None:
    settings.RQ_QUEUES = {**settings.RQ_QUEUES, "from-cache": {"USE_REDIS_CACHE": "default"}}
    assert redis_clients.queue_async_client("from-cache") is None
    settings.MCP_TASKS = {"EMBEDDED_WORKER": True}

    async def sender() -> Any:
        return loop_redis._sender("mcp_tasks")

    assert asyncio.run(sender()) is None
    loop_redis.forget_clients()


def test_without_an_async_client_the_job_is_queued_from_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = Queue("loop-redis-fake", connection=fakeredis.FakeStrictRedis())
    monkeypatch.setitem(queue._queues, fake.name, fake)
    task = a_task(fake.name)
    asyncio.run(loop_redis.aenqueue(task))
    loop_redis.forget_clients()
    assert fair_queue.job_ids(fake.connection, fake.name) == [task.job_id]


@pytest.fixture
def private_queue(redis_process: Any, settings: Any) -> Iterator[tuple[Any, Queue]]:
    """A private redis-server (restartable, its own command counts) and a queue on it, as
    ``queue.get_queue`` gives it; the loops' clients are forgotten afterwards."""
    server = redis_process()
    own = configure(settings, "loop-redis-private", server.url)
    yield server, own
    loop_redis.forget_clients()


def test_a_job_is_queued_on_a_redis_that_restarted(private_queue: tuple[Any, Queue]) -> None:
    """The loop's pooled connection to the Redis before its restart is replaced."""
    server, restarted = private_queue
    before, after = a_task(restarted.name), a_task(restarted.name)

    async def scenario() -> None:
        await loop_redis.aenqueue(before)
        server.restart()  # keeps nothing: the first job is gone
        await loop_redis.aenqueue(after)

    asyncio.run(scenario())
    assert fair_queue.job_ids(restarted.connection, restarted.name) == [after.job_id]


def test_a_job_queued_while_redis_is_down_goes_in_once_it_is_back(
    private_queue: tuple[Any, Queue],
) -> None:
    """Within ``REDIS_FAILOVER_WAIT`` the job is sent again until Redis answers."""
    server, own = private_queue
    before, during = a_task(own.name), a_task(own.name)

    def restart_later() -> None:
        time.sleep(1.0)
        server.start()

    async def scenario() -> None:
        await loop_redis.aenqueue(before)
        server.stop()
        restarting = asyncio.get_running_loop().run_in_executor(None, restart_later)
        await loop_redis.aenqueue(during)  # waits for the restart
        await restarting

    asyncio.run(scenario())
    assert fair_queue.job_ids(own.connection, own.name) == [during.job_id]


def test_a_redis_that_does_not_know_the_push_script_gets_it_and_the_job(
    private_queue: tuple[Any, Queue],
) -> None:
    server, own = private_queue
    by_loop, by_thread = a_task(own.name), a_task(own.name)
    asyncio.run(loop_redis.aenqueue(by_loop))
    own.connection.script_flush()
    queue.enqueue(by_thread)
    assert fair_queue.job_ids(own.connection, own.name) == [by_loop.job_id, by_thread.job_id]
    assert server.client().info("commandstats")["cmdstat_script|load"]["calls"] == 2


def test_jobs_queued_while_one_is_under_way_go_in_one_transaction(
    private_queue: tuple[Any, Queue],
) -> None:
    """The first job goes at once; the four queued meanwhile share the next MULTI/EXEC."""
    server, own = private_queue
    own.get_redis_server_version()  # asked once, before the first job (from a thread)
    fair_queue.load_push(own.connection)  # known since the first job
    tasks = [a_task(own.name) for _ in range(5)]

    async def scenario() -> None:
        first = asyncio.ensure_future(loop_redis.aenqueue(tasks[0]))
        for _ in range(2):
            await asyncio.sleep(0)  # its task ran, then the batch's: on its way
        await asyncio.gather(first, *(loop_redis.aenqueue(task) for task in tasks[1:]))

    asyncio.run(scenario())
    assert fair_queue.job_ids(own.connection, own.name) == [task.job_id for task in tasks]
    stats = server.client().info("commandstats")
    assert stats["cmdstat_exec"]["calls"] == 2

"""A task's job queued from the event loop (``mcp_tasks.tasks.loop_redis``) is what rq's
own enqueue writes, on the real Redis; where the queue's connection cannot be carried over
to ``redis.asyncio``, the job is queued from a thread."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Iterator
from typing import Any

import fakeredis
import pytest
import redis
from rq import Queue

from mcp_tasks.models import Task
from mcp_tasks.tasks import fair_queue, loop_redis, queue
from tests.support.worker_fixtures import free_port

pytestmark = pytest.mark.redis

TIME = re.compile(rb"^\d{4}-\d\d-\d\dT[\d:.]+Z?$")


@pytest.fixture
def task_queue(redis_url: str) -> Iterator[Queue]:
    """A queue of its own on the real Redis, as ``queue.get_queue`` gives it."""
    connection = redis.Redis.from_url(redis_url)
    own = Queue(f"loop-redis-{secrets.token_hex(4)}", connection=connection)
    queue._queues[own.name] = own
    yield own
    queue._queues.pop(own.name, None)
    loop_redis.forget_clients()
    for key in connection.scan_iter(match=f"*{own.name}*"):
        connection.delete(key)
    connection.srem(own.redis_queues_keys, own.key)
    connection.close()


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


def test_unreachable_redis_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = Queue("loop-redis-nowhere", connection=redis.Redis(port=free_port()))
    closed.redis_server_version = (7, 0, 0)  # as if it had answered before
    monkeypatch.setitem(queue._queues, closed.name, closed)
    with pytest.raises(redis.exceptions.ConnectionError):
        asyncio.run(loop_redis.aenqueue(a_task(closed.name)))
    loop_redis.forget_clients()


def test_the_twin_talks_to_the_same_database_with_the_same_name(redis_url: str) -> None:
    connection = redis.Redis.from_url(redis_url, db=14, client_name="mcp-tasks-twin")
    twin = loop_redis.twin_of(connection)
    assert twin is not None

    async def written() -> Any:
        try:
            await twin.set("loop-redis-twin", "here")
            return await twin.client_getname()
        finally:
            await twin.aclose()

    try:
        assert asyncio.run(written()) in ("mcp-tasks-twin", b"mcp-tasks-twin")
        assert connection.get("loop-redis-twin") == b"here"
    finally:
        connection.delete("loop-redis-twin")
        connection.close()


def test_connections_that_cannot_be_carried_over_have_no_twin(redis_url: str) -> None:
    assert loop_redis.twin_of(fakeredis.FakeStrictRedis()) is None
    blocking = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(redis_url))
    assert loop_redis.twin_of(blocking) is None
    callback = redis.Redis.from_url(redis_url, redis_connect_func=lambda connection: None)
    assert loop_redis.twin_of(callback) is None


def test_without_a_twin_the_job_is_queued_from_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Queue("loop-redis-fake", connection=fakeredis.FakeStrictRedis())
    monkeypatch.setitem(queue._queues, fake.name, fake)
    task = a_task(fake.name)
    asyncio.run(loop_redis.aenqueue(task))
    loop_redis.forget_clients()
    assert fair_queue.job_ids(fake.connection, fake.name) == [task.job_id]


@pytest.fixture
def private_queue(
    redis_process: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, Queue]]:
    """A private redis-server (restartable, its own command counts) and a queue on it, as
    ``queue.get_queue`` gives it; the loops' clients are forgotten afterwards."""
    server = redis_process()
    own = Queue("loop-redis-private", connection=server.client())
    monkeypatch.setitem(queue._queues, own.name, own)
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

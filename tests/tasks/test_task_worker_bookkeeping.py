"""The ``TaskWorker``'s own record of the jobs it runs, in process, on the real Redis.

A short job can run to its end on the worker's event loop, and rq's bookkeeping of it
finish, before the thread that started it gets the GIL back. The worker must not record
it as running afterwards: a stale record kept ``running_jobs`` above zero for ever, so a
warm shutdown (which waits for the running jobs) never ended. Seen under py-spy, which
slows the dequeuing thread; here that order is forced.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

import pytest
from django.db import connections
from redis import Redis
from rq import Queue

from mcp_tasks.core.db import db
from mcp_tasks.models import Task
from mcp_tasks.tasks.queues import embedded, fair_queue, queue as task_queue
from mcp_tasks.tasks.queues.rq_bookkeeping import Taken
from mcp_tasks.tasks.state import service
from mcp_tasks.tasks.worker.task_worker import EmbeddedTaskWorker
from tests.support.rows import new_record

pytestmark = [pytest.mark.redis, pytest.mark.django_db(transaction=True)]


def test_a_job_that_ends_before_it_is_recorded_is_not_left_running(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = Redis.from_url(redis_url)
    queue = Queue(f"bookkeeping-{secrets.token_hex(4)}", connection=connection)
    for number in range(3):
        queue.enqueue("operator.add", number, 1, result_ttl=0)
    schedule = asyncio.run_coroutine_threadsafe

    def ended_before_returning(
        coroutine: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop
    ) -> Future[Any]:
        future = schedule(coroutine, loop)
        future.result(timeout=30)  # the job ran and rq's bookkeeping of it is done
        return future

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", ended_before_returning)
    worker = EmbeddedTaskWorker([queue], connection=connection, concurrency=2)

    def work() -> None:
        try:
            worker.work(burst=True, with_scheduler=False)
        finally:
            connections.close_all()  # the housekeeping's, in this thread

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout=60)  # burst: ends once the queue is empty and nothing runs
    asyncio.run(_close_the_orm_threads_connection())  # the task runtime's

    assert not thread.is_alive(), "the worker still waits for a job that ended"
    assert worker.running_jobs == 0
    assert queue.count == 0
    connection.delete(queue.key)


async def _close_the_orm_threads_connection() -> None:
    await db(connections.close_all)()


ORDER: list[int] = []


def record(number: int) -> int:
    """A job: note the order jobs ran in."""
    ORDER.append(number)
    return number * 10


def test_waiting_jobs_are_taken_together_in_queue_order_and_kept_in_rqs_registries(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = Redis.from_url(redis_url)
    queue = Queue(f"take-{secrets.token_hex(4)}", connection=connection)
    jobs = [queue.enqueue(record, number, result_ttl=60) for number in range(6)]
    jobs[2].delete()  # gone while queued: skipped, as rq's dequeue skips it
    worker = EmbeddedTaskWorker([queue], connection=connection, concurrency=4)
    batches: list[list[str]] = []
    take = worker.intake.take

    def recorded(limit: int) -> Taken:
        taken = take(limit)
        batches.append([entry.job.id for entry in taken.started])
        return taken

    monkeypatch.setattr(worker.intake, "take", recorded)
    ORDER.clear()
    thread = threading.Thread(target=worker.work, kwargs={"burst": True}, daemon=True)
    thread.start()
    thread.join(timeout=60)
    asyncio.run(_close_the_orm_threads_connection())

    assert not thread.is_alive()
    assert batches[0] == [jobs[0].id, jobs[1].id, jobs[3].id, jobs[4].id]  # 4 free slots
    assert sorted(ORDER) == [0, 1, 3, 4, 5]
    for job in (jobs[0], jobs[1], jobs[3], jobs[4], jobs[5]):
        job.refresh()  # type: ignore[no-untyped-call]
        result = job.latest_result()
        assert job.get_status() == "finished" and result is not None
        assert result.return_value == job.args[0] * 10
        assert job.worker_name == worker.name
    assert queue.count == 0
    assert connection.llen(queue.intermediate_queue_key) == 0
    assert queue.started_job_registry.count == 0
    assert queue.finished_job_registry.get_job_ids() != []
    for key in (queue.key, queue.intermediate_queue_key):
        connection.delete(key)


def test_jobs_taken_from_one_queue_are_kept_when_the_next_queue_fails(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = Redis.from_url(redis_url)
    first, second = (
        Queue(f"{name}-{secrets.token_hex(4)}", connection=connection)
        for name in ("first", "second")
    )
    jobs = [first.enqueue(record, number, result_ttl=60) for number in range(2)]
    later = second.enqueue(record, 2, result_ttl=60)
    worker = EmbeddedTaskWorker([first, second], connection=connection, concurrency=4)
    run = worker.intake.bookkeeping.run
    failures: list[str] = []

    def second_fails_once(queue: Queue, **kwargs: Any) -> Taken:
        if queue.name == second.name and not failures:
            failures.append(queue.name)
            raise ConnectionError("the second queue's trip failed")
        return run(queue, **kwargs)

    monkeypatch.setattr(worker.intake.bookkeeping, "run", second_fails_once)
    taken = worker.intake.take(4)

    assert failures == [second.name]
    assert [entry.job.id for entry in taken.started] == [job.id for job in jobs]
    assert taken.more  # the failed queue is tried again at once
    started = first.started_job_registry.get_job_ids()  # scored by time: ties in any order
    assert sorted(started) == sorted(job.id for job in jobs)
    assert second.get_job_ids() == [later.id]  # still waiting, not lost
    retaken = worker.intake.take(4)
    assert [entry.job.id for entry in retaken.started] == [later.id]
    for queue in (first, second):
        for key in (queue.key, queue.intermediate_queue_key, queue.started_job_registry.key):
            connection.delete(key)


def test_task_jobs_that_succeed_are_forgotten_and_an_idle_worker_waits_long_again(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task job that succeeded leaves nothing in rq (its row holds the result): the
    dequeuing thread forgets it with the next job's start, or after a short wait while
    jobs run; once none runs, the worker goes back to its long blocking wait on the queue's
    bell (no polling)."""
    connection = Redis.from_url(redis_url)
    queue = Queue(f"forget-{secrets.token_hex(4)}", connection=connection)
    monkeypatch.setattr(task_queue, "get_queue", lambda name: queue)
    tasks = [
        service.create_task(new_record("slow_compute", arguments={"label": str(number)}))
        for number in range(3)
    ]
    worker = EmbeddedTaskWorker([queue], connection=connection, maintenance_interval=1)
    timeouts: list[float] = []
    blpop = connection.blpop

    def recorded(keys: list[str], timeout: float) -> Any:
        timeouts.append(timeout)
        return blpop(keys, timeout)

    monkeypatch.setattr(connection, "blpop", recorded)

    def work() -> None:
        try:
            worker.work(with_scheduler=False)
        finally:
            connections.close_all()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        # Watched in Redis, not by polling the task rows: on the SQLite test database (an
        # in-memory database in shared-cache mode, where a writer meets a reader's table
        # lock at once instead of waiting) a poll could fail the worker's own writes.
        _until(lambda: int(connection.hget(worker.key, "successful_job_count") or 0) == 3)
        assert all(_status(task.id) == "completed" for task in tasks)
        assert not any(connection.exists(f"rq:job:{task.job_id}") for task in tasks)
        assert queue.started_job_registry.count == 0
        assert worker.executions == {}
        seen = len(timeouts)
        _until(lambda: len(timeouts) > seen)  # a wait begun with nothing running
        assert timeouts[-1] == worker.dequeue_timeout == fair_queue.LONGEST_WAIT == 1
    finally:
        worker.request_stop()  # seen between two jobs: one more job lets it stop
        queue.enqueue("operator.add", 1, 1, result_ttl=0)
        thread.join(timeout=30)
        asyncio.run(_close_the_orm_threads_connection())
    assert not thread.is_alive()
    connection.delete(queue.key, queue.intermediate_queue_key)


def _status(task_id: str) -> str:
    return str(Task.objects.values_list("status", flat=True).get(pk=task_id))


def _until(condition: Any, timeout: float = 30.0) -> None:
    """Until ``condition()`` holds (a bound on a hang, not a timing check)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


@pytest.mark.parametrize("redis_kind", ["redis", "embedded fake Redis"])
def test_an_idle_worker_blocks_on_the_queue_rather_than_spinning(
    redis_kind: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing queued: each turn of the dequeue loop is one blocking wait on the queue's
    bell, on Redis and on the embedded mode's fake Redis."""
    connection = Redis.from_url(redis_url) if redis_kind == "redis" else embedded.connection()
    queue = Queue(f"idle-{secrets.token_hex(4)}", connection=connection)
    worker = EmbeddedTaskWorker([queue], connection=connection, maintenance_interval=1)
    turns = 0
    heartbeat = worker.heartbeat

    def counted(*args: Any, **kwargs: Any) -> None:
        nonlocal turns
        turns += 1
        heartbeat(*args, **kwargs)

    monkeypatch.setattr(worker, "heartbeat", counted)
    thread = threading.Thread(target=worker.work, kwargs={"with_scheduler": False}, daemon=True)
    thread.start()
    try:
        time.sleep(1.5)  # a window to count turns in, not a timing check
        assert thread.is_alive()
        assert turns < 20, f"{turns} dequeue turns in 1.5 s: the worker spins"
    finally:
        worker.request_stop()
        queue.enqueue("operator.add", 1, 1, result_ttl=0)  # wakes the wait; then it stops
        thread.join(timeout=30)
        asyncio.run(_close_the_orm_threads_connection())
    assert not thread.is_alive()

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
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any

import pytest
from django.db import connections
from redis import Redis
from rq import Queue

from mcp_tasks.db import db
from mcp_tasks.tasks.worker import EmbeddedTaskWorker

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

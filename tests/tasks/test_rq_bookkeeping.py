"""The worker's Lua bookkeeping writes what rq's own code writes, on the real Redis.

:mod:`mcp_tasks.tasks.queues.rq_bookkeeping` replaces rq's pipelines for starting a job and for
forgetting a task job that succeeded. Each test runs rq's own worker methods for one job
(``prepare_execution`` and ``prepare_job_execution`` to start it, ``_finalize_success`` to
end it) and the script for another, side by side, and compares everything Redis then holds
about each (ids and times aside). A new rq release that writes something else fails here.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from redis import Redis
from rq import Queue
from rq.executions import WORKER_EXECUTIONS_KEY_TEMPLATE, Execution
from rq.utils import now

from mcp_tasks.tasks.queues.rq_bookkeeping import Bookkeeping
from mcp_tasks.tasks.worker.task_worker import EmbeddedTaskWorker

pytestmark = pytest.mark.redis

TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.]+Z?|1\d{9}(\.\d+)?)$")


@dataclass
class Ended:
    job: Any
    execution: Execution


Setting = tuple[Redis, Queue, EmbeddedTaskWorker, EmbeddedTaskWorker]


@pytest.fixture
def setting(redis_url: str) -> Iterator[Setting]:
    """A queue, and two workers of it: one keeps its books as rq does, one with the script
    (two, so that what each writes to its own keys is seen apart)."""
    connection = Redis.from_url(redis_url)
    queue = Queue(f"bookkeeping-{secrets.token_hex(4)}", connection=connection)
    workers = [EmbeddedTaskWorker([queue], connection=connection) for _ in range(2)]
    yield connection, queue, workers[0], workers[1]
    for pattern in (f"*{queue.name}*", *(f"*{worker.name}*" for worker in workers)):
        for key in connection.scan_iter(match=pattern):
            connection.delete(key)
    connection.close()


def dequeue_two(connection: Redis, queue: Queue) -> list[Any]:
    """Two jobs of the same call, dequeued as rq dequeues them (to the intermediate queue)."""
    jobs = [queue.enqueue("operator.add", 1, 2, result_ttl=0, job_timeout=600) for _ in range(2)]
    for _ in jobs:
        connection.lmove(queue.key, queue.intermediate_queue_key, "LEFT", "RIGHT")
    return jobs


def start_as_rq_does(worker: EmbeddedTaskWorker, queue: Queue, job: Any) -> Execution:
    """rq's own calls, as its worker makes them for a dequeued job: ``prepare_execution``
    (the main process), then ``prepare_job_execution`` (the work-horse)."""
    execution: Execution = worker.prepare_execution(job)
    worker.prepare_job_execution(job, remove_from_intermediate_queue=True)
    return execution


def forget_as_rq_does(worker: EmbeddedTaskWorker, job: Any, execution: Execution) -> None:
    """rq's own end of a job that returned and keeps no result (``result_ttl=0``)."""
    worker._finalize_success(job, Queue(job.origin, connection=worker.connection), execution, 3)


def shared_keys(queue: Queue, worker: EmbeddedTaskWorker) -> list[str]:
    """The keys that hold entries of several jobs."""
    return [
        queue.started_job_registry.key,
        queue.intermediate_queue_key,
        WORKER_EXECUTIONS_KEY_TEMPLATE.format(worker.name),
    ]


def _text(value: Any, job: Any, execution: Execution) -> str:
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    text = text.replace(job.id, "<job>").replace(execution.id, "<execution>")
    text = text.replace(execution.worker_name, "<worker>")
    return "<time>" if TIMESTAMP.match(text) else text


def state_of(
    connection: Any, job: Any, execution: Execution, shared: list[str]
) -> tuple[dict[str, Any], dict[str, float]]:
    """Everything Redis holds about ``job`` and its ``execution``: its own keys whole, and
    its entries in the ``shared`` keys, with ids and times replaced by placeholders; and
    apart, each TTL and sorted-set score minus the current time (compared with slack)."""
    state: dict[str, Any] = {}
    times: dict[str, float] = {}
    t0 = time.time()
    own = [key.decode() for key in connection.scan_iter(match=f"*{job.id}*")]

    def name(key: str) -> str:
        return _text(key, job, execution)

    def mine(key: str, member: bytes) -> bool:
        return key in own or job.id in member.decode()

    for key in sorted(own) + shared:
        kind = connection.type(key).decode()
        if kind == "hash":
            state[name(key)] = {
                _text(k, job, execution): _text(v, job, execution)
                for k, v in connection.hgetall(key).items()
            }
        elif kind == "zset":
            for member, score in connection.zrange(key, 0, -1, withscores=True):
                if mine(key, member):
                    entry = f"{name(key)} {_text(member, job, execution)}"
                    state[entry] = "member"
                    times[f"score of {entry}"] = score - t0
        elif kind in ("set", "list"):
            members = connection.smembers(key) if kind == "set" else connection.lrange(key, 0, -1)
            state[name(key)] = sorted(_text(m, job, execution) for m in members if mine(key, m))
        elif kind != "none":
            state[name(key)] = kind
        ttl = connection.ttl(key)
        if ttl >= 0 and (key in own or state.get(name(key))):
            times[f"ttl of {name(key)}"] = ttl
    return state, times


def assert_same(left: tuple[dict[str, Any], dict[str, float]], right: Any) -> None:
    assert left[0] == right[0]
    assert left[1].keys() == right[1].keys()
    for what, value in left[1].items():
        assert abs(value - right[1][what]) <= 2, what


def test_the_script_starts_a_job_as_rq_does(
    setting: Setting,
) -> None:
    connection, queue, rq_worker, worker = setting
    by_rq, by_script = dequeue_two(connection, queue)
    rq_execution = start_as_rq_does(rq_worker, queue, by_rq)
    [started] = Bookkeeping(worker).run(queue, job_ids=[by_script.id]).started
    script_execution = started.execution

    rq_state = state_of(connection, by_rq, rq_execution, shared_keys(queue, rq_worker))
    assert_same(
        rq_state, state_of(connection, by_script, script_execution, shared_keys(queue, worker))
    )
    # What is compared is not empty: the job is started, its execution registered.
    assert rq_state[0]["rq:job:<job>"]["status"] == "started"
    assert f"{queue.started_job_registry.key} <job>:<execution>" in rq_state[0]
    assert rq_state[0]["rq:execution:<job>:<execution>"]["worker_name"] == "<worker>"
    assert rq_state[1]["ttl of rq:worker:<worker>:executions"] > 60
    # The job the worker keeps says what Redis says.
    kept = started.job
    assert (kept.id, kept.get_status(refresh=False)) == (by_script.id, "started")
    assert kept.args == by_script.args and kept.worker_name == worker.name
    assert kept.started_at is not None and kept.origin == queue.name
    by_script.refresh()
    assert by_script.get_status() == "started" and by_script.worker_name == worker.name
    assert sorted(queue.started_job_registry.get_job_ids()) == sorted([by_rq.id, by_script.id])
    # Its times (read without rq's strptime) are the ones rq reads from the hash.
    for name in ("created_at", "enqueued_at", "started_at", "last_heartbeat", "ended_at"):
        assert getattr(kept, name) == getattr(by_script, name), name
    assert kept.enqueued_at is not None and kept.created_at.tzinfo is not None
    assert kept.serializer is worker.serializer


def test_the_script_forgets_a_succeeded_job_as_rq_does(setting: Setting) -> None:
    connection, queue, rq_worker, worker = setting
    by_rq, by_script = dequeue_two(connection, queue)
    bookkeeping = Bookkeeping(worker)
    rq_execution = start_as_rq_does(rq_worker, queue, by_rq)
    [started] = bookkeeping.run(queue, job_ids=[by_script.id]).started
    script_execution = started.execution
    by_script = started.job
    by_rq.started_at = by_script.started_at = now()
    time.sleep(0.05)
    by_rq.ended_at = by_script.ended_at = now()

    forget_as_rq_does(rq_worker, by_rq, rq_execution)
    bookkeeping.run(queue, forgotten=[Ended(by_script, script_execution)])

    for job, execution, owner in (
        (by_rq, rq_execution, rq_worker),
        (by_script, script_execution, worker),
    ):
        assert state_of(connection, job, execution, shared_keys(queue, owner)) == ({}, {})
        counts = connection.hgetall(owner.key)
        assert counts[b"successful_job_count"] == b"1"
        assert 0.05 <= float(counts[b"total_working_time"]) < 1


def test_jobs_start_and_others_are_forgotten_in_one_call(setting: Setting) -> None:
    connection, queue, _, worker = setting
    first, second = dequeue_two(connection, queue)
    bookkeeping = Bookkeeping(worker)
    [started] = bookkeeping.run(queue, job_ids=[first.id]).started
    execution = started.execution
    first.ended_at = now()

    [next_started] = bookkeeping.run(
        queue, job_ids=[second.id], forgotten=[Ended(first, execution)]
    ).started
    next_execution = next_started.execution

    assert queue.started_job_registry.get_job_ids() == [second.id]
    assert connection.exists(first.key) == 0 and connection.exists(execution.key) == 0
    assert connection.exists(next_execution.key) == 1
    assert connection.smembers(execution.worker_executions_key) == {
        f"{second.id}:{next_execution.id}".encode()
    }
    assert connection.llen(queue.intermediate_queue_key) == 0
    assert connection.hget(worker.key, "successful_job_count") == b"1"


def test_waiting_jobs_are_taken_in_queue_order_and_those_whose_hash_is_gone_skipped(
    setting: Setting,
) -> None:
    connection, queue, _, worker = setting
    jobs = [queue.enqueue("operator.add", number, 1, result_ttl=0) for number in range(5)]
    connection.delete(jobs[1].key)  # gone while queued
    bookkeeping = Bookkeeping(worker)

    started = bookkeeping.run(queue, take=3).started

    assert [entry.job.id for entry in started] == [jobs[0].id, jobs[2].id]
    assert [entry.job.args for entry in started] == [(0, 1), (2, 1)]
    assert queue.get_job_ids() == [jobs[3].id, jobs[4].id]
    assert connection.llen(queue.intermediate_queue_key) == 0
    assert sorted(queue.started_job_registry.get_job_ids()) == sorted([jobs[0].id, jobs[2].id])
    assert connection.hget(worker.key, "state") == b"busy"

    # A job given by id (dequeued by rq's blocking wait) whose hash went meanwhile.
    connection.lmove(queue.key, queue.intermediate_queue_key)
    connection.delete(jobs[3].key)
    assert bookkeeping.run(queue, job_ids=[jobs[3].id]).started == []
    assert connection.llen(queue.intermediate_queue_key) == 0

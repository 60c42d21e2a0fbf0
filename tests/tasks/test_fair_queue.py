"""The fair queue (``mcp_tasks.tasks.queues.fair_queue``) as the workers' bookkeeping script takes
from it, on the real Redis and on the embedded mode's in-process fake Redis.

What must hold: free slots go to the principals with jobs waiting in turn, first in first
out within one principal (a job that ran before goes first); without ``FAIR_SHARE`` one
line; a job over its concurrency limit waits in the limit's line, holding no slot, until
a lease comes back or expires; a delayed job (a retry's back-off) waits until it is due; a
cancelled job leaves every line.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import override_settings
from redis import Redis
from rq import Queue

from mcp_tasks import TaskConfig
from mcp_tasks.authoring.registry import MCPServer, mcp
from mcp_tasks.models import Task
from mcp_tasks.tasks.queues import embedded, fair_queue, queue
from mcp_tasks.tasks.queues.rq_bookkeeping import Bookkeeping, Room, Taken
from mcp_tasks.tasks.worker.newcomers import NewcomerListener
from mcp_tasks.tasks.worker.runtime import Slots
from mcp_tasks.tasks.worker.task_worker import EmbeddedTaskWorker

pytestmark = pytest.mark.redis

#: Tools with concurrency limits, registered for these tests only.
limited = MCPServer()


@limited.tool(task=TaskConfig(concurrency=1, concurrency_key="customer"))
async def export(customer: str) -> str:
    return customer


@limited.tool(task=TaskConfig(concurrency=2))
async def report() -> str:
    return "done"


@dataclass
class Lines:
    connection: Any
    queue: Queue
    bookkeeping: Bookkeeping

    def push(
        self,
        task_id: str,
        principal: str,
        *,
        runs: int = 0,
        tool: str = "trivial_task",
        arguments: dict[str, Any] | None = None,
        delay: float = 0.0,
    ) -> Task:
        task = Task(
            id=task_id,
            principal_scope=principal,
            tool_name=tool,
            arguments=arguments or {},
            queue=self.queue.name,
            job_timeout=600,
            runs=runs,
        )
        queue.enqueue(task, delay=delay)
        return task

    def take(self, count: int = 1, **kwargs: Any) -> Taken:
        return self.bookkeeping.run(self.queue, take=count, **kwargs)

    def started(self, count: int = 1) -> list[str]:
        """The task ids of the jobs the next take starts."""
        return [_task_id(entry.job.id) for entry in self.take(count).started]

    def take_one_by_one(self, count: int) -> list[str]:
        return [task_id for _ in range(count) for task_id in self.started(1)]


def _task_id(job_id: str) -> str:
    task_id = fair_queue.task_id_of_job(job_id)
    assert task_id is not None, job_id
    return task_id


@pytest.fixture(params=["redis", "embedded fake Redis"])
def lines(
    request: pytest.FixtureRequest, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Lines]:
    connection = Redis.from_url(redis_url) if request.param == "redis" else embedded.connection()
    name = f"fair-{secrets.token_hex(4)}"
    rq_queue = Queue(name, connection=connection)
    monkeypatch.setattr(queue, "get_queue", lambda queue_name: rq_queue)
    for tool in ("export", "report"):
        monkeypatch.setitem(mcp.tools, tool, limited.tools[tool])
    worker = EmbeddedTaskWorker([rq_queue], connection=connection)
    yield Lines(connection, rq_queue, Bookkeeping(worker))
    for pattern in (f"*{name}*", f"*{worker.name}*", "rq:job:mcp_tasks-*"):
        for key in connection.scan_iter(match=pattern):
            connection.delete(key)


def until(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    """The first true value of ``condition()`` (a bound on a hang, not a timing check)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)
    return value


def test_free_slots_go_to_the_principals_in_turn(lines: Lines) -> None:
    for number in range(1, 5):
        lines.push(f"A{number}", "alice")
    for number in (1, 2):
        lines.push(f"B{number}", "bob")
    lines.push("C1", "carol")
    expected = ["A1", "B1", "C1", "A2", "B2", "A3", "A4"]
    assert lines.take_one_by_one(7) == expected
    assert lines.started(1) == []


def test_several_jobs_taken_at_once_are_taken_in_turn_too(lines: Lines) -> None:
    for number in range(1, 4):
        lines.push(f"A{number}", "alice")
    lines.push("B1", "bob")
    assert lines.started(10) == ["A1", "B1", "A2", "A3"]


def test_a_principal_with_one_task_waits_one_turn_whatever_another_queued(lines: Lines) -> None:
    for number in range(1, 201):
        lines.push(f"A{number}", "alice")
    assert lines.started(1) == ["A1"]
    lines.push("B1", "bob")
    assert "B1" in lines.take_one_by_one(2)  # alice's next turn, then bob's


def test_within_a_principal_first_in_first_out_and_a_job_that_ran_before_goes_first(
    lines: Lines,
) -> None:
    lines.push("A1", "alice")
    lines.push("A2", "alice")
    lines.push("A0", "alice", runs=1)  # resumed after an answer: it had its turn already
    assert lines.take_one_by_one(3) == ["A0", "A1", "A2"]


def test_without_fair_share_everyone_waits_in_one_line(lines: Lines) -> None:
    with override_settings(MCP_TASKS={"FAIR_SHARE": False}):
        for task_id, principal in (("A1", "alice"), ("A2", "alice"), ("B1", "bob")):
            lines.push(task_id, principal)
    assert lines.take_one_by_one(3) == ["A1", "A2", "B1"]


def test_a_job_over_its_limit_waits_without_a_slot_until_the_lease_comes_back(
    lines: Lines,
) -> None:
    lines.push("E1", "alice", tool="export", arguments={"customer": "acme"})
    lines.push("E2", "bob", tool="export", arguments={"customer": "acme"})
    lines.push("E3", "bob", tool="export", arguments={"customer": "zeta"})
    lines.push("T1", "bob")

    taken = lines.take(4)
    assert [_task_id(entry.job.id) for entry in taken.started] == ["E1", "E3", "T1"]
    assert [_task_id(job_id) for job_id in taken.parked] == ["E2"]  # acme's one slot is E1's
    leases = {_task_id(entry.job.id): entry.lease for entry in taken.started}
    assert leases["T1"] is None and leases["E1"] is not None
    assert lines.started(1) == []  # E2 waits in the limit's line, not in bob's
    assert fair_queue.waiting(lines.connection, lines.queue.name).held == {
        'export:customer="acme"': 1
    }

    released = lines.take(1, released=[leases["E1"]])  # E1 ended: its lease goes to E2
    assert [_task_id(entry.job.id) for entry in released.started] == ["E2"]
    assert fair_queue.waiting(lines.connection, lines.queue.name).held == {}


def test_a_limit_without_a_key_counts_every_task_of_the_tool(lines: Lines) -> None:
    for number in range(1, 4):
        lines.push(f"R{number}", f"p{number}", tool="report")
    taken = lines.take(3)
    assert [_task_id(entry.job.id) for entry in taken.started] == ["R1", "R2"]
    assert [_task_id(job_id) for job_id in taken.parked] == ["R3"]


def test_the_lease_of_a_worker_that_died_expires_and_the_waiting_job_starts(
    lines: Lines,
) -> None:
    with override_settings(MCP_TASKS={"TASK_LOST_AFTER": 0.3}):
        lines.push("E1", "alice", tool="export", arguments={"customer": "acme"})
        lines.push("E2", "bob", tool="export", arguments={"customer": "acme"})
        assert lines.started(2) == ["E1"]  # E1's worker dies: nobody renews or releases
        assert until(lambda: lines.started(1)) == ["E2"]


def test_a_renewed_lease_does_not_expire(lines: Lines) -> None:
    with override_settings(MCP_TASKS={"TASK_LOST_AFTER": 0.5}):
        lines.push("E1", "alice", tool="export", arguments={"customer": "acme"})
        lines.push("E2", "bob", tool="export", arguments={"customer": "acme"})
        [first] = lines.take(2).started
        assert first.lease is not None
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # three lease lives, renewed all along
            fair_queue.renew(lines.connection, [first.lease])
            assert lines.started(1) == []
            time.sleep(0.1)


def test_a_delayed_job_waits_until_it_is_due(lines: Lines) -> None:
    lines.push("D1", "alice", runs=1, delay=0.5)
    lines.push("A1", "alice")
    assert lines.started(2) == ["A1"]
    assert fair_queue.waiting(lines.connection, lines.queue.name).delayed == 1
    assert until(lambda: lines.started(1)) == ["D1"]


@pytest.mark.cancel
def test_a_cancelled_job_leaves_every_line(lines: Lines) -> None:
    lines.push("E1", "bob", tool="export", arguments={"customer": "acme"})
    lines.push("E2", "bob", tool="export", arguments={"customer": "acme"})
    taken = lines.take(2)  # E1 starts, E2 waits for acme's slot
    assert [_task_id(job_id) for job_id in taken.parked] == ["E2"]
    lines.push("A1", "alice")
    lines.push("A2", "alice")
    lines.push("D1", "bob", runs=1, delay=60)
    for job_id in ("mcp_tasks-A2-0", "mcp_tasks-E2-0", "mcp_tasks-D1-1"):
        queue.stop(job_id, lines.queue.name)
    assert fair_queue.job_ids(lines.connection, lines.queue.name) == ["mcp_tasks-A1-0"]
    assert fair_queue.waiting(lines.connection, lines.queue.name) == fair_queue.Waiting(
        {"alice": 1}, {}, 0
    )
    assert lines.take_one_by_one(2) == ["A1"]


@pytest.mark.cancel
def test_a_job_cancelled_or_deleted_behind_the_queues_back_is_skipped(lines: Lines) -> None:
    for number in range(1, 4):
        lines.push(f"A{number}", "alice")
    lines.queue.fetch_job("mcp_tasks-A1-0").cancel()  # type: ignore[union-attr]
    lines.connection.delete("rq:job:mcp_tasks-A2-0")
    assert lines.take_one_by_one(3) == ["A3"]


def test_the_bell_rings_for_a_new_job_and_falls_silent_once_nothing_waits(lines: Lines) -> None:
    bell = fair_queue.bell_key(lines.queue.name)
    lines.push("A1", "alice")
    assert lines.connection.llen(bell) == 1
    for number in range(2, 200):
        lines.push(f"A{number}", "alice")
    assert lines.connection.llen(bell) == fair_queue.BELL_CAP
    lines.connection.delete(bell)  # idle workers took every token
    lines.take(1)
    assert lines.connection.llen(bell) == 1  # jobs are still ready: a worker need not look
    lines.take(198)
    assert lines.connection.exists(bell) == 0


def test_the_lines_are_shown_per_principal_in_turn_order(lines: Lines) -> None:
    lines.push("B1", "bob")
    lines.push("A1", "alice")
    lines.push("A2", "alice")
    waiting = fair_queue.waiting(lines.connection, lines.queue.name)
    assert list(waiting.ready.items()) == [("bob", 1), ("alice", 2)]
    assert fair_queue.job_ids(lines.connection, lines.queue.name) == [
        "mcp_tasks-B1-0",
        "mcp_tasks-A1-0",
        "mcp_tasks-A2-0",
    ]


def test_another_rq_job_on_a_task_queue_runs_when_no_task_waits(lines: Lines) -> None:
    plain = lines.queue.enqueue("operator.add", 1, 2)
    lines.push("A1", "alice")
    assert [entry.job.id for entry in lines.take(2).started] == ["mcp_tasks-A1-0", plain.id]


def test_the_queue_command_shows_the_lines(lines: Lines) -> None:
    from io import StringIO

    from django.core.management import call_command

    lines.push("B1", "bob")
    lines.push("A1", "alice")
    lines.push("A2", "alice")
    lines.push("E1", "carol", tool="export", arguments={"customer": "acme"})
    lines.push("E2", "carol", tool="export", arguments={"customer": "acme"})
    lines.push("D1", "carol", runs=1, delay=60)
    assert lines.take_one_by_one(4) == ["B1", "A1", "E1", "A2"]
    assert lines.take(1).parked == ["mcp_tasks-E2-0"]  # waits for acme's slot
    lines.push("A3", "alice")
    out = StringIO()
    call_command("mcp_tasks_queue", lines.queue.name, stdout=out)
    text = out.getvalue()
    assert "running: 4\n" in text
    assert "ready: 1 job(s) of 1 principal(s)\n  alice: 1\n" in text
    assert 'waiting for a concurrency slot: 1\n  export:customer="acme": 1\n' in text
    assert "due later (retries): 1" in text


def test_a_principal_at_its_most_on_a_worker_passes_its_turn(lines: Lines) -> None:
    for number in (1, 2):
        lines.push(f"A{number}", "alice")
    lines.push("B1", "bob")
    full = Room(cap=2, running={"alice": 2})
    assert [_task_id(e.job.id) for e in lines.take(3, room=full).started] == ["B1"]
    assert lines.started(1) == ["A1"]  # another worker, where alice runs nothing


def test_a_principal_reaches_its_most_within_one_take(lines: Lines) -> None:
    for number in range(1, 5):
        lines.push(f"A{number}", "alice")
    taken = lines.take(4, room=Room(cap=2, running={"alice": 1}))
    assert [_task_id(e.job.id) for e in taken.started] == ["A1"]
    assert taken.more is False  # the free slots stay free: no one else waits


def test_when_only_principals_at_their_most_wait_nothing_starts_and_no_more_is_said(
    lines: Lines,
) -> None:
    lines.push("A1", "alice")
    taken = lines.take(1, room=Room(cap=1, running={"alice": 1}))
    assert (taken.started, taken.more) == ([], False)
    assert fair_queue.job_ids(lines.connection, lines.queue.name) == ["mcp_tasks-A1-0"]


def test_a_worker_keeps_reserved_slots_only_with_fair_share(lines: Lines) -> None:
    worker = EmbeddedTaskWorker([lines.queue], connection=lines.connection, concurrency=16)
    worker.intake.principals = {"job-1": "alice", "job-2": "alice", "job-3": "bob"}
    assert worker.intake.room() == Room(cap=15, running={"alice": 2, "bob": 1})
    with override_settings(MCP_TASKS={"RESERVED_SLOTS": 4}):
        assert worker.intake.room() == Room(cap=12, running={"alice": 2, "bob": 1})
    with override_settings(MCP_TASKS={"RESERVED_SLOTS": 0}):
        assert worker.intake.room() is None
    with override_settings(MCP_TASKS={"FAIR_SHARE": False}):
        assert worker.intake.room() is None
    alone = EmbeddedTaskWorker([lines.queue], connection=lines.connection, concurrency=1)
    assert alone.intake.room() is None


def test_a_principal_at_its_most_stays_so_across_the_queues_of_one_take(
    lines: Lines, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker serving two queues counts what the first queue started for a principal
    before it takes from the second: ``RESERVED_SLOTS`` holds over the whole take."""
    other = Queue(f"{lines.queue.name}-b", connection=lines.connection)
    by_name = {rq_queue.name: rq_queue for rq_queue in (lines.queue, other)}
    monkeypatch.setattr(queue, "get_queue", lambda queue_name: by_name[queue_name])
    for number in (1, 2):
        lines.push(f"A{number}", "alice")
    for number in (3, 4):
        task = Task(
            id=f"A{number}",
            principal_scope="alice",
            tool_name="trivial_task",
            arguments={},
            queue=other.name,
            job_timeout=600,
        )
        queue.enqueue(task)
    worker = EmbeddedTaskWorker([lines.queue, other], connection=lines.connection, concurrency=4)
    started = worker.intake.take(4).started  # alice may run 4 - RESERVED_SLOTS (1) = 3
    assert sorted(_task_id(entry.job.id) for entry in started) == ["A1", "A2", "A3"]
    assert fair_queue.job_ids(lines.connection, other.name) == ["mcp_tasks-A4-0"]


def test_a_principal_joining_others_in_line_is_announced(lines: Lines) -> None:
    pubsub = lines.connection.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(fair_queue.newcomer_channel(lines.queue.name))
    try:
        lines.push("A1", "alice")  # alone in line: no one to overtake, nothing said
        lines.push("A2", "alice")  # alice is in line already
        lines.push("B1", "bob")  # bob joins alice
        assert lines.started(2) == ["A1", "B1"]
        lines.push("B2", "bob")  # alice (A2) waits: bob joins her again
        heard: list[bytes] = []
        deadline = time.monotonic() + 2.0  # all that was said (the subscription's reply aside)
        while time.monotonic() < deadline:
            if (message := pubsub.get_message(timeout=0.1)) is not None:
                heard.append(message["data"])
        assert heard == [b"bob", b"bob"]
    finally:
        pubsub.close()


def test_a_worker_waiting_for_a_slot_of_its_own_wakes_for_a_newcomer(lines: Lines) -> None:
    worker = EmbeddedTaskWorker([lines.queue], connection=lines.connection, concurrency=4)
    assert worker.intake.reserves_slots()
    listener = NewcomerListener(lines.connection, [lines.queue.name], worker.slots)
    listener.start()
    try:
        assert listener.listening.wait(10)
        lines.push("A1", "alice")
        worker.slots.look()
        assert not worker.slots.wait_for_release(0.2)  # alice alone: no word
        lines.push("B1", "bob")
        assert worker.slots.wait_for_release(10)
    finally:
        listener.stop()
    assert not listener._thread.is_alive()


@pytest.mark.cancel
async def test_a_slot_handed_to_a_tool_cancelled_before_it_woke_is_passed_on() -> None:
    """A slot given back goes to the first waiting tool; cancelled (its task ended) before
    the hand-over reached it, the tool must pass the slot on, not take it with it."""
    slots = Slots(1)
    await slots.take()
    waiting = asyncio.ensure_future(slots.take())  # full: waits in line
    await asyncio.sleep(0)
    slots.give()  # handed over to the waiting tool, delivered on the loop's next turn
    waiting.cancel()  # ... which is cancelled first
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert slots.used == 0
    assert slots.free() == 1
    assert slots.wait_available(0)


def test_a_slot_given_back_or_a_nudge_since_the_last_look_is_not_missed() -> None:
    slots = Slots(2)
    slots.take_now()
    slots.look()
    assert not slots.wait_for_release(0)
    slots.give()  # between the take and the wait: the wait returns at once
    assert slots.wait_for_release(0)
    slots.look()
    assert not slots.wait_for_release(0)
    threading.Timer(0.05, slots.nudge).start()
    assert slots.wait_for_release(10)

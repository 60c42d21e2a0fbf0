"""Calls coalesced into one thread hop (:mod:`mcp_tasks.tasks.queues.coalesce`), on a real thread
pool: the batches each hop carried, outcomes per call, failures and cancelled callers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from mcp_tasks.tasks.queues.coalesce import Coalesced, Outcome, database_hop, each


class Recorder:
    """A one-thread pool, and every batch that reached it (the thread blocks on ``gate``)."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(1)
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()

    async def hop(
        self, run_all: Callable[[list[int]], list[Outcome]], items: list[int]
    ) -> list[Outcome]:
        return await asyncio.get_running_loop().run_in_executor(self.pool, run_all, items)

    def double(self, item: int) -> int:
        if item < 0:
            raise ValueError(f"negative: {item}")
        return item * 2

    def run_all(self, items: list[int]) -> list[Outcome]:
        self.gate.wait(5)
        self.batches.append(list(items))
        return each(self.double)(items)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.gate.set()
    recorder.pool.shutdown(wait=True)


def test_a_lone_call_goes_at_once_in_a_batch_of_its_own(recorder: Recorder) -> None:
    async def scenario() -> list[int]:
        call: Coalesced[int, int] = Coalesced(recorder.run_all, recorder.hop)
        return [await call(1), await call(2)]

    assert asyncio.run(scenario()) == [2, 4]
    assert recorder.batches == [[1], [2]]


def test_calls_made_during_a_hop_go_together_in_the_next(recorder: Recorder) -> None:
    async def scenario() -> list[int]:
        call: Coalesced[int, int] = Coalesced(recorder.run_all, recorder.hop)
        recorder.gate.clear()
        first = asyncio.ensure_future(call(1))
        await asyncio.sleep(0.05)  # the first hop is under way, held at the gate
        rest = [asyncio.ensure_future(call(n)) for n in (2, 3, 4)]
        await asyncio.sleep(0.05)
        recorder.gate.set()
        return list(await asyncio.gather(first, *rest))

    assert asyncio.run(scenario()) == [2, 4, 6, 8]
    assert recorder.batches == [[1], [2, 3, 4]]


def test_an_item_that_raises_fails_its_own_call_only(recorder: Recorder) -> None:
    async def scenario() -> list[object]:
        call: Coalesced[int, int] = Coalesced(recorder.run_all, recorder.hop)
        recorder.gate.clear()
        calls = [asyncio.ensure_future(call(n)) for n in (1, -1, 3)]
        await asyncio.sleep(0.05)
        recorder.gate.set()
        return list(await asyncio.gather(*calls, return_exceptions=True))

    first, failed, last = asyncio.run(scenario())
    assert (first, last) == (2, 6)
    assert isinstance(failed, ValueError) and str(failed) == "negative: -1"
    assert recorder.batches == [[1, -1, 3]]


def test_a_failed_hop_fails_every_call_it_carried_and_the_next_hop_still_runs(
    recorder: Recorder,
) -> None:
    hops = 0

    async def flaky(
        run_all: Callable[[list[int]], list[Outcome]], items: list[int]
    ) -> list[Outcome]:
        nonlocal hops
        hops += 1
        if hops == 1:
            raise ConnectionError("the thread pool is gone")
        return await recorder.hop(run_all, items)

    async def scenario() -> tuple[list[object], int]:
        call: Coalesced[int, int] = Coalesced(recorder.run_all, flaky)
        failed = await asyncio.gather(call(1), call(2), return_exceptions=True)
        return list(failed), await call(5)

    failed, later = asyncio.run(scenario())
    assert [type(exc) for exc in failed] == [ConnectionError, ConnectionError]
    assert later == 10
    assert recorder.batches == [[5]]


@pytest.mark.cancel
def test_a_caller_that_gives_up_does_not_stop_its_item(recorder: Recorder) -> None:
    async def scenario() -> int:
        call: Coalesced[int, int] = Coalesced(recorder.run_all, recorder.hop)
        recorder.gate.clear()
        impatient = asyncio.ensure_future(call(7))
        await asyncio.sleep(0.05)
        impatient.cancel()
        recorder.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await impatient
        return await call(8)

    assert asyncio.run(scenario()) == 16
    assert recorder.batches == [[7], [8]]


@pytest.mark.django_db(transaction=True)
def test_the_database_hop_runs_the_batch_in_djangos_thread_for_sync_code() -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    def count_users(items: list[str]) -> list[Outcome]:
        assert threading.current_thread() is not threading.main_thread()
        try:
            return [(True, (item, get_user_model().objects.count())) for item in items]
        finally:
            connection.close()  # this thread's own connection: the test database is dropped

    async def scenario() -> list[Outcome]:
        return await database_hop(count_users, ["a", "b"])

    get_user_model().objects.create_user("coalesce")
    assert asyncio.run(scenario()) == [(True, ("a", 1)), (True, ("b", 1))]

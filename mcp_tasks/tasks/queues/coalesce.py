"""Calls from an event loop to a thread, coalesced: those made during a hop share the next.

A busy worker's small database or Redis calls cost more in thread switches than in work; a
lone call still goes at once (nothing waits to fill a batch)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from ...core.db import db

T = TypeVar("T")
R = TypeVar("R")

#: What one call came to: ``(True, result)`` or ``(False, the exception it raised)``.
Outcome = tuple[bool, object]
#: Runs a batch in another thread: ``hop(run_all, items)`` awaits ``run_all(items)``.
Hop = Callable[[Callable[[list[T]], Any], list[T]], Awaitable[list[Outcome]]]


def each(one: Callable[[T], object]) -> Callable[[list[T]], list[Outcome]]:
    """A batch function running ``one`` on each item in order; one raising stops no other."""

    def run_all(items: list[T]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for item in items:
            try:
                outcomes.append((True, one(item)))
            except Exception as exc:
                outcomes.append((False, exc))
        return outcomes

    return run_all


def _apply(run_all: Callable[[list[Any]], list[Outcome]], items: list[Any]) -> list[Outcome]:
    return run_all(items)


#: The :data:`Hop` to Django's thread (:func:`~mcp_tasks.core.db.db`, once per batch).
database_hop = db(_apply)


async def awaited(
    run_all: Callable[[list[T]], Awaitable[list[Outcome]]], items: list[T]
) -> list[Outcome]:
    """The :data:`Hop` of a coroutine batch function: on the loop (the batch shares its I/O)."""
    return await run_all(items)


class Coalesced(Generic[T, R]):
    """``await coalesced(item)``: its outcome of ``run_all``, run by ``hop`` with the items
    that came during the previous hop. One event loop only; a cancelled caller's item runs."""

    def __init__(self, run_all: Callable[[list[T]], Any], hop: Hop[T]) -> None:
        self._run_all = run_all
        self._hop = hop
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._hopping: asyncio.Future[None] | None = None

    async def __call__(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._hopping is None:
            self._hopping = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    outcomes = await self._hop(self._run_all, [item for item, _ in batch])
                except asyncio.CancelledError:  # the loop is closing
                    for _, future in batch:
                        future.cancel()
                    raise
                except BaseException as exc:  # the hop itself failed
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
                    if future.done():  # its caller gave up waiting
                        continue
                    if ok:
                        future.set_result(value)  # type: ignore[arg-type]
                    else:
                        assert isinstance(value, BaseException)
                        future.set_exception(value)
        finally:
            self._hopping = None
            for _, future in self._waiting:  # only when cancelled: nobody will run these
                if not future.done():
                    future.cancel()
            self._waiting = []

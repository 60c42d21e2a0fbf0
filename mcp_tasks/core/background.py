"""Background coroutines, held until they end (asyncio keeps only a weak reference to a
task) and their failures logged."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Coroutine
from typing import Any

_running: set[asyncio.Future[Any]] = set()


def in_background(
    coroutine: Coroutine[Any, Any, Any],
    logger: logging.Logger | None = None,
    failure: str = "",
    *args: Any,
) -> asyncio.Future[Any]:
    """Run ``coroutine`` on the running loop without waiting for it. When it raises,
    ``logger`` warns ``failure % args`` with the exception (no ``logger``: the failure is
    expected and ignored, e.g. a client that went away)."""
    task = asyncio.ensure_future(coroutine)
    _running.add(task)
    task.add_done_callback(functools.partial(_ended, logger, failure, args))
    return task


def _ended(
    logger: logging.Logger | None, failure: str, args: tuple[Any, ...], task: asyncio.Future[Any]
) -> None:
    _running.discard(task)
    if task.cancelled():
        return
    exception = task.exception()  # retrieved, so asyncio does not report it again
    if exception is not None and logger is not None:
        logger.warning(failure, *args, exc_info=exception)


async def drain(timeout: float = 5.0) -> None:
    """Wait for the running loop's background coroutines: for a loop about to stop (the one
    job of a forking worker's work-horse, which exits right after)."""
    loop = asyncio.get_running_loop()
    running = [task for task in _running if task.get_loop() is loop]
    if running:
        await asyncio.wait(running, timeout=timeout)


def ignore_outcome(future: asyncio.Future[Any]) -> None:
    """A done callback for a future nobody awaits: retrieve its exception so asyncio does
    not log it (a cancelled channel-layer read can still end with the layer's timeout)."""
    if not future.cancelled():
        future.exception()

"""A new task's job queued from an ASGI process's event loop, with no hop to a thread.

:func:`aenqueue` records rq's own commands (:func:`~mcp_tasks.tasks.queues.queue.stage_enqueue`)
and sends them, with the jobs queued meanwhile, in one MULTI/EXEC from ``redis.asyncio``, over
a client per event loop (:func:`mcp_tasks.core.redis_clients.queue_async_client`), retried for
up to ``REDIS_FAILOVER_WAIT`` s while Redis is unreachable. Without an async client (embedded
mode's fake Redis) the job is queued from a thread."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import redis
import redis.asyncio

from ...conf import get_config
from ...core import redis_clients
from . import fair_queue
from .coalesce import Coalesced, Outcome, awaited
from .queue import QUEUE_SETTINGS, enqueue, get_queue, stage_enqueue

_senders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Sender | None]] = (
    weakref.WeakKeyDictionary()
)


class _Sender:
    """One queue's async client on one loop; jobs queued meanwhile share one MULTI/EXEC."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self.send: Coalesced[list[tuple[Any, Any]], None] = Coalesced(self._send_all, awaited)

    async def _send_all(self, batch: list[list[tuple[Any, Any]]]) -> list[Outcome]:
        commands = [command for job in batch for command in job]
        try:
            # A pooled connection to a restarted Redis fails on use: drop the pool's, so the
            # next ones go to the current master.
            await redis_clients.riding_out(
                lambda: self._deliver(commands), self.client.connection_pool.disconnect
            )
        except Exception as exc:
            return [(False, exc)] * len(batch)
        return [(True, None)] * len(batch)

    async def _deliver(self, commands: list[tuple[Any, Any]]) -> None:
        try:
            await self._send(commands)
        except redis.exceptions.NoScriptError:
            # The script is unknown (first job, or Redis restarted): nothing was pushed.
            await fair_queue.load_push(self.client)
            await self._send(commands)

    async def _send(self, commands: list[tuple[Any, Any]]) -> None:
        async with self.client.pipeline(transaction=True) as pipeline:
            pipeline.command_stack.extend(commands)
            await pipeline.execute()


def _sender(queue_name: str) -> _Sender | None:
    """The running loop's sender to the queue's Redis (None: no async client can be made)."""
    senders = _senders.setdefault(asyncio.get_running_loop(), {})
    if queue_name not in senders:
        client = None
        if not get_config().EMBEDDED_WORKER:
            client = redis_clients.queue_async_client(queue_name)
        senders[queue_name] = None if client is None else _Sender(client)
    return senders[queue_name]


async def aenqueue(task: Any) -> None:
    """:func:`.queue.enqueue` from the event loop; raises if Redis is unreachable."""
    loop = asyncio.get_running_loop()
    sender = _sender(task.queue)
    if sender is None:
        await loop.run_in_executor(None, enqueue, task)
        return
    queue = get_queue(task.queue)
    if not queue.redis_server_version:  # rq asks the server once: not from the loop
        await loop.run_in_executor(None, queue.get_redis_server_version)
    await sender.send(stage_enqueue(task))


def forget_clients() -> None:
    """Forget the clients (tests)."""
    _senders.clear()


def forget_clients_on_change(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: clients follow the queues (``QUEUE_SETTINGS``)."""
    if setting in QUEUE_SETTINGS:
        _senders.clear()

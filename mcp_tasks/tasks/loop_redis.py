"""The task queue's Redis, reached from an ASGI process's event loop: a new task's job is
queued without a hop to a thread.

rq is synchronous. :func:`aenqueue` lets rq write a job exactly as it does
(:func:`mcp_tasks.tasks.queue.stage_enqueue`: rq's own ``enqueue_job``, into a pipeline
that only records the commands, no I/O), then sends those commands in one MULTI/EXEC from
``redis.asyncio`` (with the jobs queued meanwhile), over a connection pool of its own per event loop with the parameters
of the queue's connection. Where those parameters cannot be carried over (a Sentinel or
cluster connection, a connect callback, an in-process fake Redis), the job is queued
from a thread as before.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import redis
import redis.asyncio

from . import fair_queue
from .coalesce import Coalesced, Outcome, awaited
from .queue import QUEUE_SETTINGS, enqueue, get_queue, stage_enqueue

#: The synchronous connection classes that have an ``redis.asyncio`` twin.
_TWINS: dict[type[Any], type[Any]] = {
    redis.connection.Connection: redis.asyncio.connection.Connection,
    redis.connection.SSLConnection: redis.asyncio.connection.SSLConnection,
    redis.connection.UnixDomainSocketConnection: redis.asyncio.connection.UnixDomainSocketConnection,
}

#: Connection parameters that mean the same to both clients (plain values).
_CARRIED = frozenset(
    {
        "host",
        "port",
        "path",
        "db",
        "username",
        "password",
        "credential_provider",
        "socket_timeout",
        "socket_connect_timeout",
        "socket_keepalive",
        "socket_keepalive_options",
        "socket_read_size",
        "retry_on_timeout",
        "health_check_interval",
        "client_name",
        "protocol",
        "ssl_keyfile",
        "ssl_certfile",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_data",
        "ssl_check_hostname",
        "ssl_min_version",
        "ssl_ciphers",
    }
)

_senders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Sender | None]] = (
    weakref.WeakKeyDictionary()
)


def twin_of(connection: Any) -> redis.asyncio.Redis | None:
    """An async client of the same server as the synchronous client ``connection``, or
    None when its connection cannot be carried over."""
    if type(connection) is not redis.Redis:
        return None  # e.g. fakeredis in embedded mode, a cluster client
    pool = connection.connection_pool
    twin = _TWINS.get(pool.connection_class)
    if twin is None or type(pool) is not redis.ConnectionPool:
        return None
    kwargs = pool.connection_kwargs
    if kwargs.get("redis_connect_func") is not None:
        return None
    carried = {key: value for key, value in kwargs.items() if key in _CARRIED}
    return redis.asyncio.Redis(
        connection_pool=redis.asyncio.ConnectionPool(connection_class=twin, **carried)
    )


class _Sender:
    """One queue's async client on one loop. The jobs queued while a round trip is under
    way go together in the next (:class:`~mcp_tasks.tasks.coalesce.Coalesced`): one
    MULTI/EXEC for all of them."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self.send: Coalesced[list[tuple[Any, Any]], None] = Coalesced(self._send_all, awaited)

    async def _send_all(self, batch: list[list[tuple[Any, Any]]]) -> list[Outcome]:
        commands = [command for job in batch for command in job]
        try:
            await self._deliver(commands)
        except redis.exceptions.ConnectionError:
            # A pooled connection to a Redis that restarted since: redis-py's synchronous
            # pool finds it closed when it is taken and connects anew; here it fails on use.
            # Once more on a new connection (a Redis that is really down fails again).
            await self.client.connection_pool.disconnect()
            try:
                await self._deliver(commands)
            except Exception as exc:
                return [(False, exc)] * len(batch)
        except Exception as exc:
            return [(False, exc)] * len(batch)
        return [(True, None)] * len(batch)

    async def _deliver(self, commands: list[tuple[Any, Any]]) -> None:
        try:
            await self._send(commands)
        except redis.exceptions.NoScriptError:
            # A Redis that does not know the fair queue's script yet (its first job, or it
            # restarted): nothing of the batch was pushed; again once the script is there.
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
        client = twin_of(get_queue(queue_name).connection)
        senders[queue_name] = None if client is None else _Sender(client)
    return senders[queue_name]


async def aenqueue(task: Any) -> None:
    """:func:`~mcp_tasks.tasks.queue.enqueue` from the event loop; raises when Redis is
    unreachable."""
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

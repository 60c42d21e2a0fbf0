"""Every Redis client of mcp_tasks, read from the settings of the two libraries it runs on,
as each reads them: django-rq's ``RQ_QUEUES`` (the task queues: the synchronous clients are
django-rq's own, :func:`queue_client`; their async twins are built here,
:func:`queue_async_client`) and channels_redis' ``hosts`` (the process bus's client,
:func:`layer_async_client`, and the task changes' publisher,
:mod:`mcp_tasks.tasks.queues.layer_publish`). Sentinel clients follow a failover on their own; async clients
retry a command (:data:`RETRIES`) and callers that wait ride out longer outages
(:func:`riding_out`). ``*_target(s)`` describe the settings without connecting (checks
E019, W016)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
import redis.asyncio
import redis.asyncio.retry
import redis.asyncio.sentinel
from django.conf import settings
from redis.backoff import ExponentialBackoff

from ..conf import get_config

R = TypeVar("R")

#: More tries of a failed command of an async client built here (0.05 to 0.4 s apart, each
#: on a new connection: with Sentinel, to the master named then).
RETRIES = 4


def retry() -> redis.asyncio.retry.Retry:
    """A new :data:`RETRIES` policy (each client gets its own: a policy keeps state)."""
    return redis.asyncio.retry.Retry(ExponentialBackoff(cap=1.0, base=0.025), RETRIES)


@dataclass(frozen=True)
class RedisTarget:
    """One Redis user's connection settings: a Sentinel service (``sentinels``,
    ``master_name``) or a fixed address (``url`` or ``kwargs``); ``problem``: why they cannot
    work (None: they can); ``where``: where they are written."""

    where: str
    url: str | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    sentinels: tuple[tuple[str, int], ...] = ()
    master_name: str | None = None
    sentinel_kwargs: Mapping[str, Any] | None = None
    problem: str | None = None
    #: The client cannot be built here (django-rq's ``USE_REDIS_CACHE``: a cache's client).
    foreign: bool = False
    #: ``kwargs`` are a connection pool's (channels_redis), not a client's (django-rq).
    pool_kwargs: bool = False

    @property
    def is_sentinel(self) -> bool:
        return bool(self.sentinels) or self.master_name is not None

    def describe(self) -> str:
        if self.is_sentinel:
            return f"Sentinel service {self.master_name!r} ({len(self.sentinels)} Sentinels)"
        if self.url is not None:
            return f"the fixed address {re.sub(r'//[^@/]*@', '//', self.url)}"  # no secret
        if "unix_socket_path" in self.kwargs:
            return f"the socket {self.kwargs['unix_socket_path']}"
        if self.foreign:
            return "a Redis cache's client"
        return f"the fixed address {self.kwargs.get('host')}:{self.kwargs.get('port')}"


def _sentinel_addresses(value: Any) -> tuple[tuple[str, int], ...] | None:
    """``[(host, port), ...]`` as written, or None when it is not a list of such pairs."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not all(
        isinstance(entry, (list, tuple))
        and len(entry) == 2
        and isinstance(entry[0], str)
        and isinstance(entry[1], int)
        for entry in value
    ):
        return None
    return tuple((host, port) for host, port in value)


def queue_target(name: str) -> RedisTarget:
    """The Redis of ``RQ_QUEUES[name]`` as django-rq reads it
    (``django_rq.connection_utils.get_redis_connection``)."""
    queues: dict[str, Any] = getattr(settings, "RQ_QUEUES", None) or {}
    config = queues.get(name)
    where = f"RQ_QUEUES[{name!r}]"
    if not isinstance(config, dict):
        return RedisTarget(where, problem="is not configured")
    return rq_target(config, where)


def rq_target(config: Mapping[str, Any], where: str) -> RedisTarget:
    """:func:`queue_target` of one ``RQ_QUEUES`` entry."""
    db = config.get("DB")
    if "URL" in config:
        kwargs: dict[str, Any] = {"db": db}
        if config.get("SSL") or str(config["URL"]).startswith("rediss://"):
            kwargs["ssl_cert_reqs"] = config.get("SSL_CERT_REQS", "required")
        problem = None
        if "MASTER_NAME" in config or "SENTINELS" in config:
            problem = "has a URL and Sentinel keys: django-rq uses the URL and ignores the rest"
        return RedisTarget(where, url=str(config["URL"]), kwargs=kwargs, problem=problem)
    if "USE_REDIS_CACHE" in config:
        return RedisTarget(where, foreign=True)
    if "UNIX_SOCKET_PATH" in config:
        return RedisTarget(where, kwargs={"unix_socket_path": config["UNIX_SOCKET_PATH"], "db": db})
    if "SENTINELS" in config:
        sentinels = _sentinel_addresses(config["SENTINELS"])
        kwargs = {
            "db": db,
            "password": config.get("PASSWORD"),
            "username": config.get("USERNAME"),
            "socket_timeout": config.get("SOCKET_TIMEOUT"),
            **(config.get("CONNECTION_KWARGS") or {}),
        }
        problem = None
        if sentinels is None:
            problem = "SENTINELS is not a list of (host, port) pairs"
        elif not config.get("MASTER_NAME"):
            problem = "has SENTINELS but no MASTER_NAME"
        return RedisTarget(
            where,
            kwargs=kwargs,
            sentinels=sentinels or (),
            master_name=config.get("MASTER_NAME") or None,
            sentinel_kwargs=config.get("SENTINEL_KWARGS") or {},
            problem=problem,
        )
    if "MASTER_NAME" in config:
        return RedisTarget(
            where,
            master_name=str(config["MASTER_NAME"]),
            problem="has MASTER_NAME but no SENTINELS",
        )
    if "HOST" not in config or "PORT" not in config:
        return RedisTarget(where, problem="names no Redis (URL, HOST and PORT, or SENTINELS)")
    return RedisTarget(
        where,
        kwargs={
            "host": config["HOST"],
            "port": config["PORT"],
            "db": config.get("DB", 0),
            "username": config.get("USERNAME"),
            "password": config.get("PASSWORD"),
            "ssl": config.get("SSL", False),
            "ssl_cert_reqs": config.get("SSL_CERT_REQS", "required"),
            **(config.get("REDIS_CLIENT_KWARGS") or {}),
        },
    )


def queue_client(name: str) -> redis.Redis:
    """The synchronous client of ``RQ_QUEUES[name]``: django-rq's own, as its workers get."""
    import django_rq

    client: redis.Redis = django_rq.get_connection(name)
    return client


def queue_async_client(name: str) -> redis.asyncio.Redis | None:
    """An async client of ``RQ_QUEUES[name]`` (None: it cannot be built here, e.g. a
    cache's client; the caller then uses the synchronous one from a thread)."""
    target = queue_target(name)
    if target.problem is not None or target.foreign:
        return None
    return async_client(target)


def layer_targets(alias: str) -> list[RedisTarget]:
    """The Redis servers of ``CHANNEL_LAYERS[alias]`` as channels_redis reads its ``hosts``
    (``channels_redis.utils.decode_hosts`` and ``create_pool``); [] for a layer that is not
    channels_redis'."""
    layers = getattr(settings, "CHANNEL_LAYERS", None)
    layer = layers.get(alias) if isinstance(layers, dict) else None  # not a dict: E005
    if not isinstance(layer, dict) or not str(layer.get("BACKEND", "")).startswith(
        "channels_redis."
    ):
        return []
    where = f"CHANNEL_LAYERS[{alias!r}]"
    config = layer.get("CONFIG") or {}
    if not isinstance(config, dict):
        return [RedisTarget(where, problem="'CONFIG' must be a dict")]
    hosts = config.get("hosts")
    if not hosts:
        return [RedisTarget(f"{where} (no hosts)", url="redis://localhost:6379")]
    if isinstance(hosts, (str, bytes)):
        return [RedisTarget(where, problem="'hosts' must be a list, even of one")]
    return [host_target(entry, f"{where} host {number}") for number, entry in enumerate(hosts, 1)]


def host_target(entry: Any, where: str) -> RedisTarget:
    """:func:`layer_targets` of one ``hosts`` entry."""
    if isinstance(entry, (list, tuple)):
        return RedisTarget(where, kwargs={"host": entry[0], "port": entry[1]}, pool_kwargs=True)
    if not isinstance(entry, dict):
        return RedisTarget(where, url=str(entry))
    rest = dict(entry)
    if "address" in rest:
        url = str(rest.pop("address"))
        problem = None
        if "master_name" in rest or "sentinels" in rest:
            problem = "has an address and Sentinel keys: channels_redis uses the address"
        return RedisTarget(where, url=url, kwargs=rest, problem=problem)
    if "master_name" in rest:
        master_name = rest.pop("master_name")
        sentinels = _sentinel_addresses(rest.pop("sentinels", None))
        sentinel_kwargs = rest.pop("sentinel_kwargs", None)
        problem = None
        if sentinels is None:
            problem = "has a master_name but no list of (host, port) sentinels"
        elif not master_name:
            problem = "has an empty master_name"
        return RedisTarget(
            where,
            kwargs=rest,
            sentinels=sentinels or (),
            master_name=str(master_name) if master_name else None,
            sentinel_kwargs=sentinel_kwargs,
            problem=problem,
        )
    if "sentinels" in rest:
        return RedisTarget(
            where,
            sentinels=_sentinel_addresses(rest["sentinels"]) or (),
            problem="has sentinels but no master_name",
        )
    return RedisTarget(where, kwargs=rest, pool_kwargs=True)


def layer_async_client(alias: str) -> redis.asyncio.Redis | None:
    """An async client of the channel layer's first Redis (None: the layer is not
    channels_redis', or its host cannot work)."""
    targets = layer_targets(alias)
    if not targets or targets[0].problem is not None:
        return None
    return async_client(targets[0])


def async_client(target: RedisTarget) -> redis.asyncio.Redis:
    """A ``redis.asyncio`` client of ``target``; a Sentinel service's follows its master."""
    assert target.problem is None and not target.foreign, target
    kwargs: dict[str, Any] = dict(target.kwargs)
    kwargs.setdefault("retry", retry())
    if target.is_sentinel:
        assert target.master_name is not None
        # As both libraries do: the Sentinels are reached with SENTINEL_KWARGS (django-rq)
        # or sentinel_kwargs (channels_redis) alone, redis-py's defaults otherwise.
        sentinel = redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            list(target.sentinels), sentinel_kwargs=dict(target.sentinel_kwargs or {})
        )
        client: redis.asyncio.Redis = sentinel.master_for(target.master_name, **kwargs)
        return client
    if target.url is not None:
        if kwargs.get("db") is None:  # from_url keeps the URL's then
            kwargs.pop("db", None)
        return redis.asyncio.Redis.from_url(target.url, **kwargs)
    if target.pool_kwargs:
        return redis.asyncio.Redis(connection_pool=redis.asyncio.ConnectionPool(**kwargs))
    return redis.asyncio.Redis(**kwargs)


#: Errors of a Redis unreachable for now (restarting, failing over; ``READONLY``: a master
#: demoted behind the same address, where new connections find the new one).
UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
)


async def riding_out(
    send: Callable[[], Awaitable[R]], reconnect: Callable[[], Awaitable[object]] | None = None
) -> R:
    """``await send()``, again while Redis is unreachable (backing off from 0.05 s to 1 s,
    after ``reconnect()``) for up to ``REDIS_FAILOVER_WAIT`` seconds; then its error."""
    deadline = time.monotonic() + float(get_config().REDIS_FAILOVER_WAIT)
    pause = 0.05
    while True:
        try:
            return await send()
        except UNREACHABLE:
            if time.monotonic() + pause > deadline:
                raise
        if reconnect is not None:
            with contextlib.suppress(Exception):
                await reconnect()
        await asyncio.sleep(pause)
        pause = min(1.0, pause * 2)

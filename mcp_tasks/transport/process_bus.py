"""What every ASGI process hears on a channel of its own: legacy cancels (a call registers in a dict
instead of joining a group: two Redis trips fewer per call) and session changes, which drop the
session from each process's cache (:mod:`.session_cache`). Order: a caching process lists itself
among the session's *cachers* (a Redis set) before it reads the row; a changing process commits,
reads the set and answers its client only once each cacher acknowledged (or after
:data:`ECHO_TIMEOUT`), so a listed copy is trusted without a round trip. An unlisted copy is trusted
only after :meth:`ProcessBus.caught_up`, an echo through the same connection that comes back behind
every earlier message. Changes lost while Redis restarts are bounded by ``SESSION_CACHE_TTL``."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis

from ..conf import get_config
from ..core import groups, redis_clients
from ..core.background import in_background
from .layer_listener import LayerListener

if TYPE_CHECKING:
    from ..sessions import StoredSession

logger = logging.getLogger("mcp_tasks.transport")

#: Every process's bus.
PROCESSES = "mcp_tasks.processes"
#: Seconds to wait for a message to come back through the layer, or for the cachers of a
#: session to acknowledge a change (then go on regardless).
ECHO_TIMEOUT = 2.0


def _cachers_key(session_id: str) -> str:
    return f"mcp_tasks:session-cachers:{groups.session_group(session_id)}"


class ProcessBus(LayerListener):
    """The calls in progress in one process and event loop, and its session listeners."""

    label = "process bus"

    def __init__(self, layer: Any, redis: aioredis.Redis | bool | None = True) -> None:
        """``redis``: where the lists of cachers live (True: the layer's Redis, if any)."""
        super().__init__(layer)
        if redis is True:
            redis = redis_clients.layer_async_client(get_config().CHANNEL_LAYER)
        self.redis = redis or None
        self.calls: dict[str, set[Callable[[], None]]] = {}  # call key → how to cancel it
        #: Sessions this process loaded lately: id → (when, session, listed as a cacher).
        self.sessions: dict[str, tuple[float, StoredSession, bool]] = {}
        self.changes = 0  # session changes heard so far
        self.started = False
        self._lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None
        self._channel = ""
        self._echoes: dict[str, asyncio.Future[None]] = {}
        self._acks: dict[str, tuple[set[str], asyncio.Future[None]]] = {}
        self._next_echo: asyncio.Future[bool] | None = None

    async def start(self) -> None:
        """Join :data:`PROCESSES` (once): from then on this process hears every message."""
        if self.started:
            return
        async with self._lock:
            if self.started:
                return
            self._channel = await self.layer.new_channel()
            await self.layer.group_add(PROCESSES, self._channel)
            self._reader = asyncio.ensure_future(self._read(self._channel))
            await self._echo_to_self()
            self.started = True

    async def caught_up(self) -> bool:
        """True once this process has heard every message published before the call; False
        when the channel layer did not echo (then what the process cached may be stale)."""
        await self.start()
        if self._next_echo is None:
            self._next_echo = asyncio.ensure_future(self._shared_echo())
        return await asyncio.shield(self._next_echo)

    async def _shared_echo(self) -> bool:
        await asyncio.sleep(0)  # the requests of this loop turn join this echo
        self._next_echo = None  # who comes later needs an echo sent after them
        try:
            return await self._echo_to_self()
        except Exception:  # Redis restarting
            logger.warning("process bus: channel layer unreachable", exc_info=True)
            return False

    async def _echo_to_self(self) -> bool:
        return await self._echoed(
            lambda echo: self.layer.send(self._channel, {"type": "mcp.echo", **echo})
        )

    async def _echoed(self, send: Callable[[dict[str, str]], Awaitable[None]]) -> bool:
        """``send`` a message marked with a new echo id; True once the reader got it."""
        token = secrets.token_hex(8)
        future = self._echoes[token] = asyncio.get_running_loop().create_future()
        try:
            await send({"echo": token})
            await asyncio.wait_for(future, ECHO_TIMEOUT)
            return True
        except TimeoutError:
            logger.warning("process bus: no echo from the channel layer in %ss", ECHO_TIMEOUT)
            return False
        finally:
            self._echoes.pop(token, None)

    def register_call(self, key: str, cancel: Callable[[], None]) -> None:
        self.calls.setdefault(key, set()).add(cancel)

    def unregister_call(self, key: str, cancel: Callable[[], None]) -> None:
        waiting = self.calls.get(key)
        if waiting is not None:
            waiting.discard(cancel)
            if not waiting:
                del self.calls[key]

    async def cancel_call(self, session_id: str, request_id: Any) -> None:
        """Cancel the legacy call ``request_id`` of ``session_id``, in whichever process."""
        await self.layer.group_send(
            PROCESSES, {"type": "mcp.cancel", "call": groups.call_group(session_id, request_id)}
        )

    async def list_as_cacher(self, session_id: str) -> bool:
        """List this process among ``session_id``'s cachers, before reading it to keep it;
        False when it could not (then check the copy with :meth:`caught_up`)."""
        if self.redis is None:
            return False
        await self.start()
        key = _cachers_key(session_id)
        keep = int(2 * float(get_config().SESSION_CACHE_TTL)) + 5  # outlives the copy
        try:
            async with self.redis.pipeline(transaction=False) as pipeline:
                pipeline.sadd(key, self._channel)
                pipeline.expire(key, keep)
                await pipeline.execute()
        except Exception:  # Redis restarting
            logger.warning("process bus: could not list a session's cacher", exc_info=True)
            return False
        return True

    async def session_changed(self, session_id: str) -> None:
        """Every process forgets what it cached of ``session_id``: returns once the listed
        cachers acknowledged it and this process heard its own message back."""
        self._session_changed(session_id)
        await self.start()
        cachers = await self._cachers(session_id)
        token = secrets.token_hex(8)
        acknowledged = asyncio.get_running_loop().create_future()
        if cachers:
            self._acks[token] = (cachers, acknowledged)
        else:
            acknowledged.set_result(None)
        try:
            await self._echoed(
                lambda echo: self.layer.group_send(
                    PROCESSES,
                    {
                        "type": "mcp.session",
                        "session": session_id,
                        "ack": sorted(cachers),
                        "ack_to": self._channel,
                        "acked": token,
                        **echo,
                    },
                )
            )
            await asyncio.wait_for(acknowledged, ECHO_TIMEOUT)
        except TimeoutError:
            logger.warning(
                "process bus: %d process(es) did not acknowledge a session change in %ss",
                len(cachers),
                ECHO_TIMEOUT,
            )
        finally:
            self._acks.pop(token, None)

    async def _cachers(self, session_id: str) -> set[str]:
        """The other processes listed as caching ``session_id``."""
        if self.redis is None:
            return set()
        try:
            members = await self.redis.smembers(_cachers_key(session_id))
        except Exception:  # Redis restarting
            logger.warning("process bus: could not read a session's cachers", exc_info=True)
            return set()
        listed = {m.decode() if isinstance(m, bytes) else str(m) for m in members}
        return listed - {self._channel}

    def _session_changed(self, session_id: str) -> None:
        self.changes += 1
        self.sessions.pop(session_id, None)

    def heard(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        echoed = self._echoes.get(str(message.get("echo")))
        if echoed is not None and not echoed.done():
            echoed.set_result(None)
        if kind == "mcp.cancel":
            for cancel in list(self.calls.get(str(message.get("call")), ())):
                cancel()
        elif kind == "mcp.session":
            self._session_changed(str(message.get("session")))
            if self._channel in (message.get("ack") or ()):
                ack = {"type": "mcp.ack", "acked": message.get("acked"), "by": self._channel}
                acknowledging = self.layer.send(str(message.get("ack_to")), ack)
                in_background(acknowledging, logger, "process bus: could not acknowledge")
        elif kind == "mcp.ack":
            waiting = self._acks.get(str(message.get("acked")))
            if waiting is not None:
                cachers, acknowledged = waiting
                cachers.discard(str(message.get("by")))
                if not cachers and not acknowledged.done():
                    acknowledged.set_result(None)


def process_bus() -> ProcessBus | None:
    """The bus of the running event loop; None without a channel layer."""
    return ProcessBus.of_running_loop()

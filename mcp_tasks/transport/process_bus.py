"""What every ASGI process hears, on one channel of its own: legacy cancels and session
changes, so that a plain legacy call costs the channel layer nothing.

A legacy call used to join a group of its own (for ``notifications/cancelled``): with
channels_redis' pub/sub layer, two subscriptions and two unsubscriptions per call, each a
trip to Redis under the layer's lock. Cancels are rare, calls are not: instead a call
registers itself in its process's :class:`ProcessBus` (a dict), and a cancel is sent to
every process, which looks the call up. Session changes (``DELETE``, ``logging/setLevel``)
go to every process the same way, to drop the session from its cache
(:mod:`mcp_tasks.transport.session_cache`, which keeps it in :attr:`ProcessBus.sessions`).

Order: the process that changes a session answers its client only once its own copy of the
message came back from the channel layer, so every other process has it on its socket
before the client can send its next request. Having it on the socket is not having read
it: a request that trusts a cached session first waits for :meth:`ProcessBus.caught_up`,
an echo through the same Redis connection, which comes back behind every message published
before it (one Redis server orders them; concurrent requests share one echo). A bus counts
as started only once its reader has received a first message (channels_redis' pub/sub
layer looks at a connection that had no subscription only every 100 ms).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .. import groups
from .layer_listener import LayerListener

if TYPE_CHECKING:
    from ..sessions import StoredSession

logger = logging.getLogger("mcp_tasks.transport")

#: Every process's bus.
PROCESSES = "mcp_tasks.processes"
#: Seconds to wait for a message to come back through the layer (then go on regardless).
ECHO_TIMEOUT = 2.0


class ProcessBus(LayerListener):
    """The calls in progress in one process and event loop, and its session listeners."""

    label = "process bus"

    def __init__(self, layer: Any) -> None:
        super().__init__(layer)
        self.calls: dict[str, set[Callable[[], None]]] = {}  # call key → how to cancel it
        #: Sessions this process loaded lately: id → (when, session).
        self.sessions: dict[str, tuple[float, StoredSession]] = {}
        self.changes = 0  # session changes heard so far
        self.started = False
        self._lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None
        self._channel = ""
        self._echoes: dict[str, asyncio.Future[None]] = {}
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

    async def session_changed(self, session_id: str) -> None:
        """Every process forgets what it cached of ``session_id``."""
        self._session_changed(session_id)
        await self.start()
        await self._echoed(
            lambda echo: self.layer.group_send(
                PROCESSES, {"type": "mcp.session", "session": session_id, **echo}
            )
        )

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


def process_bus() -> ProcessBus | None:
    """The bus of the running event loop; None without a channel layer."""
    return ProcessBus.of_running_loop()

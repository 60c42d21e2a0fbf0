"""The legacy era's session endpoints (2025-03-26 … 2025-11-25): ``POST`` (``initialize``
opens a session), ``GET`` (the session's stream, or a resume with ``Last-Event-ID``) and
``DELETE``. A call's cancel comes through its process's bus (:mod:`.process_bus`)."""

from __future__ import annotations

import asyncio
import itertools
import secrets

from .. import jsontext, stream_events
from ..auth import Principal
from ..authoring.lifespan import lifespan_context
from ..core import groups
from ..core.jsonrpc import Message
from ..protocol import legacy_request_info
from ..protocol.constants import LEGACY_TASKS_VERSION
from ..sessions import StoredSession, create_session, subscriptions_of
from . import request_runner
from .exchange import Exchange
from .http import HttpError, accepts, first
from .process_bus import process_bus
from .session_cache import cached_session, end_cached_session

#: Seconds a session's GET stream leaves a task's new questions to a ``tasks/result`` stream.
GET_STREAM_RELAY_GRACE = 1.0

#: Resumable stream ids: a random prefix per process, then a counter (a resume also names
#: the session, so the id needs to be unique, not secret).
_STREAM_PREFIX = secrets.token_hex(8)
_stream_numbers = itertools.count(1)


class LegacyEndpoints:
    """Serves one legacy-era request of ``exchange``."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange
        self.session: StoredSession | None = None
        self.session_stream: StoredSession | None = None  # set on a session's GET stream
        self.relayed: dict[str, asyncio.Task[None]] = {}  # task questions sent on this stream
        self.resuming: str | None = None  # the stream a GET with Last-Event-ID resumes
        self.resumed_up_to = 0
        self.resume_lock = asyncio.Lock()
        self.call_key: str | None = None  # a call's key in its process's bus

    async def _session(self, principal: Principal) -> StoredSession:
        session_id = first(self.exchange.headers, "mcp-session-id")
        if not session_id:
            raise HttpError(400, "Bad Request: Missing session ID")
        session = await cached_session(session_id, principal)
        if session is None:
            raise HttpError(404, "Session not found")
        self.session = session
        self.exchange.sink.session_id = session.id
        self.exchange.stream.headers.append((b"mcp-session-id", session.id.encode()))
        return session

    async def post(self, message: Message, kind: str, principal: Principal) -> None:
        exchange = self.exchange
        if kind == "request" and message["method"] == "initialize":
            await self._initialize(message, principal)
            return
        session = await self._session(principal)
        if kind == "response":
            await exchange.membership.send(
                groups.reply_group(str(message["id"])),
                {
                    "type": "mcp.reply",
                    "key": str(message["id"]),
                    "session": session.id,
                    "message": message,
                },
            )
            await exchange.stream.finish(None)
            return
        bus = process_bus()
        if kind == "notification":
            if message["method"] == "notifications/cancelled" and bus is not None:
                request_id = (message.get("params") or {}).get("requestId")
                await bus.cancel_call(session.id, request_id)
            await exchange.stream.finish(None)
            return
        if bus is not None:  # the call hears notifications/cancelled through it
            await bus.start()
            self.call_key = groups.call_group(session.id, message["id"])
            bus.register_call(self.call_key, exchange.cancel_work)
        if session.protocol_version >= "2025-11-25" and exchange.membership.layer is not None:
            exchange.stream.resumable_id = f"{_STREAM_PREFIX}{next(_stream_numbers):x}"
            exchange.stream.spill = self._spill
        info = legacy_request_info(
            message, exchange.headers, principal, session, await lifespan_context()
        )
        try:
            response = await request_runner.run(exchange, message, info)
        except asyncio.CancelledError:
            if exchange.cancel_on_disconnect or exchange.stream.closed:
                raise
            # notifications/cancelled: the client expects no response.
            await exchange.stream.finish(None)
            return
        await exchange.respond(response, modern=False)

    async def _initialize(self, message: Message, principal: Principal) -> None:
        exchange = self.exchange
        info = legacy_request_info(message, exchange.headers, principal, None)
        response = await exchange.dispatcher.handle(message, info, exchange.sink)
        if "result" in response:
            session = await create_session(
                principal,
                response["result"]["protocolVersion"],
                (message.get("params") or {}).get("clientInfo"),
                info.client_capabilities,
            )
            exchange.stream.headers.append((b"mcp-session-id", session.id.encode()))
        await exchange.respond(response, modern=False)

    async def _spill(self, sequence: int, message: Message) -> None:
        """Keep an event of this stream, sent after its connection closed, for a resume."""
        stream_id = self.exchange.stream.resumable_id
        assert stream_id is not None and self.session is not None
        message = jsontext.storable(message, f"an event of stream {stream_id}")
        await stream_events.store(stream_id, self.session.id, sequence, message)
        await self.exchange.membership.send(
            groups.stream_group(stream_id),
            {"type": "mcp.stream", "sequence": sequence, "message": message},
        )

    async def get(self, principal: Principal) -> None:
        exchange = self.exchange
        if not accepts(exchange.headers, "text/event-stream"):
            raise HttpError(406, "Not Acceptable: Client must accept text/event-stream")
        session = await self._session(principal)
        resume = stream_events.parse_event_id(first(exchange.headers, "last-event-id"))
        if resume is not None:
            await self._resume(session, *resume)
            return

        async def accept(notification: Message) -> bool:
            if notification.get("method") == "notifications/resources/updated":
                uri = (notification.get("params") or {}).get("uri")
                return uri in await subscriptions_of(session.id)
            return True

        exchange.notify_filter = accept
        self.session_stream = session
        exchange.cancel_on_disconnect = True  # nothing to go on with once the client is gone
        await exchange.membership.join(groups.BROADCAST)
        await exchange.membership.join(groups.session_group(session.id))
        await exchange.stream.open_sse()
        await exchange.sink.keepalive()  # until the client closes the stream

    async def _resume(self, session: StoredSession, stream_id: str, after: int) -> None:
        """Replay a closed stream's events after ``after``, then forward the rest live."""
        exchange = self.exchange
        self.resuming = stream_id
        self.resumed_up_to = after
        exchange.cancel_on_disconnect = True  # the call goes on elsewhere; its events stay
        await exchange.membership.join(groups.stream_group(stream_id))
        await exchange.stream.open_sse()
        async with self.resume_lock:
            for sequence, event in await stream_events.events_after(stream_id, session.id, after):
                await self._forward_resumed(sequence, event)
        if not exchange.finished.is_set():
            await exchange.sink.keepalive()

    async def delete(self, principal: Principal) -> None:
        session = await self._session(principal)
        await end_cached_session(session.id, principal)
        await self.exchange.stream.plain(200, b"", [])

    async def stream_event(self, sequence: int, event: Message) -> None:
        """An event of the stream this ``GET`` resumes (``mcp.stream``)."""
        async with self.resume_lock:
            await self._forward_resumed(sequence, event)

    async def _forward_resumed(self, sequence: int, event: Message) -> None:
        stream = self.exchange.stream
        if sequence <= self.resumed_up_to or stream.closed:
            return
        self.resumed_up_to = sequence
        await stream.replay(event, f"{self.resuming}:{sequence}")
        if "id" in event and ("result" in event or "error" in event):
            await stream.finish(None)
            self.exchange.finished.set()

    async def task_changed(self, task_id: str) -> None:
        """A 2025-11-25 session stream pushes ``notifications/tasks/status`` of the
        session's tasks, and relays the questions of one that waits for input."""
        session = self.session_stream
        if session is None or session.protocol_version != LEGACY_TASKS_VERSION:
            return
        status = await self.exchange.dispatcher.session_task_status(task_id, session.id)
        if status is None:
            return
        await self.exchange.stream.event(status)
        if status["params"]["status"] == "input_required":
            self.relayed.setdefault(
                f"later:{task_id}", asyncio.ensure_future(self._relay_later(task_id))
            )

    async def _relay_later(self, task_id: str) -> None:
        """After a grace left to a ``tasks/result`` stream, relay a task's questions on the
        session's GET stream (clients that only poll ``tasks/get``, like FastMCP 3)."""
        await asyncio.sleep(GET_STREAM_RELAY_GRACE)
        self.relayed.pop(f"later:{task_id}", None)
        assert self.session_stream is not None
        await self.exchange.dispatcher.relay_questions(
            task_id, self.session_stream.principal_scope, self.exchange.sink, self.relayed
        )

    def close(self) -> None:
        """The request is over: stop relaying and leave the process's bus."""
        for relay in self.relayed.values():
            relay.cancel()
        if self.call_key is not None and (bus := process_bus()) is not None:
            bus.unregister_call(self.call_key, self.exchange.cancel_work)

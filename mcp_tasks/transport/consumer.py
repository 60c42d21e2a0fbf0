"""The Channels consumer serving the MCP endpoint (Streamable HTTP, both eras).

One consumer instance serves one HTTP request. Once it has joined a group, it also receives
channel-layer messages, so that any process can reach it: the client's reply to a server
request (``mcp.reply``) and notifications to forward (``mcp.notify``). A legacy call joins
no group: its process's bus (:mod:`.process_bus`) hears its cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import secrets
from typing import Any

from channels.consumer import AsyncConsumer, get_handler_name
from channels.layers import get_channel_layer

from .. import background, groups, jsontext, streams
from ..auth import Principal
from ..conf import get_config
from ..exceptions import ProtocolError, ToolError
from ..jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    Message,
    error_object,
    error_response,
    notification,
    request,
)
from ..layers import keep_reading
from ..lifespan import lifespan_context
from ..protocol import (
    Dispatcher,
    RequestInfo,
    kind_of,
    legacy_request_info,
    modern_request_info,
    parse_body,
)
from ..protocol.constants import (
    LEGACY_TASKS_VERSION,
    LEGACY_VERSIONS,
    http_status_for,
    is_modern,
)
from ..protocol.notices import task_event_notification
from ..protocol.subscriptions import Subscription
from ..sessions import StoredSession, create_session, subscriptions_of
from .admission import admission
from .authentication import authenticate, insufficient_scope
from .http import (
    HttpError,
    accepts,
    check_content_type,
    check_host,
    check_origin,
    cors_headers,
    declares_more_than,
    first,
    header_map,
    preflight_headers,
)
from .process_bus import process_bus
from .session_cache import cached_session, end_cached_session
from .stream import ResponseStream
from .task_watcher import TaskWait, task_watcher

logger = logging.getLogger("mcp_tasks.transport")

JSON = [(b"content-type", b"application/json")]

#: Seconds a session's GET stream leaves a task's new questions to a ``tasks/result`` stream.
GET_STREAM_RELAY_GRACE = 1.0


#: Stream ids (2025-11-25 resumable streams): a random prefix per process, then a counter.
#: A resume also names the session, so the id needs to be unique, not secret; this spares
#: each legacy call a read of the system's random source.
_STREAM_PREFIX = secrets.token_hex(8)
_stream_numbers = itertools.count(1)

#: Not caught by the catch-all: cancellation, Ctrl-C and a closing coroutine go on up.
_PASS_THROUGH = (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit)


class McpConsumer(AsyncConsumer):
    """Serves ``POST``/``GET``/``DELETE`` on the MCP endpoint with ``dispatcher``."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.body = bytearray()
        self.request_id: Any = None  # the JSON-RPC id, once the body is known to be a request
        self.work: asyncio.Task[None] | None = None
        self.finished = asyncio.Event()
        self.cancel_on_disconnect = False
        self.joined: set[str] = set()
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.notify_filter: Any = None  # set by streams that forward notifications
        self.session: StoredSession | None = None
        self.subscription: Subscription | None = None  # a subscriptions/listen stream's
        self.resuming: str | None = None  # the stream a GET with Last-Event-ID resumes
        self.resumed_up_to = 0
        self.resume_lock = asyncio.Lock()
        self.task_wait: TaskWait | None = None  # the task this request waits on
        self.relayed: dict[str, asyncio.Task[None]] = {}  # task questions sent on this stream
        self.session_stream: StoredSession | None = None  # set on a legacy GET stream
        self.layer_pump: asyncio.Future[None] | None = None  # reads the layer once joined
        self.join_lock = asyncio.Lock()
        self.call_key: str | None = None  # a legacy call's key in its process's bus
        self.admitted = False  # counted in the process's requests in progress

    # -- ASGI plumbing --------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        self.base_send = send
        self.stream = ResponseStream(send)
        self.channel_layer = get_channel_layer(get_config()["CHANNEL_LAYER"])
        self._receive = receive
        asgi_pump: asyncio.Future[Any] = asyncio.ensure_future(self._pump(receive))
        asgi_pump.add_done_callback(self._pump_ended)
        try:
            await self.finished.wait()
            if not asgi_pump.cancelled() and asgi_pump.done() and asgi_pump.exception():
                raise asgi_pump.exception()  # type: ignore[misc]
        finally:
            for task in [asgi_pump, *([self.layer_pump] if self.layer_pump else [])]:
                task.cancel()
                task.add_done_callback(background.ignore_outcome)
            if self.work is not None and not self.work.done():
                self.work.cancel()
            for relay in self.relayed.values():
                relay.cancel()
            self._unregister_call()
            self._unwatch_task()
            await self._leave_groups()

    def _pump_ended(self, pump: asyncio.Future[Any]) -> None:
        """The ASGI pump raised (the server went away): the request is over."""
        if not pump.cancelled() and pump.exception() is not None:
            self.finished.set()

    async def _pump(self, source: Any) -> None:
        """Dispatch messages from one source (ASGI or the channel layer); the ASGI pump
        stops at ``http.disconnect``."""
        while True:
            try:
                message = await source()
            except Exception:
                if source is self._receive:
                    raise
                # A channel-layer read failed (e.g. redis-py's socket timeout, or Redis
                # restarting): the request goes on; wake-ups resume when the layer is back.
                logger.warning("channel layer read failed; retrying", exc_info=True)
                # (redis-py's default 5 s socket timeout equals channels_redis' blocking read:
                # configure socket_timeout above it, see system check mcp_tasks.W003.)
                await asyncio.sleep(0.5)
                continue
            try:
                await self.dispatch(message)
            except _PASS_THROUGH:
                raise
            except BaseException:  # noqa: BLE001 - the catch-all: see _fail
                await self._fail()
                return
            if message.get("type") == "http.disconnect":
                return

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its ``aclose_old_connections()`` per message (a trip
        to the ORM thread each time): every ORM call here goes through
        :func:`mcp_tasks.db.db`, which keeps the connections tidy itself."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def http_request(self, message: dict[str, Any]) -> None:
        if self.work is not None:
            return
        self.body += message.get("body", b"")
        limit = get_config()["MAX_BODY_BYTES"]
        if len(self.body) > limit or declares_more_than(header_map(self.scope), limit):
            error = HttpError(413, f"Request body too large (limit {limit} bytes)")
            await self.stream.plain(413, error.payload(), JSON)
            self.finished.set()
            return
        if not message.get("more_body"):
            self.work = asyncio.ensure_future(self._serve(bytes(self.body)))

    async def http_disconnect(self, message: dict[str, Any]) -> None:
        self.stream.disconnected()
        if self.cancel_on_disconnect or self.work is None or self.work.done():
            self.finished.set()
        # Legacy era: a closed stream is not a cancel; the call goes on, and its later
        # events are kept for a resume (GET with Last-Event-ID).

    async def mcp_reply(self, message: dict[str, Any]) -> None:
        future = self.pending.get(message["key"])
        if future is not None and not future.done() and message.get("session") == self.session_id:
            future.set_result(message["message"])

    def _cancel_work(self) -> None:
        if self.work is not None and not self.work.done():
            self.work.cancel()

    async def _register_call(self, session_id: str, request_id: Any) -> None:
        """A legacy call hears ``notifications/cancelled`` through its process's bus."""
        bus = process_bus()
        if bus is None:
            return
        await bus.start()
        self.call_key = groups.call_group(session_id, request_id)
        bus.register_call(self.call_key, self._cancel_work)

    def _unregister_call(self) -> None:
        bus = process_bus() if self.call_key is not None else None
        if bus is not None and self.call_key is not None:
            bus.unregister_call(self.call_key, self._cancel_work)

    async def mcp_notify(self, message: dict[str, Any]) -> None:
        notification = message["message"]
        if self.notify_filter is not None and await self.notify_filter(notification):
            await self.stream.event(notification)

    async def mcp_task_event(self, message: dict[str, Any]) -> None:
        """Progress or a log message of a task the session created (legacy GET stream)."""
        await self.stream.event(task_event_notification(message["event"]))

    async def mcp_task(self, message: dict[str, Any]) -> None:
        """A task changed: wake a waiting ``tasks/result`` and push the new state to a
        ``subscriptions/listen`` stream (``notifications/tasks``) or a 2025-11-25 session
        stream (``notifications/tasks/status``)."""
        if self.subscription is not None:
            pushed = await self.dispatcher.task_pushed(message["task_id"], self.subscription)
            if pushed is not None:
                await self.stream.event(pushed)
        elif (
            self.session_stream is not None
            and self.session_stream.protocol_version == LEGACY_TASKS_VERSION
        ):
            status = await self.dispatcher.session_task_status(
                message["task_id"], self.session_stream.id
            )
            if status is not None:
                await self.stream.event(status)
                if status["params"]["status"] == "input_required":
                    self.relayed.setdefault(
                        f"later:{message['task_id']}",
                        asyncio.ensure_future(self._relay_later(message["task_id"])),
                    )

    async def _relay_later(self, task_id: str) -> None:
        """Questions of a task go out on its ``tasks/result`` stream when the client waits in
        one; after a short grace, on the session's GET stream instead (clients that only poll
        ``tasks/get``, like FastMCP 3, answer there)."""
        await asyncio.sleep(GET_STREAM_RELAY_GRACE)
        self.relayed.pop(f"later:{task_id}", None)
        assert self.session_stream is not None
        await self.dispatcher.relay_questions(
            task_id, self.session_stream.principal_scope, self, self.relayed
        )

    async def mcp_stream(self, message: dict[str, Any]) -> None:
        """An event of the stream this ``GET`` resumes."""
        async with self.resume_lock:
            await self._forward_resumed(message["sequence"], message["message"])

    async def _forward_resumed(self, sequence: int, event: dict[str, Any]) -> None:
        if sequence <= self.resumed_up_to or self.stream.closed:
            return
        self.resumed_up_to = sequence
        await self.stream.replay(event, f"{self.resuming}:{sequence}")
        if "id" in event and ("result" in event or "error" in event):
            await self.stream.finish(None)
            self.finished.set()

    async def _spill(self, sequence: int, message: dict[str, Any]) -> None:
        """Keep an event of this stream, sent after its connection closed, for a resume."""
        stream_id = self.stream.resumable_id
        assert stream_id is not None and self.session is not None
        message = jsontext.storable(message, f"an event of stream {stream_id}")
        await streams.store(stream_id, self.session.id, sequence, message)
        await self.channel_layer.group_send(
            groups.stream_group(stream_id),
            {"type": "mcp.stream", "sequence": sequence, "message": message},
        )

    async def _join(self, group: str) -> None:
        """Join ``group``; the first join names this consumer's channel and starts reading
        it. Requests that join no group (most) never read the channel layer, so they
        cost it nothing, and cancelling their end cannot disturb other consumers' reads."""
        if self.channel_layer is None:
            return
        async with self.join_lock:
            if group in self.joined:
                return
            if self.layer_pump is None:
                await keep_reading(self.channel_layer)
                self.channel_name = await self.channel_layer.new_channel()
                read = functools.partial(self.channel_layer.receive, self.channel_name)
                self.layer_pump = asyncio.ensure_future(self._pump(read))
                self.layer_pump.add_done_callback(self._layer_pump_ended)
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.add(group)

    def _layer_pump_ended(self, pump: asyncio.Future[None]) -> None:
        if not pump.cancelled() and pump.exception() is not None:
            logger.error("handling a channel-layer message failed", exc_info=pump.exception())
            self.finished.set()

    async def _leave_groups(self) -> None:
        for group in list(self.joined):
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception:  # the layer may be gone at shutdown
                logger.debug("could not leave %s", group, exc_info=True)
        self.joined.clear()

    @property
    def session_id(self) -> str | None:
        return self.session.id if self.session is not None else None

    # -- request handling -----------------------------------------------------------------

    async def _serve(self, body: bytes) -> None:
        try:
            await self._route(body)
        except HttpError as exc:
            await self.stream.plain(exc.status, exc.payload(), JSON + exc.headers)
        except _PASS_THROUGH:
            raise
        except BaseException:  # noqa: BLE001 - the catch-all: see _fail
            await self._fail()
        finally:
            self._release()
            self.finished.set()

    def _release(self) -> None:
        """No longer a request in progress (it ended, or it is now a stream)."""
        if self.admitted:
            self.admitted = False
            admission.leave()

    async def _fail(self) -> None:
        """The catch-all, called inside ``except`` wherever request code runs (the request
        itself, :meth:`_serve`, and the messages it receives, :meth:`_pump`).

        Whatever escaped, the request ends with an answer: a ``-32603`` error (HTTP 500
        when nothing was sent yet, else the stream's final event; kept for a resume when
        the stream was detached). A stream that answers no request (a legacy GET) just ends.
        """
        logger.exception("MCP request failed (answered -32603 Internal error)")
        error = error_response(self.request_id, error_object(INTERNAL_ERROR, "Internal error"))
        final = None if self.request_id is None and self.stream.streaming else error
        try:
            await self.stream.finish(final, status=500)
        except Exception:
            logger.exception("could not send the error response")
        finally:
            self.finished.set()

    async def _route(self, body: bytes) -> None:
        headers = header_map(self.scope)
        self.headers = headers
        host = check_host(headers)
        origin = check_origin(headers, host)
        self.stream.headers += cors_headers(origin)
        method = self.scope["method"]
        if method == "OPTIONS":
            await self.stream.plain(204, b"", preflight_headers(headers))
            return
        version = first(headers, "mcp-protocol-version")
        modern = is_modern(version)
        allowed = "POST" if modern else "GET, POST, DELETE"
        if method not in allowed.split(", "):
            raise HttpError(405, "Method Not Allowed", [(b"allow", allowed.encode())])
        if method == "POST":
            admission.enter()  # 503 when the process is full
            self.admitted = True
        if not modern and version is not None and version not in LEGACY_VERSIONS:
            raise HttpError(400, f"Unsupported MCP-Protocol-Version {version!r}")
        principal = await authenticate(self.scope, headers)
        if method == "GET":
            await self._legacy_get(principal)
        elif method == "DELETE":
            await self._legacy_delete(principal)
        else:
            await self._post(body, principal, modern, version)

    async def _post(
        self, body: bytes, principal: Principal, modern: bool, version: str | None
    ) -> None:
        if not accepts(self.headers, "application/json", "text/event-stream"):
            raise HttpError(
                406,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            )
        check_content_type(self.headers)
        try:
            message = parse_body(body)
            kind = kind_of(message)
        except ProtocolError as exc:
            logger.warning("refused a message (%d): %s", exc.code, exc.message)
            await self._error(None, exc)
            return
        if kind == "request":
            self.request_id = message["id"]
        if modern:
            await self._modern(message, kind, principal)
        else:
            await self._legacy(message, kind, principal)

    async def _error(self, request_id: Any, exc: ProtocolError) -> None:
        await self.stream.finish(
            error_response(request_id, exc.to_dict()), status=http_status_for(exc.code)
        )

    async def _respond(self, response: dict[str, Any], modern: bool) -> None:
        error = response.get("error")
        status = http_status_for(error["code"]) if error and modern else 200
        await self.stream.finish(response, status=status)

    async def _run(self, message: dict[str, Any], info: RequestInfo) -> dict[str, Any]:
        missing = await self.dispatcher.scope_challenge(message, info.principal)
        if missing:
            raise insufficient_scope(self.scope, self.headers, missing)
        keepalive = asyncio.ensure_future(self._keepalive())
        try:
            return await self.dispatcher.handle(message, info, self)
        finally:
            keepalive.cancel()

    async def _keepalive(self) -> None:
        interval = get_config()["SSE_KEEPALIVE"]
        while True:
            await asyncio.sleep(interval)
            await self.stream.ping()

    # -- modern era -----------------------------------------------------------------------

    async def _modern(self, message: dict[str, Any], kind: str, principal: Principal) -> None:
        if kind == "notification":
            await self.stream.finish(None)
            return
        if kind == "response":
            await self._error(
                message.get("id"),
                ProtocolError(
                    INVALID_REQUEST, "The 2026-07-28 protocol has no server requests to respond to"
                ),
            )
            return
        try:
            info = modern_request_info(message, self.headers, principal, await lifespan_context())
        except ProtocolError as exc:
            await self._error(message["id"], exc)
            return
        self.cancel_on_disconnect = True  # closing the stream cancels the request
        if message["method"] == "subscriptions/listen":
            await self._listen(message, info)
            return
        await self._respond(await self._run(message, info), modern=True)

    async def _listen(self, message: dict[str, Any], info: RequestInfo) -> None:
        if not accepts(self.headers, "text/event-stream"):
            raise HttpError(406, "Not Acceptable: subscriptions/listen needs text/event-stream")
        try:
            subscription = await self.dispatcher.subscribe(message, info)
        except ProtocolError as exc:
            await self._error(message["id"], exc)
            return
        self.subscription = subscription
        for task_id in subscription.task_ids:
            await self._join(groups.task_shard_group(task_id))

        async def accept(notification: Message) -> bool:
            return subscription.accepts(notification)

        self.notify_filter = accept
        self._release()  # a stream, not a request in progress
        await self._join(groups.BROADCAST)
        await self.stream.event(subscription.acknowledgement())
        await self._keepalive()  # until the client closes the stream

    # -- legacy era -----------------------------------------------------------------------

    async def _legacy_session(self, principal: Principal) -> StoredSession:
        session_id = first(self.headers, "mcp-session-id")
        if not session_id:
            raise HttpError(400, "Bad Request: Missing session ID")
        session = await cached_session(session_id, principal)
        if session is None:
            raise HttpError(404, "Session not found")
        self.session = session
        self.stream.headers.append((b"mcp-session-id", session.id.encode()))
        return session

    async def _legacy(self, message: dict[str, Any], kind: str, principal: Principal) -> None:
        if kind == "request" and message["method"] == "initialize":
            await self._initialize(message, principal)
            return
        session = await self._legacy_session(principal)
        if kind == "response":
            await self.channel_layer.group_send(
                groups.reply_group(str(message["id"])),
                {
                    "type": "mcp.reply",
                    "key": str(message["id"]),
                    "session": session.id,
                    "message": message,
                },
            )
            await self.stream.finish(None)
            return
        if kind == "notification":
            bus = process_bus()
            if message["method"] == "notifications/cancelled" and bus is not None:
                request_id = (message.get("params") or {}).get("requestId")
                await bus.cancel_call(session.id, request_id)
            await self.stream.finish(None)
            return
        await self._register_call(session.id, message["id"])
        if session.protocol_version >= "2025-11-25" and self.channel_layer is not None:
            self.stream.resumable_id = f"{_STREAM_PREFIX}{next(_stream_numbers):x}"
            self.stream.spill = self._spill
        info = legacy_request_info(
            message, self.headers, principal, session, await lifespan_context()
        )
        try:
            response = await self._run(message, info)
        except asyncio.CancelledError:
            if self.cancel_on_disconnect or self.stream.closed:
                raise
            # notifications/cancelled: the client expects no response.
            await self.stream.finish(None)
            return
        await self._respond(response, modern=False)

    async def _initialize(self, message: dict[str, Any], principal: Principal) -> None:
        params = message.get("params") or {}
        info = legacy_request_info(message, self.headers, principal, None)
        response = await self.dispatcher.handle(message, info, self)
        if "result" in response:
            session = await create_session(
                principal,
                response["result"]["protocolVersion"],
                params.get("clientInfo"),
                info.client_capabilities,
            )
            self.stream.headers.append((b"mcp-session-id", session.id.encode()))
        await self._respond(response, modern=False)

    async def _legacy_get(self, principal: Principal) -> None:
        if not accepts(self.headers, "text/event-stream"):
            raise HttpError(406, "Not Acceptable: Client must accept text/event-stream")
        session = await self._legacy_session(principal)
        resume = streams.parse_event_id(first(self.headers, "last-event-id"))
        if resume is not None:
            await self._resume(session, *resume)
            return

        async def accept(notification: dict[str, Any]) -> bool:
            if notification.get("method") == "notifications/resources/updated":
                uri = (notification.get("params") or {}).get("uri")
                return uri in await subscriptions_of(session.id)
            return True

        self.notify_filter = accept
        self.session_stream = session
        self.cancel_on_disconnect = True  # nothing to go on with once the client is gone
        await self._join(groups.BROADCAST)
        await self._join(groups.session_group(session.id))
        await self.stream.open_sse()
        await self._keepalive()  # until the client closes the stream

    async def _resume(self, session: StoredSession, stream_id: str, after: int) -> None:
        """Replay a closed stream's events after ``after``, then forward the rest live."""
        self.resuming = stream_id
        self.resumed_up_to = after
        self.cancel_on_disconnect = True  # the call goes on elsewhere; its events stay stored
        await self._join(groups.stream_group(stream_id))
        await self.stream.open_sse()
        async with self.resume_lock:
            for sequence, event in await streams.events_after(stream_id, session.id, after):
                await self._forward_resumed(sequence, event)
        if not self.finished.is_set():
            await self._keepalive()

    async def _legacy_delete(self, principal: Principal) -> None:
        session = await self._legacy_session(principal)
        await end_cached_session(session.id, principal)
        await self.stream.plain(200, b"", [])

    # -- Sink: how the protocol layer talks back ------------------------------------------

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.stream.event(notification(method, params))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.channel_layer is None:
            raise ToolError(f"cannot send {method}: no channel layer is configured")
        if self.stream.closed:
            raise ToolError(f"cannot send {method}: the client has disconnected")
        key = secrets.token_hex(16)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[key] = future
        group = groups.reply_group(key)
        await self._join(group)
        try:
            await self.stream.event(request(key, method, params))
            reply = await asyncio.wait_for(future, get_config()["CLIENT_REQUEST_TIMEOUT"])
        except TimeoutError:
            raise ToolError(f"the client did not answer {method} in time") from None
        finally:
            self.pending.pop(key, None)
            self.joined.discard(group)
            await self.channel_layer.group_discard(group, self.channel_name)
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            raise ToolError(
                f"the client answered {method} with an error: {error.get('message', 'unknown error')}"
            )
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    async def watch_task(self, task_id: str) -> None:
        if self.task_wait is not None and self.task_wait.task_id == task_id:
            return
        watcher = task_watcher()
        if watcher is None:
            return  # no channel layer: waits last their whole timeout
        self._unwatch_task()
        self.task_wait = await watcher.watch(task_id)

    async def wait_for_task(self, task_id: str, timeout: float) -> dict[str, Any] | None:
        await self.watch_task(task_id)
        wait = self.task_wait
        if wait is None:
            await asyncio.sleep(timeout)
            return None
        if not wait.changed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wait.changed.wait(), timeout)
        final, wait.final = wait.final, None
        wait.changed.clear()
        return final

    def _unwatch_task(self) -> None:
        wait, self.task_wait = self.task_wait, None
        watcher = task_watcher() if wait is not None else None
        if wait is not None and watcher is not None:
            watcher.unwatch(wait)

    async def close_stream(self) -> None:
        if self.stream.resumable_id is not None:
            await self.stream.detach()

    async def publish(self, method: str, params: dict[str, Any]) -> None:
        if self.channel_layer is not None:
            await self.channel_layer.group_send(
                groups.BROADCAST,
                {
                    "type": "mcp.notify",
                    "message": notification(method, params),
                },
            )

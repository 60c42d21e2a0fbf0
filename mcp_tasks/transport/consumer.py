"""The Channels consumer of the MCP endpoint (Streamable HTTP), one per request: guards, sign-in,
and the request's era (modern here, legacy in :class:`.legacy_endpoints.LegacyEndpoints`).
Once in a channel-layer group it also hears ``mcp.*`` messages from any process."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.consumer import AsyncConsumer, get_handler_name
from channels.layers import get_channel_layer

from ..auth import Principal
from ..authoring.lifespan import lifespan_context
from ..conf import get_config
from ..core import background, groups
from ..core.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, Message, error_object, error_response
from ..exceptions import ProtocolError
from ..protocol import Dispatcher, RequestInfo, kind_of, modern_request_info, parse_body
from ..protocol.constants import LEGACY_VERSIONS, is_modern
from ..protocol.notices import task_event_notification
from ..protocol.subscriptions import Subscription
from . import request_runner
from .admission import admission
from .credentials import authenticate
from .exchange import Exchange
from .http import (
    JSON,
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
    request_scheme,
)
from .legacy_endpoints import LegacyEndpoints
from .membership import Membership
from .request_sink import RequestSink
from .response_stream import ResponseStream

logger = logging.getLogger("mcp_tasks.transport")

#: Not caught by the catch-all: cancellation, Ctrl-C and a closing coroutine go on up.
_PASS_THROUGH = (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit)


class McpConsumer(AsyncConsumer):
    """Serves ``POST``/``GET``/``DELETE`` on the MCP endpoint with ``dispatcher``."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.body = bytearray()
        self.request_id: Any = None  # the JSON-RPC id, once the body is known to be a request
        self.work: asyncio.Task[None] | None = None
        self.subscription: Subscription | None = None  # a subscriptions/listen stream's
        self.legacy: LegacyEndpoints | None = None
        self.admitted = False  # counted in the process's requests in progress

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scope = scope
        stream = ResponseStream(send)
        finished = asyncio.Event()
        layer = get_channel_layer(get_config().CHANNEL_LAYER)
        membership = Membership(layer, self._pump, on_failure=finished.set)
        self.exchange = Exchange(
            scope=scope,
            dispatcher=self.dispatcher,
            stream=stream,
            membership=membership,
            sink=RequestSink(stream, membership),
            cancel_work=self._cancel_work,
            finished=finished,
        )
        self._receive = receive
        asgi_pump: asyncio.Future[Any] = asyncio.ensure_future(self._pump(receive))
        asgi_pump.add_done_callback(self._pump_ended)
        try:
            await self.exchange.finished.wait()
            if not asgi_pump.cancelled() and asgi_pump.done() and asgi_pump.exception():
                raise asgi_pump.exception()  # type: ignore[misc]
        finally:
            asgi_pump.cancel()
            asgi_pump.add_done_callback(background.ignore_outcome)
            self._cancel_work()
            if self.legacy is not None:
                self.legacy.close()
            self.exchange.sink.unwatch_task()
            await membership.close()

    def _pump_ended(self, pump: asyncio.Future[Any]) -> None:
        """The ASGI pump raised (the server went away): the request is over."""
        if not pump.cancelled() and pump.exception() is not None:
            self.exchange.finished.set()

    async def _pump(self, source: Any) -> None:
        """Dispatch messages from one source (ASGI or the channel layer); the ASGI pump
        stops at ``http.disconnect``."""
        while True:
            try:
                message = await source()
            except Exception:
                if source is self._receive:
                    raise
                # A channel-layer read failed (a socket timeout, see check W003, or Redis
                # restarting): the request goes on.
                logger.warning("channel layer read failed; retrying", exc_info=True)
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
        """Channels' dispatch without its ``aclose_old_connections()`` per message (a trip to
        the ORM thread): :func:`mcp_tasks.core.db.db` keeps the connections tidy."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    def _cancel_work(self) -> None:
        if self.work is not None and not self.work.done():
            self.work.cancel()

    async def http_request(self, message: dict[str, Any]) -> None:
        if self.work is not None:
            return
        self.body += message.get("body", b"")
        limit = get_config().MAX_BODY_BYTES
        if len(self.body) > limit or declares_more_than(header_map(self.scope), limit):
            error = HttpError(413, f"Request body too large (limit {limit} bytes)")
            await self.exchange.stream.plain(413, error.payload(), JSON)
            self.exchange.finished.set()
            return
        if not message.get("more_body"):
            self.work = asyncio.ensure_future(self._serve(bytes(self.body)))

    async def http_disconnect(self, message: dict[str, Any]) -> None:
        self.exchange.stream.disconnected()
        if self.exchange.cancel_on_disconnect or self.work is None or self.work.done():
            self.exchange.finished.set()
        # Legacy era: a closed stream is not a cancel; the call goes on, and its later
        # events are kept for a resume (GET with Last-Event-ID).

    async def mcp_reply(self, message: dict[str, Any]) -> None:
        self.exchange.sink.reply_arrived(message["key"], message.get("session"), message["message"])

    async def mcp_notify(self, message: dict[str, Any]) -> None:
        notification = message["message"]
        accept = self.exchange.notify_filter
        if accept is not None and await accept(notification):
            await self.exchange.stream.event(notification)

    async def mcp_task(self, message: dict[str, Any]) -> None:
        """A task changed: push the new state to a ``subscriptions/listen`` stream
        (``notifications/tasks``) or a 2025-11-25 session stream. (A waiting
        ``tasks/result`` hears it through :mod:`.task_watcher`.)"""
        if self.subscription is not None:
            pushed = await self.dispatcher.task_pushed(message["task_id"], self.subscription)
            if pushed is not None:
                await self.exchange.stream.event(pushed)
        elif self.legacy is not None:
            await self.legacy.task_changed(message["task_id"])

    async def mcp_task_event(self, message: dict[str, Any]) -> None:
        """Progress or a log message of a task the session created (legacy GET stream)."""
        await self.exchange.stream.event(task_event_notification(message["event"]))

    async def mcp_stream(self, message: dict[str, Any]) -> None:
        """An event of the stream this ``GET`` resumes."""
        if self.legacy is not None:
            await self.legacy.stream_event(message["sequence"], message["message"])

    async def _serve(self, body: bytes) -> None:
        try:
            await self._route(body)
        except HttpError as exc:
            await self.exchange.stream.plain(exc.status, exc.payload(), JSON + exc.headers)
        except _PASS_THROUGH:
            raise
        except BaseException:  # noqa: BLE001 - the catch-all: see _fail
            await self._fail()
        finally:
            self._release()
            self.exchange.finished.set()

    def _release(self) -> None:
        """No longer a request in progress (it ended, or it is now a stream)."""
        if self.admitted:
            self.admitted = False
            admission.leave()

    async def _fail(self) -> None:
        """The catch-all (inside ``except``): the request ends with a ``-32603`` error (HTTP
        500, or the stream's final event); a stream answering no request just ends."""
        logger.exception("MCP request failed (answered -32603 Internal error)")
        stream = self.exchange.stream
        error = error_response(self.request_id, error_object(INTERNAL_ERROR, "Internal error"))
        final = None if self.request_id is None and stream.streaming else error
        try:
            await stream.finish(final, status=500)
        except Exception:
            logger.exception("could not send the error response")
        finally:
            self.exchange.finished.set()

    async def _route(self, body: bytes) -> None:
        headers = header_map(self.scope)
        self.exchange.headers = headers
        host = check_host(headers)
        origin = check_origin(headers, host, request_scheme(self.scope, headers))
        self.exchange.stream.headers += cors_headers(origin)
        method = self.scope["method"]
        if method == "OPTIONS":
            await self.exchange.stream.plain(204, b"", preflight_headers(headers))
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
        if modern:
            await self._post(body, principal, None)
            return
        self.legacy = legacy = LegacyEndpoints(self.exchange)
        if method == "GET":
            await legacy.get(principal)
        elif method == "DELETE":
            await legacy.delete(principal)
        else:
            await self._post(body, principal, legacy)

    async def _post(
        self, body: bytes, principal: Principal, legacy: LegacyEndpoints | None
    ) -> None:
        exchange = self.exchange
        if not accepts(exchange.headers, "application/json", "text/event-stream"):
            raise HttpError(
                406,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            )
        check_content_type(exchange.headers)
        try:
            message = parse_body(body)
            kind = kind_of(message)
        except ProtocolError as exc:
            logger.warning("refused a message (%d): %s", exc.code, exc.message)
            await exchange.error(None, exc)
            return
        if kind == "request":
            self.request_id = message["id"]
        if legacy is not None:
            await legacy.post(message, kind, principal)
        else:
            await self._modern(message, kind, principal)

    async def _modern(self, message: Message, kind: str, principal: Principal) -> None:
        exchange = self.exchange
        if kind == "notification":
            await exchange.stream.finish(None)
            return
        if kind == "response":
            await exchange.error(
                message.get("id"),
                ProtocolError(
                    INVALID_REQUEST, "The 2026-07-28 protocol has no server requests to respond to"
                ),
            )
            return
        try:
            info = modern_request_info(
                message, exchange.headers, principal, await lifespan_context()
            )
        except ProtocolError as exc:
            await exchange.error(message["id"], exc)
            return
        exchange.cancel_on_disconnect = True  # closing the stream cancels the request
        if message["method"] == "subscriptions/listen":
            await self._listen(message, info)
            return
        await exchange.respond(await request_runner.run(exchange, message, info), modern=True)

    async def _listen(self, message: Message, info: RequestInfo) -> None:
        """``subscriptions/listen``: a stream of the notifications it agreed to hear."""
        exchange = self.exchange
        if not accepts(exchange.headers, "text/event-stream"):
            raise HttpError(406, "Not Acceptable: subscriptions/listen needs text/event-stream")
        try:
            subscription = await self.dispatcher.subscribe(message, info)
        except ProtocolError as exc:
            await exchange.error(message["id"], exc)
            return
        self.subscription = subscription
        for task_id in subscription.task_ids:
            await exchange.membership.join(groups.task_shard_group(task_id))

        async def accept(notification: Message) -> bool:
            return subscription.accepts(notification)

        exchange.notify_filter = accept
        self._release()  # a stream, not a request in progress
        await exchange.membership.join(groups.BROADCAST)
        await exchange.stream.event(subscription.acknowledgement())
        await exchange.sink.keepalive()  # until the client closes the stream

"""One HTTP request on the MCP endpoint, as the router and the endpoints share it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.jsonrpc import Message, error_response
from ..exceptions import ProtocolError
from ..protocol import Dispatcher
from ..protocol.constants import http_headers_for, http_status_for
from .membership import Membership
from .request_sink import RequestSink
from .response_stream import ResponseStream

#: Picks the broadcast notifications a stream forwards (and may tag them).
NotifyFilter = Callable[[Message], Awaitable[bool]]


@dataclass
class Exchange:
    """The request's ASGI scope, headers, response stream, :class:`RequestSink` and end signal."""

    scope: dict[str, Any]
    dispatcher: Dispatcher
    stream: ResponseStream
    membership: Membership
    sink: RequestSink
    #: Cancels the request's work (a legacy call's ``notifications/cancelled``).
    cancel_work: Callable[[], None]
    headers: dict[str, str | list[str]] = field(default_factory=dict)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    #: Closing the connection cancels the request (modern era, and streams that answer
    #: nothing); a legacy call goes on and keeps its later events for a resume.
    cancel_on_disconnect: bool = False
    #: Set by streams that forward broadcast notifications.
    notify_filter: NotifyFilter | None = None

    async def error(self, request_id: Any, exc: ProtocolError) -> None:
        """Answer with a JSON-RPC error (the HTTP status its code maps to)."""
        await self.respond(error_response(request_id, exc.to_dict()), modern=True)

    async def respond(self, response: Message, modern: bool) -> None:
        """Send the response; a modern error sets its code's HTTP status and ``Retry-After``."""
        error = response.get("error")
        if not error or not modern:
            await self.stream.finish(response)
            return
        await self.stream.finish(
            response, status=http_status_for(error["code"]), headers=http_headers_for(error)
        )

"""Running one request through the dispatcher: the scope challenge (HTTP 403 first),
keep-alive pings, and its span and time when traces or metrics are on."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..core import metrics_hook, trace_hook
from ..core.jsonrpc import Message
from ..protocol import Dispatcher, RequestInfo
from .credentials import insufficient_scope
from .exchange import Exchange


@dataclass
class RequestRunner:
    """Runs the requests of one HTTP exchange (its ASGI ``scope``)."""

    dispatcher: Dispatcher
    exchange: Exchange
    scope: Any

    async def run(self, message: Message, info: RequestInfo) -> Message:
        """The request's JSON-RPC response, inside its span and timed when those are on."""
        if trace_hook.tracer is not None:
            return await self._traced(trace_hook.tracer, message, info)
        if metrics_hook.recorder is not None:
            return await self._measured(metrics_hook.recorder, message, info)
        return await self._run(message, info)

    async def _traced(
        self, tracer: trace_hook.Tracer, message: Message, info: RequestInfo
    ) -> Message:
        with tracer.request(message, info) as span:
            if metrics_hook.recorder is not None:
                response = await self._measured(metrics_hook.recorder, message, info)
            else:
                response = await self._run(message, info)
            span.answered(response)
            return response

    async def _measured(
        self, recorder: metrics_hook.Recorder, message: Message, info: RequestInfo
    ) -> Message:
        """:meth:`_run`, its time reported by method (an unknown method as ``other``)."""
        started = time.perf_counter()
        try:
            return await self._run(message, info)
        finally:
            method = message["method"]
            methods = self.dispatcher.methods
            if method not in methods.modern and method not in methods.legacy:
                method = "other"
            recorder.request_served(method, time.perf_counter() - started)

    async def _run(self, message: Message, info: RequestInfo) -> Message:
        missing = await self.dispatcher.scope_challenge(message, info.principal)
        if missing:
            raise insufficient_scope(self.scope, self.exchange.headers, missing)
        with self.exchange.sink.pinging():
            return await self.dispatcher.handle(message, info, self.exchange.sink)

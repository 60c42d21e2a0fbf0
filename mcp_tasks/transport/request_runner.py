"""Running one request through the dispatcher: the scope challenge (HTTP 403 first),
keep-alive pings, and its span and time when traces or metrics are on."""

from __future__ import annotations

import time

from ..core import metrics_hook, trace_hook
from ..core.jsonrpc import Message
from ..protocol import RequestInfo
from .credentials import insufficient_scope
from .exchange import Exchange


async def run(exchange: Exchange, message: Message, info: RequestInfo) -> Message:
    """The request's JSON-RPC response, inside its span and timed when those are on."""
    tracer = trace_hook.tracer
    if tracer is None:
        return await _measured(exchange, message, info)
    with tracer.request(message, info) as span:
        response = await _measured(exchange, message, info)
        span.answered(response)
        return response


async def _measured(exchange: Exchange, message: Message, info: RequestInfo) -> Message:
    """:func:`_run`, its time reported by method (an unknown method as ``other``)."""
    recorder = metrics_hook.recorder
    if recorder is None:
        return await _run(exchange, message, info)
    started = time.perf_counter()
    try:
        return await _run(exchange, message, info)
    finally:
        method = message["method"]
        methods = exchange.dispatcher.methods
        if method not in methods.modern and method not in methods.legacy:
            method = "other"
        recorder.request_served(method, time.perf_counter() - started)


async def _run(exchange: Exchange, message: Message, info: RequestInfo) -> Message:
    missing = await exchange.dispatcher.scope_challenge(message, info.principal)
    if missing:
        raise insufficient_scope(exchange.scope, exchange.headers, missing)
    with exchange.sink.pinging():
        return await exchange.dispatcher.handle(message, info, exchange.sink)

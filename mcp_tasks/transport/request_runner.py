"""Running one request through the dispatcher: the scope challenge (a token without the
scopes the target needs gets HTTP 403 first), keep-alive pings while it runs, and its span
and its time when traces or metrics are on."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..core import metrics_hook, trace_hook
from ..core.jsonrpc import Message
from ..protocol import Dispatcher, RequestInfo
from .credentials import insufficient_scope
from .exchange import Exchange


async def run_request(
    dispatcher: Dispatcher, exchange: Exchange, scope: Any, message: Message, info: RequestInfo
) -> Message:
    """Run one request through the dispatcher, pinging the stream while it runs; a
    token without the scopes the target needs gets HTTP 403 first."""
    if trace_hook.tracer is not None:
        return await _run_traced(trace_hook.tracer, dispatcher, exchange, scope, message, info)
    if metrics_hook.recorder is not None:
        return await _run_measured(
            metrics_hook.recorder, dispatcher, exchange, scope, message, info
        )
    return await _run(dispatcher, exchange, scope, message, info)


async def _run_traced(
    tracer: trace_hook.Tracer,
    dispatcher: Dispatcher,
    exchange: Exchange,
    scope: Any,
    message: Message,
    info: RequestInfo,
) -> Message:
    """:func:`run_request` inside the request's span (docs: Traces)."""
    session_id = info.session.id if info.session is not None else None
    with tracer.request(message, info.era, info.protocol_version, session_id, info.headers) as span:
        if metrics_hook.recorder is not None:
            response = await _run_measured(
                metrics_hook.recorder, dispatcher, exchange, scope, message, info
            )
        else:
            response = await _run(dispatcher, exchange, scope, message, info)
        span.answered(response)
        return response


async def _run_measured(
    recorder: metrics_hook.Recorder,
    dispatcher: Dispatcher,
    exchange: Exchange,
    scope: Any,
    message: Message,
    info: RequestInfo,
) -> Message:
    """:func:`_run`, its time reported by method (an unknown method as ``other``)."""
    started = time.perf_counter()
    try:
        return await _run(dispatcher, exchange, scope, message, info)
    finally:
        method = message["method"]
        methods = dispatcher.methods
        if method not in methods.modern and method not in methods.legacy:
            method = "other"
        recorder.request_served(method, time.perf_counter() - started)


async def _run(
    dispatcher: Dispatcher, exchange: Exchange, scope: Any, message: Message, info: RequestInfo
) -> Message:
    missing = await dispatcher.scope_challenge(message, info.principal)
    if missing:
        raise insufficient_scope(scope, exchange.headers, missing)
    keepalive = asyncio.ensure_future(exchange.sink.keepalive())
    try:
        return await dispatcher.handle(message, info, exchange.sink)
    finally:
        keepalive.cancel()

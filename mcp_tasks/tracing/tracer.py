"""The spans, on OpenTelemetry's API, named after its semantic conventions for MCP
(``docs/gen-ai/mcp.md``): a request's server span ``{mcp.method.name} {target}`` with the
``mcp.*``, ``jsonrpc.*`` and ``gen_ai.*`` attributes; errors set ``error.type`` (a
JSON-RPC code, or ``tool_error``). Task spans carry ``mcp_tasks.*`` attributes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..core.trace_hook import TracedRequest

#: ``params._meta`` and the stored carrier: W3C Trace Context (and Baggage in ``_meta``),
#: whatever propagator the site set for HTTP headers.
_W3C = TraceContextTextMapPropagator()
_BAGGAGE = W3CBaggagePropagator()
_META_KEYS = ("traceparent", "tracestate", "baggage")


class OtelSpan:
    """:class:`mcp_tasks.core.trace_hook.Span` on an OpenTelemetry span."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def set(self, key: str, value: str | int | bool) -> None:
        self.span.set_attribute(key, value)

    def answered(self, response: Mapping[str, Any]) -> None:
        error = response.get("error")
        if isinstance(error, Mapping):
            code = str(error.get("code"))
            self.span.set_attribute("error.type", code)
            self.span.set_attribute("rpc.response.status_code", code)
            self.span.set_status(Status(StatusCode.ERROR, str(error.get("message") or "")))
            return
        result = response.get("result")
        if isinstance(result, Mapping) and result.get("isError") is True:
            self.span.set_attribute("error.type", "tool_error")
            self.span.set_status(Status(StatusCode.ERROR, "tool_error"))


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` without the ones that are None."""
    return {key: value for key, value in values.items() if value is not None}


@contextmanager
def _ending(span: trace.Span, current: bool) -> Iterator[OtelSpan]:
    """Yield ``span`` (current while open when ``current``) and end it: an error is recorded,
    a cancel or suspension noted as ``mcp_tasks.interrupted``."""
    try:
        if current:
            with trace.use_span(
                span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                yield OtelSpan(span)
        else:
            yield OtelSpan(span)
    except Exception as exc:
        span.record_exception(exc)
        span.set_attribute("error.type", type(exc).__qualname__)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    except BaseException as exc:
        span.set_attribute("mcp_tasks.interrupted", type(exc).__name__)
        raise
    finally:
        span.end()


def _request_parent(
    message: Mapping[str, Any], headers: Mapping[str, str | list[str]]
) -> tuple[Context | None, list[Link]]:
    """A request span's parent: the client's ``params._meta`` trace context (linking the
    HTTP request's), else the current span, else the HTTP ``traceparent`` header."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    ambient = trace.get_current_span().get_span_context()
    if isinstance(meta, Mapping) and isinstance(meta.get("traceparent"), str):
        carrier = {key: meta[key] for key in _META_KEYS if isinstance(meta.get(key), str)}
        context = _BAGGAGE.extract(carrier, context=_W3C.extract(carrier))
        if trace.get_current_span(context).get_span_context().is_valid:
            transport = ambient if ambient.is_valid else _header_span(headers)
            return context, [Link(transport)] if transport.is_valid else []
    if ambient.is_valid:
        return None, []
    return propagate.extract(headers), []


def _header_span(headers: Mapping[str, str | list[str]]) -> trace.SpanContext:
    return trace.get_current_span(propagate.extract(headers)).get_span_context()


class OtelTracer:
    """:class:`mcp_tasks.core.trace_hook.Tracer` on the global ``TracerProvider`` (or
    ``provider``)."""

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        self.tracer = trace.get_tracer("mcp_tasks", tracer_provider=provider)

    def request(
        self, message: Mapping[str, Any], info: TracedRequest
    ) -> AbstractContextManager[OtelSpan]:
        method = str(message.get("method"))
        params = message.get("params")
        tool = params.get("name") if isinstance(params, Mapping) else None
        if method != "tools/call" or not isinstance(tool, str):
            tool = None
        request_id = message.get("id")
        parent, links = _request_parent(message, info.headers)
        span = self.tracer.start_span(
            f"{method} {tool}" if tool else method,
            context=parent,
            kind=SpanKind.SERVER,
            links=links,
            attributes=_attributes(
                {
                    "mcp.method.name": method,
                    "mcp.protocol.version": info.protocol_version,
                    "mcp.session.id": info.session_id,
                    "jsonrpc.request.id": None if request_id is None else str(request_id),
                    "gen_ai.tool.name": tool,
                    "gen_ai.operation.name": "execute_tool" if tool else None,
                    "network.protocol.name": "http",
                    "mcp_tasks.era": info.era,
                }
            ),
        )
        return _ending(span, current=True)

    def creation(self, tool: str) -> AbstractContextManager[OtelSpan]:
        span = self.tracer.start_span(f"create task {tool}", attributes={"gen_ai.tool.name": tool})
        return _ending(span, current=False)

    def carrier(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)
        return carrier

    def job(
        self, carrier: Mapping[str, str] | None, name: str, attributes: Mapping[str, Any]
    ) -> AbstractContextManager[OtelSpan]:
        parent = _W3C.extract(dict(carrier)) if carrier else None
        span = self.tracer.start_span(
            name, context=parent, kind=SpanKind.CONSUMER, attributes=_attributes(attributes)
        )
        return _ending(span, current=True)

    def span(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[OtelSpan]:
        return _ending(self.tracer.start_span(name, attributes=_attributes(attributes)), True)

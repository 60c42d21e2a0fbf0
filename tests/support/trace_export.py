"""Spans of a live server or worker, one JSON line each in a file (``MCP_TASKS_TEST_TRACE_FILE``),
or encoded and dropped (``MCP_TASKS_TEST_TRACING=otlp``, the benchmarks).

The SDK's in-memory exporter lives in one process; the live tests read the spans of
several (the server, the rq workers) from the file they all append to.
:func:`install` is called by ``tests.support.live_settings`` when the variable is set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """What the tests read of a finished span."""
    context = span.get_span_context()
    assert context is not None
    return {
        "trace_id": _hex(context.trace_id, 32),
        "span_id": _hex(context.span_id, 16),
        "parent_id": _hex(span.parent.span_id, 16) if span.parent is not None else None,
        "name": span.name,
        "kind": span.kind.name,
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "events": [event.name for event in span.events],
        "links": [
            {"trace_id": _hex(link.context.trace_id, 32), "span_id": _hex(link.context.span_id, 16)}
            for link in span.links
        ],
        "pid": os.getpid(),
    }


class JsonLinesExporter(SpanExporter):
    """Appends each span to ``path`` as one line (one write, so processes don't interleave)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        text = "".join(json.dumps(span_record(span), default=str) + "\n" for span in spans)
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, text.encode())
        finally:
            os.close(descriptor)
        return SpanExportResult.SUCCESS


def install(path: str) -> None:
    """This process's spans go to ``path`` (the global ``TracerProvider``)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(Path(path))))
    trace.set_tracer_provider(provider)


class OtlpEncodingExporter(SpanExporter):
    """Encodes each batch as OTLP protobuf, as an OTLP exporter does before its send, and drops
    it: the cost of tracing in the process, without a collector (``compare.py``'s ``observed``)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        encode_spans(spans).SerializeToString()
        return SpanExportResult.SUCCESS


def install_otlp_encoding() -> None:
    """This process's spans go through a ``BatchSpanProcessor`` to :class:`OtlpEncodingExporter`."""
    provider = TracerProvider(resource=Resource.create({"service.name": "mcp_tasks-benchmark"}))
    provider.add_span_processor(BatchSpanProcessor(OtlpEncodingExporter()))
    trace.set_tracer_provider(provider)


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Every span written to ``path`` so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

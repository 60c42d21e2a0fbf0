"""Tracing's switch and its spans' names (in process, the SDK's in-memory exporter): off by
default with nothing of OpenTelemetry imported; on, the spans carry the MCP semantic
conventions' attributes, take the client's ``params._meta`` trace context as parent, and
record errors."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest
from django.test import override_settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from mcp_tasks.core import trace_hook
from mcp_tasks.tracing import switch
from mcp_tasks.tracing.tracer import OtelTracer

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c"
HEADER_SPAN = "b7ad6b7169203331"


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> OtelTracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OtelTracer(provider)


@pytest.fixture
def tracing_on() -> Iterator[None]:
    with override_settings(MCP_TASKS={"TRACING": True}):
        yield


@dataclass(frozen=True)
class Facts:
    """What a request's span is told of it (``TracedRequest``)."""

    era: str
    protocol_version: str
    session_id: str | None
    headers: Mapping[str, str | list[str]]


def call(meta: dict[str, str] | None = None) -> dict[str, object]:
    params: dict[str, object] = {"name": "lookup", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


class TestSwitch:
    def test_off_by_default(self) -> None:
        assert trace_hook.tracer is None

    @pytest.mark.usefixtures("tracing_on")
    def test_the_setting_installs_the_tracer(self) -> None:
        assert isinstance(trace_hook.tracer, OtelTracer)

    def test_the_tracer_goes_when_the_setting_does(self) -> None:
        with override_settings(MCP_TASKS={"TRACING": True}):
            assert trace_hook.tracer is not None
        assert trace_hook.tracer is None

    @pytest.mark.usefixtures("tracing_on")
    def test_without_opentelemetry_nothing_is_installed(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(switch, "available", lambda: False)
        switch.connect()
        assert trace_hook.tracer is None

    def test_off_the_tracer_module_is_not_imported(self) -> None:
        """(``opentelemetry`` itself may be: redis-py imports it when it is installed, and
        the mcp SDK requires its API.)"""
        code = (
            "import sys, django; django.setup(); from mcp_tasks.core import trace_hook; "
            "print(trace_hook.tracer, 'mcp_tasks.tracing.tracer' in sys.modules)"
        )
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == ["None", "False"], out.stdout


class TestRequestSpan:
    def test_named_and_described_after_the_mcp_semantic_conventions(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        with tracer.request(call(), Facts("legacy", "2025-11-25", "session-1", {})) as span:
            span.answered({"jsonrpc": "2.0", "id": 7, "result": {"content": []}})
        (finished,) = exporter.get_finished_spans()
        assert finished.name == "tools/call lookup"
        assert finished.kind == trace.SpanKind.SERVER
        assert dict(finished.attributes or {}) == {
            "mcp.method.name": "tools/call",
            "mcp.protocol.version": "2025-11-25",
            "mcp.session.id": "session-1",
            "jsonrpc.request.id": "7",
            "gen_ai.tool.name": "lookup",
            "gen_ai.operation.name": "execute_tool",
            "network.protocol.name": "http",
            "mcp_tasks.era": "legacy",
        }
        assert finished.status.status_code == StatusCode.UNSET

    def test_a_method_without_a_target_is_named_by_its_method(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        message = {"jsonrpc": "2.0", "id": "a", "method": "tools/list"}
        with tracer.request(message, Facts("modern", "2026-07-28", None, {})):
            pass
        (finished,) = exporter.get_finished_spans()
        assert finished.name == "tools/list"
        assert "gen_ai.tool.name" not in (finished.attributes or {})
        assert "mcp.session.id" not in (finished.attributes or {})

    def test_the_clients_meta_context_is_the_parent_and_the_http_one_a_link(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        meta = {"traceparent": traceparent(CLIENT_TRACE, CLIENT_SPAN), "tracestate": "rojo=1"}
        headers = {"traceparent": traceparent(HEADER_TRACE, HEADER_SPAN)}
        with tracer.request(call(meta), Facts("modern", "2026-07-28", None, headers)):
            pass
        (finished,) = exporter.get_finished_spans()
        assert finished.parent is not None
        assert format(finished.context.trace_id, "032x") == CLIENT_TRACE
        assert format(finished.parent.span_id, "016x") == CLIENT_SPAN
        assert finished.parent.trace_state.get("rojo") == "1"
        (link,) = finished.links
        assert format(link.context.span_id, "016x") == HEADER_SPAN

    def test_without_meta_the_http_header_is_the_parent(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        headers = {"traceparent": traceparent(HEADER_TRACE, HEADER_SPAN)}
        with tracer.request(call(), Facts("modern", "2026-07-28", None, headers)):
            pass
        (finished,) = exporter.get_finished_spans()
        assert finished.parent is not None
        assert format(finished.parent.span_id, "016x") == HEADER_SPAN
        assert not finished.links

    def test_a_json_rpc_error_marks_the_span(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        with tracer.request(call(), Facts("modern", "2026-07-28", None, {})) as span:
            span.answered({"id": 7, "error": {"code": -32602, "message": "Unknown tool"}})
        (finished,) = exporter.get_finished_spans()
        assert finished.status.status_code == StatusCode.ERROR
        assert finished.status.description == "Unknown tool"
        assert finished.attributes is not None
        assert finished.attributes["error.type"] == "-32602"
        assert finished.attributes["rpc.response.status_code"] == "-32602"

    def test_a_tool_error_result_is_a_tool_error(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        with tracer.request(call(), Facts("modern", "2026-07-28", None, {})) as span:
            span.answered({"id": 7, "result": {"content": [], "isError": True}})
        (finished,) = exporter.get_finished_spans()
        assert finished.status.status_code == StatusCode.ERROR
        assert (finished.attributes or {})["error.type"] == "tool_error"


class TestTaskSpans:
    def test_a_job_is_a_child_of_the_carried_context(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        with tracer.request(call(), Facts("modern", "2026-07-28", None, {})):
            carrier = tracer.carrier()
            with tracer.creation("lookup"):
                pass
        with tracer.job(carrier, "task job lookup", {"mcp_tasks.task.run": 0}):
            with tracer.span("execute_tool lookup", {"gen_ai.tool.name": "lookup"}):
                pass
        creation, request, tool, job = exporter.get_finished_spans()
        assert creation.parent is not None and job.parent is not None and tool.parent is not None
        assert creation.parent.span_id == request.context.span_id
        assert job.parent.span_id == request.context.span_id
        assert job.context.trace_id == request.context.trace_id
        assert job.kind == trace.SpanKind.CONSUMER
        assert tool.parent.span_id == job.context.span_id

    def test_the_creation_span_is_not_current(self, tracer: OtelTracer) -> None:
        with tracer.request(call(), Facts("modern", "2026-07-28", None, {})):
            outside = tracer.carrier()
            with tracer.creation("lookup"):
                assert tracer.carrier() == outside

    def test_an_error_is_recorded_and_a_suspension_is_not_one(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        class Suspended(BaseException):
            pass

        with pytest.raises(ValueError), tracer.span("execute_tool lookup", {}):
            raise ValueError("no")
        with pytest.raises(Suspended), tracer.span("task wait for answers", {}):
            raise Suspended()
        failed, suspended = exporter.get_finished_spans()
        assert failed.status.status_code == StatusCode.ERROR
        assert [event.name for event in failed.events] == ["exception"]
        assert (failed.attributes or {})["error.type"] == "ValueError"
        assert suspended.status.status_code == StatusCode.UNSET
        assert (suspended.attributes or {})["mcp_tasks.interrupted"] == "Suspended"

    def test_a_job_without_a_carrier_starts_a_trace(
        self, tracer: OtelTracer, exporter: InMemorySpanExporter
    ) -> None:
        with tracer.job(None, "task job lookup", {"mcp_tasks.task.id": "t", "none": None}):
            pass
        (job,) = exporter.get_finished_spans()
        assert job.parent is None
        assert dict(job.attributes or {}) == {"mcp_tasks.task.id": "t"}

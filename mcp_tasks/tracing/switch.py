"""Turns tracing on or off in this process (start-up and ``setting_changed``), importing
``opentelemetry`` only when ``TRACING`` is on and it is installed. The site configures its
own ``TracerProvider`` and exporter; until it does, the spans go nowhere."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from ..core import module_available, trace_hook

#: Loaded by name: it imports opentelemetry.
TRACER = "mcp_tasks.tracing.tracer.OtelTracer"

_tracer: trace_hook.Tracer | None = None  # made once per process


def wanted() -> bool:
    """``MCP_TASKS["TRACING"]`` is True."""
    user = getattr(settings, "MCP_TASKS", None)
    return isinstance(user, dict) and user.get("TRACING") is True


def available() -> bool:
    """Whether ``opentelemetry`` (its API) can be imported (without importing it)."""
    return module_available("opentelemetry.trace")


def connect(**kwargs: Any) -> None:
    """Install the tracer when tracing is wanted and available, else none."""
    global _tracer
    if kwargs.get("setting", "MCP_TASKS") != "MCP_TASKS":
        return
    if not (wanted() and available()):
        trace_hook.install(None)
        return
    if _tracer is None:
        _tracer = import_string(TRACER)()
    trace_hook.install(_tracer)

"""Turns tracing on or off in this process (start-up and ``setting_changed``).

Nothing here imports ``opentelemetry``: the tracer that does is loaded by name, only when
``MCP_TASKS["TRACING"]`` is on and the package is installed. The site configures its own
``TracerProvider`` and exporter (README "Traces"); until it does, the spans go nowhere.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from ..core import trace_hook

#: Loaded by name: it imports opentelemetry.
TRACER = "mcp_tasks.tracing.tracer.OtelTracer"

_tracer: trace_hook.Tracer | None = None  # made once per process


def wanted() -> bool:
    """``MCP_TASKS["TRACING"]`` is True."""
    user = getattr(settings, "MCP_TASKS", None)
    return isinstance(user, dict) and user.get("TRACING") is True


def available() -> bool:
    """Whether ``opentelemetry`` (its API) can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except (ImportError, ValueError):
        return False


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

"""Turns metrics on or off in this process (start-up and ``setting_changed``), importing
``prometheus_client`` only when ``METRICS`` is on and it is installed."""

from __future__ import annotations

from typing import Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from ..core import metrics_hook, module_available

#: Loaded by name: it imports prometheus_client.
RECORDER = "mcp_tasks.metrics.recorder.PrometheusRecorder"


class Exposition(metrics_hook.Recorder, Protocol):
    """The installed recorder, which also renders every metric for a scrape."""

    def render(self, accept: str) -> tuple[bytes, str]:
        """The metrics in the format ``accept`` (an ``Accept`` header) asks for, and its
        content type."""
        ...


_recorder: Exposition | None = None  # made once per process: its metrics live as long


def wanted() -> bool:
    """``MCP_TASKS["METRICS"]`` is True (read here: a broken dict is E003's business)."""
    user = getattr(settings, "MCP_TASKS", None)
    return isinstance(user, dict) and user.get("METRICS") is True


def available() -> bool:
    """Whether ``prometheus_client`` can be imported (without importing it)."""
    return module_available("prometheus_client")


def connect(**kwargs: Any) -> None:
    """Install the recorder when metrics are wanted and available, else none."""
    global _recorder
    if kwargs.get("setting", "MCP_TASKS") != "MCP_TASKS":
        return
    if not (wanted() and available()):
        metrics_hook.install(None)
        return
    if _recorder is None:
        _recorder = import_string(RECORDER)()
    metrics_hook.install(_recorder)


def exposition() -> Exposition | None:
    """The recorder, while metrics are on in this process."""
    return _recorder if metrics_hook.recorder is _recorder else None

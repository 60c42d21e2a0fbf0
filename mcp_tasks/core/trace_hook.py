"""The trace hook: :data:`tracer` is None while ``TRACING`` is off (callers skip their span
with one ``if``), else :mod:`mcp_tasks.tracing`'s, handed plain values."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol


class Span(Protocol):
    """An open span, as the callers see it."""

    def set(self, key: str, value: str | int | bool) -> None:
        """Set one attribute."""

    def answered(self, response: Mapping[str, Any]) -> None:
        """The JSON-RPC response of the span's request: an error (or a tool result with
        ``isError``) marks the span failed."""


class TracedRequest(Protocol):
    """What a request's span tells of it (:class:`mcp_tasks.protocol.RequestInfo` is one)."""

    @property
    def era(self) -> str: ...
    @property
    def protocol_version(self) -> str: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def headers(self) -> Mapping[str, str | list[str]]: ...


class Tracer(Protocol):
    """The spans of a request, a task's creation and its jobs."""

    def request(
        self, message: Mapping[str, Any], info: TracedRequest
    ) -> AbstractContextManager[Span]:
        """A JSON-RPC request's server span (its parent: the client's ``params._meta``
        trace context, else the HTTP request's)."""

    def creation(self, tool: str) -> AbstractContextManager[Span]:
        """A task's creation: a child of the current span, not made current."""

    def carrier(self) -> dict[str, str]:
        """The current span's context (W3C ``traceparent``), to keep with a task."""

    def job(
        self, carrier: Mapping[str, str] | None, name: str, attributes: Mapping[str, Any]
    ) -> AbstractContextManager[Span]:
        """A task's job, a child of the context in ``carrier`` (the creating request)."""

    def span(self, name: str, attributes: Mapping[str, Any]) -> AbstractContextManager[Span]:
        """A child of the current span, made current (a tool's run, a question, a wait)."""


#: The installed tracer; None: tracing is off.
tracer: Tracer | None = None


def install(new: Tracer | None) -> None:
    """Trace with ``new`` from now on (None: not at all)."""
    global tracer
    tracer = new

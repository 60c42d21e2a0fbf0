"""The metrics hook: :data:`recorder` is None while ``METRICS`` is off (callers skip their
report with one ``if``), else :mod:`mcp_tasks.metrics`'s, handed plain values."""

from __future__ import annotations

from typing import Protocol


class Recorder(Protocol):
    """What the engine and the transport report (times in seconds)."""

    def task_created(self, tool: str) -> None: ...

    def task_started(self, tool: str, queued: float) -> None:
        """A task's first run started, ``queued`` seconds after the task was created."""

    def task_finished(self, tool: str, status: str, ran: float | None) -> None:
        """A task ended (``ran``: seconds since its first run started; None: it never ran)."""

    def quota_refused(self, quota: str) -> None:
        """A task call was refused by the quota named (``MAX_ACTIVE_TASKS`` …)."""

    def jobs_held_back(self, queue: str, fair_share: bool, parked: int) -> None:
        """A worker's take from ``queue`` found only principals at their bound here
        (``fair_share``) and/or parked ``parked`` jobs for their concurrency limit."""

    def slots_changed(self, busy: int, size: int) -> None:
        """This process's worker slots changed by ``busy`` in use and ``size`` in all."""

    def request_served(self, method: str, seconds: float) -> None:
        """A JSON-RPC request (``method``: a served method's name, or ``"other"``) ended."""

    def request_refused(self, reason: str) -> None:
        """A request was refused with HTTP 503 (``in_progress`` or ``accept_wait``)."""


#: The installed recorder; None: metrics are off.
recorder: Recorder | None = None


def install(new: Recorder | None) -> None:
    """Report to ``new`` from now on (None: to nobody)."""
    global recorder
    recorder = new

"""The recorder :mod:`.switch` installs in :mod:`mcp_tasks.core.metrics_hook`: each report
is one or two updates of :mod:`.registry`'s metrics."""

from __future__ import annotations

import atexit
import os

from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import mark_process_dead

from . import registry


class PrometheusRecorder:
    """Counts in this process; in multiprocess mode, its live gauges (worker slots) leave
    with it when it exits."""

    def __init__(self) -> None:
        directory = registry.multiprocess_dir()
        if directory is not None:
            atexit.register(_leave, os.getpid(), directory)

    def task_created(self, tool: str) -> None:
        registry.TASKS_CREATED.labels(tool).inc()

    def task_started(self, tool: str, queued: float) -> None:
        registry.TASK_QUEUE_WAIT.labels(tool).observe(queued)

    def task_finished(self, tool: str, status: str, ran: float | None) -> None:
        registry.TASKS_FINISHED.labels(tool, status).inc()
        if ran is not None:
            registry.TASK_RUN_TIME.labels(tool, status).observe(ran)

    def quota_refused(self, quota: str) -> None:
        registry.QUOTA_REFUSALS.labels(quota).inc()

    def jobs_held_back(self, queue: str, fair_share: bool, parked: int) -> None:
        if fair_share:
            registry.FAIR_SHARE_DEFERRALS.labels(queue).inc()
        if parked:
            registry.LIMIT_PARKED.labels(queue).inc(parked)

    def slots_changed(self, busy: int, size: int) -> None:
        if busy:
            registry.SLOTS_BUSY.inc(busy)
        if size:
            registry.SLOTS.inc(size)

    def request_served(self, method: str, seconds: float) -> None:
        registry.REQUEST_DURATION.labels(method).observe(seconds)

    def request_refused(self, reason: str) -> None:
        registry.REQUESTS_REFUSED.labels(reason).inc()

    def render(self, accept: str) -> tuple[bytes, str]:
        """Every metric in the format the scraper's ``Accept`` header asks for (Prometheus'
        text format unless it asks for OpenMetrics), and its content type."""
        encode, content_type = choose_encoder(accept)
        return encode(registry.scrape_registry()), content_type


def _leave(pid: int, directory: str) -> None:
    """At exit: drop this process's live gauges (not in a forked child: rq's work-horses
    inherit the hook, and their parent lives on)."""
    if os.getpid() == pid:
        mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]

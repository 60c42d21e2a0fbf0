"""The ``mcp_tasks_*`` metrics. With ``PROMETHEUS_MULTIPROC_DIR`` set (before
``prometheus_client`` is imported) a scrape adds up every process's; else each serves its own."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.multiprocess import MultiProcessCollector

from .collector import DatabaseCollector

#: This process's own metrics (the scrape of a single process; unused in multiprocess mode).
REGISTRY = CollectorRegistry()

_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
_RUN_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400)
_REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

TASKS_CREATED = Counter(
    "mcp_tasks_tasks_created",
    "Tasks created, by tool.",
    ["tool"],
    registry=REGISTRY,
)
TASKS_FINISHED = Counter(
    "mcp_tasks_tasks_finished",
    "Tasks that ended, by tool and status (completed, failed, cancelled).",
    ["tool", "status"],
    registry=REGISTRY,
)
TASK_QUEUE_WAIT = Histogram(
    "mcp_tasks_task_queue_wait_seconds",
    "Seconds from a task's creation to the start of its first run, by tool.",
    ["tool"],
    buckets=_WAIT_BUCKETS,
    registry=REGISTRY,
)
TASK_RUN_TIME = Histogram(
    "mcp_tasks_task_run_seconds",
    "Seconds from the start of a task's first run to its end (waits for answers and "
    "retries included), by tool and status; tasks that never ran are not observed.",
    ["tool", "status"],
    buckets=_RUN_BUCKETS,
    registry=REGISTRY,
)
QUOTA_REFUSALS = Counter(
    "mcp_tasks_quota_refusals",
    "Task calls refused by a quota of active tasks, by quota (MAX_ACTIVE_TASKS, "
    "MAX_ACTIVE_TASKS_PER_CLIENT).",
    ["quota"],
    registry=REGISTRY,
)
FAIR_SHARE_DEFERRALS = Counter(
    "mcp_tasks_fair_share_deferrals",
    "Takes of a worker with free slots that found jobs ready only of principals already "
    "running all but RESERVED_SLOTS of its slots, by queue.",
    ["queue"],
    registry=REGISTRY,
)
LIMIT_PARKED = Counter(
    "mcp_tasks_concurrency_limit_parked",
    "Jobs parked because their concurrency limit (TaskConfig(concurrency=...)) was full, by queue.",
    ["queue"],
    registry=REGISTRY,
)
SLOTS_BUSY = Gauge(
    "mcp_tasks_worker_slots_busy",
    "Task worker slots running a tool (summed over the live processes).",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
SLOTS = Gauge(
    "mcp_tasks_worker_slots",
    "Task worker slots in all (TASK_CONCURRENCY per TaskWorker; summed over the live processes).",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
REQUEST_DURATION = Histogram(
    "mcp_tasks_request_duration_seconds",
    "Seconds to answer a JSON-RPC request, by method (unknown methods: other); its "
    "_count is the requests served.",
    ["method"],
    buckets=_REQUEST_BUCKETS,
    registry=REGISTRY,
)
REQUESTS_REFUSED = Counter(
    "mcp_tasks_requests_refused",
    "Requests refused with HTTP 503, by reason (in_progress: MAX_REQUESTS_IN_PROGRESS; "
    "accept_wait: MAX_ACCEPT_WAIT).",
    ["reason"],
    registry=REGISTRY,
)


#: The scrape of a single process: :data:`REGISTRY` (a registry is a collector) and the
#: database's gauges.
_SINGLE_PROCESS = CollectorRegistry()
_SINGLE_PROCESS.register(REGISTRY)
_SINGLE_PROCESS.register(DatabaseCollector())


def multiprocess_dir() -> str | None:
    """The directory every process writes its values to (None: single-process mode)."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def scrape_registry() -> CollectorRegistry:
    """What one scrape serves: every process's values (multiprocess mode) or this one's,
    and the database's gauges."""
    if multiprocess_dir() is None:
        return _SINGLE_PROCESS
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(DatabaseCollector())
    return registry

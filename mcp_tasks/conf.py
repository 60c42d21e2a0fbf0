"""The ``MCP_TASKS`` settings dict, merged over documented defaults.

Read settings through :func:`get_config`; the cache is cleared when Django's
``setting_changed`` signal fires (``override_settings`` works in tests).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.conf import settings

#: Every key of ``settings.MCP_TASKS`` with its default. Documented in the README.
DEFAULTS: dict[str, Any] = {
    # URL path of the MCP endpoint.
    "PATH": "/mcp",
    # Name, version and instructions announced to clients.
    "SERVER_NAME": "mcp-tasks",
    "SERVER_VERSION": "0.1.0",
    "INSTRUCTIONS": None,
    # Extra browser origins allowed to call the endpoint ("https://app.example.com").
    # Requests without an Origin header, and origins whose host is in ALLOWED_HOSTS
    # and matches the request's Host, are always allowed.
    "ALLOWED_ORIGINS": [],
    # Largest accepted request body in bytes (larger → HTTP 413).
    "MAX_BODY_BYTES": 4 * 1024 * 1024,
    # Dotted path to a callable ``(token: str) -> AccessToken | None`` (sync or async)
    # that verifies bearer tokens. None: bearer tokens are rejected with 401.
    "TOKEN_VERIFIER": None,
    # Serve clients with no credentials at all. False → 401 for them.
    "ALLOW_ANONYMOUS": True,
    # URL of the OAuth protected-resource metadata, announced in WWW-Authenticate.
    "RESOURCE_METADATA_URL": None,
    # Seconds a modern-era requestState (MRTR) stays valid.
    "REQUEST_STATE_TTL": 900,
    # Seconds between ": ping" comments on idle SSE streams.
    "SSE_KEEPALIVE": 15.0,
    # Seconds a legacy-era call waits for the client's reply to a server request.
    "CLIENT_REQUEST_TIMEOUT": 300.0,
    # Seconds of inactivity after which a legacy session is forgotten.
    "SESSION_IDLE_TIMEOUT": 24 * 3600,
    # Dotted path to an async context manager factory ``(server) -> AsyncContextManager[T]``;
    # T is exposed to tools as ``ctx.lifespan_context``.
    "LIFESPAN": None,
    # Alias of the channel layer used for cross-process routing.
    "CHANNEL_LAYER": "default",
    # ``ttlMs`` announced on list results and server/discover (modern era).
    "LIST_TTL_MS": 0,
    # --- background tasks ---
    # rq queue for task jobs (a tool's TaskConfig(queue=...) overrides it).
    "TASK_QUEUE": "mcp_tasks",
    # Seconds a task and its result are kept after creation (None: forever); TaskConfig(ttl=...).
    "TASK_TTL": 24 * 3600,
    # Seconds between polls suggested to clients (pollIntervalMs); TaskConfig(poll_interval=...).
    "TASK_POLL_INTERVAL": 0.5,
    # rq job timeout in seconds; TaskConfig(timeout=...).
    "TASK_TIMEOUT": 3600,
    # Seconds between the housekeeping runs of each TaskWorker (stalled tasks, timed-out
    # questions, expired rows): the bound on how late those are noticed.
    "TASK_MAINTENANCE_INTERVAL": 30,
    # Seconds between a running task's heartbeats.
    "TASK_HEARTBEAT_INTERVAL": 5.0,
    # A task whose heartbeat is older than this many seconds failed with its worker.
    "TASK_LOST_AFTER": 30.0,
    # A task still queued after this many seconds whose job vanished (Redis restarted
    # without persistence) is queued again.
    "TASK_REQUEUE_AFTER": 30.0,
    # Seconds a worker waits for an answer to ctx.elicit/ctx.sample before it lets go of the
    # task (the task resumes on a new job once answered).
    "INPUT_HOLD_WINDOW": 5.0,
    # Seconds a task's question waits before the tool gets CancelledElicitation.
    "INPUT_TIMEOUT": 24 * 3600,
    # Request headers kept (encrypted) in a task's snapshot and shown to the tool as ctx.headers.
    "SNAPSHOT_HEADERS": ["user-agent", "accept-language", "x-request-id"],
    # Run rq worker threads inside the ASGI process (development without Redis), and how many.
    "EMBEDDED_WORKER": False,
    "EMBEDDED_WORKERS": 4,
}


@lru_cache(maxsize=1)
def get_config() -> dict[str, Any]:
    """Return ``MCP_TASKS`` merged over :data:`DEFAULTS`."""
    user = getattr(settings, "MCP_TASKS", None) or {}
    return {**DEFAULTS, **user}


def reset_config(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: forget the cached config."""
    if setting == "MCP_TASKS":
        get_config.cache_clear()

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
    # Extra browser origins allowed to call the endpoint ("https://app.example.com"), or "*".
    # Requests without an Origin header, and the server's own origin (the request's scheme,
    # Host and port; SECURE_PROXY_SSL_HEADER honoured), are always allowed.
    "ALLOWED_ORIGINS": [],
    # Largest accepted request body in bytes (larger → HTTP 413).
    "MAX_BODY_BYTES": 4 * 1024 * 1024,
    # POSTs one process serves at once; past it a new POST gets HTTP 503 with Retry-After
    # and a JSON-RPC error (-32000), logged as a warning. Streams (a legacy GET, an
    # acknowledged subscriptions/listen) don't count. None: no limit.
    "MAX_REQUESTS_IN_PROGRESS": 1000,
    # Seconds a new connection may wait in the kernel's accept queue before the server takes
    # it; past it, HTTP 503 with Retry-After at once, without running the application. Read by
    # the uvicorn protocols of mcp_tasks.contrib.uvicorn_http (README "Production"), Linux
    # only. None: no limit.
    "MAX_ACCEPT_WAIT": 1.0,
    # Dotted path to a callable ``(token: str) -> AccessToken | None`` (sync or async)
    # that verifies bearer tokens. None: bearer tokens are rejected with 401.
    "TOKEN_VERIFIER": None,
    # Serve clients with no credentials at all. False → 401 for them.
    "ALLOW_ANONYMOUS": True,
    # Seconds the request path remembers whether a user holds a tool's Django permissions
    # (tools/list, tools/call …; 0: ask every time). Workers always ask afresh.
    "PERMISSION_CACHE_TTL": 5.0,
    # --- OAuth (RFC 9728 protected resource metadata, RFC 8707 resource indicators) ---
    # Issuer URLs of the authorization servers clients sign in with ("/" or "/o": an issuer
    # on this server's own origin). Non-empty: the
    # metadata document is served at /.well-known/oauth-protected-resource[PATH] and 401
    # challenges point at it.
    "AUTHORIZATION_SERVERS": [],
    # Canonical URI of this MCP server (the tokens' audience). None: the request's
    # scheme://host + PATH.
    "RESOURCE": None,
    # Scopes announced in the metadata. None: SIGN_IN_SCOPES, then every scope the
    # registered items require.
    "SCOPES_SUPPORTED": None,
    # Scopes a client asks for to use this server at all (e.g. the authorization server's
    # default scope): every 401 challenge names them (scope="..."). Not checked on tokens;
    # items that need a scope say so with scopes=[...].
    "SIGN_IN_SCOPES": [],
    # How clients may send the bearer token (only the Authorization header is read).
    "BEARER_METHODS_SUPPORTED": ["header"],
    # Seconds the ready verifiers (mcp_tasks.auth.verifiers.dot / .jwks) remember a verified
    # token (0: verify every request). A revoked token is refused after at most this long.
    "TOKEN_CACHE_TTL": 10.0,
    # mcp_tasks.auth.verifiers.jwks: the issuer (``iss``), its JWKS URL and accepted algorithms.
    "JWT_ISSUER": None,
    "JWT_JWKS_URL": None,
    "JWT_ALGORITHMS": ["RS256", "ES256"],
    # URL of the protected-resource metadata announced in WWW-Authenticate. None: built
    # from the request when AUTHORIZATION_SERVERS is set.
    "RESOURCE_METADATA_URL": None,
    # Seconds a modern-era requestState (MRTR) stays valid.
    "REQUEST_STATE_TTL": 900,
    # Seconds between ": ping" comments on idle SSE streams.
    "SSE_KEEPALIVE": 15.0,
    # Seconds a legacy-era call waits for the client's reply to a server request.
    "CLIENT_REQUEST_TIMEOUT": 300.0,
    # Seconds of inactivity after which a legacy session is forgotten.
    "SESSION_IDLE_TIMEOUT": 24 * 3600,
    # Seconds a process keeps a legacy session it read, instead of reading it per request
    # (0: read it every time). A DELETE or logging/setLevel drops it in every process at
    # once through the channel layer; the TTL bounds staleness if that message is lost.
    "SESSION_CACHE_TTL": 10.0,
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
    # Seconds a tasks/get of a working task may wait for the task's next change before it
    # answers (it answers at once when the task changes; 0: always at once).
    "TASK_GET_HOLD": 0.5,
    # --- clients without the tasks extension (README "Clients without tasks") ---
    # A task tool called by a client that does not speak tasks (most hosts) still runs as a
    # task: the call waits INLINE_WINDOW seconds for it, then answers with a handle, and
    # companion tools (COMPANION_TOOLS) check, answer, cancel and list such tasks. False:
    # such a call runs an optional tool inline and refuses a required one (-32021).
    "TASKS_FOR_ALL_CLIENTS": True,
    # Seconds such a call waits for its task before it answers with a handle (progress and
    # questions meanwhile where the client takes them); TaskConfig(inline_window=...). Keep
    # it well under the clients' request timeout (60 s in the TypeScript SDK).
    "INLINE_WINDOW": 20.0,
    # The longest wait of the check tool: it answers at the task's next change or then.
    "CHECK_WAIT": 20.0,
    # Names of the companion tools, listed only to clients without the tasks extension.
    "COMPANION_TOOLS": {
        "check": "check_task",
        "answer": "answer_task",
        "cancel": "cancel_task",
        "list": "list_tasks",
    },
    # rq job timeout in seconds; TaskConfig(timeout=...).
    "TASK_TIMEOUT": 3600,
    # Tools a TaskWorker process runs at once (async tools on its event loop, sync tools on
    # its thread pool). A task waiting for an answer does not count.
    "TASK_CONCURRENCY": 16,
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
    # Seconds a write to Redis that a request or a running task waits on (a new task's job
    # queued, a task's question announced) keeps being tried while Redis is unreachable (a
    # Sentinel failover, a restart) before it fails: cover the Sentinels' failover time
    # (down-after-milliseconds plus a second or two). README "High availability".
    "REDIS_FAILOVER_WAIT": 5.0,
    # Seconds a worker waits for an answer to ctx.elicit/ctx.sample before it lets go of the
    # task (the task resumes on a new job once answered).
    "INPUT_HOLD_WINDOW": 5.0,
    # Seconds a task's question waits before the tool gets CancelledElicitation.
    "INPUT_TIMEOUT": 24 * 3600,
    # Request headers kept (encrypted) in a task's snapshot and shown to the tool as ctx.headers.
    "SNAPSHOT_HEADERS": ["user-agent", "accept-language", "x-request-id"],
    # --- limits and fairness (README "Limits and fairness") ---
    # Free worker slots go to the principals with tasks waiting in turn (round robin), so
    # one caller's backlog does not delay the others; False: one line, first in first out.
    "FAIR_SHARE": True,
    # Slots of each TaskWorker that one principal never fills: they stay for the next
    # principal, whose task then starts at once instead of when a running task ends (with
    # FAIR_SHARE; a worker of one slot keeps none). 0: a principal may fill a worker.
    "RESERVED_SLOTS": 1,
    # Tasks one principal may have that are not over yet (working or input_required); a
    # task call past it is refused with -32029 (HTTP 429 with Retry-After on the modern
    # era) and nothing is written. None: no limit.
    "MAX_ACTIVE_TASKS": 1000,
    # The same per OAuth client (the client_id of the bearer token), over all its users.
    # None: no limit.
    "MAX_ACTIVE_TASKS_PER_CLIENT": None,
    # Run a task worker thread inside the ASGI process (development without Redis), and how
    # many (each runs TASK_CONCURRENCY tasks at once).
    "EMBEDDED_WORKER": False,
    "EMBEDDED_WORKERS": 1,
    # Once a process has started (the ASGI application built, a worker bootstrapped), move
    # the objects alive then (Django, the app's modules, tools) out of the cyclic garbage
    # collector's generations (gc.freeze()): its full collections then scan only what was
    # made since, instead of stalling a loaded process for ~0.1 s every few seconds.
    "GC_FREEZE": True,
    # --- operators ---
    # E-mail new questions to the people who may answer them (needs SITE_URL for the links).
    "NOTIFY_QUESTIONS": False,
    # Addresses those mails go to (every question). Empty: each question to the active staff
    # users with an e-mail address who may answer it: ``mcp_tasks.answer_inputrequest``, or a
    # staff question's own permission and group (superusers included).
    "NOTIFY_RECIPIENTS": [],
    # Seconds after a notification mail during which new questions are gathered; they go out
    # together in one digest once the window has passed.
    "NOTIFY_DIGEST_WINDOW": 60,
    # Scheme and host that links in mails start with ("https://ops.example.com").
    "SITE_URL": None,
    # URL path of the live admin's WebSocket, routed by mcp_application (e.g.
    # "/mcp-tasks/admin-live/"). None: no WebSocket and no publishing for it; the admin's
    # task and question pages refresh every ADMIN_REFRESH_INTERVAL seconds instead.
    "ADMIN_LIVE_PATH": None,
    # Seconds between refreshes of the admin's task and question pages when their WebSocket
    # is not available (0: never).
    "ADMIN_REFRESH_INTERVAL": 5,
    # Prometheus metrics (README "Metrics"; needs the `metrics` extra, prometheus-client):
    # each process counts tasks, requests and refusals, and mcp_tasks.metrics.view.metrics
    # serves them with the database's gauges. Set PROMETHEUS_MULTIPROC_DIR so that all the
    # processes of a host count together. False: nothing is imported or counted.
    "METRICS": False,
    # A bearer token the metrics view requires (Authorization: Bearer <token>). None: no
    # token; restrict the view by network then.
    "METRICS_TOKEN": None,
    # OpenTelemetry traces (README "Traces"; needs the `otel` extra, opentelemetry-api): a
    # span per MCP request, a task's creation, each of its jobs in the worker (a child of the
    # creating request), its questions and waits, and the tool's run. The site configures
    # its TracerProvider and exporter. False: nothing is imported or traced.
    "TRACING": False,
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

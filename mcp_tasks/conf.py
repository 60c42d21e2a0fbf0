"""The ``MCP_TASKS`` settings: one typed, frozen object, :class:`McpTasksSettings`, validated
over the defaults by :func:`get_config` once per ``setting_changed``. Each field carries its
default and the documentation the docs' settings table is written from; the system checks
report validation errors (E003 an unknown key, E015 a wrong value)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Annotated, Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from .core import LONGEST_SECONDS


def setting(default: Any, doc: str) -> Any:
    """A field of :class:`McpTasksSettings`: its default and its documentation."""
    return Field(default, description=doc)


def _url_path(value: str) -> str:
    if not value.startswith("/") or len(value) < 2:
        raise ValueError("must be a URL path starting with '/' (e.g. '/mcp')")
    return value


def _dotted_path(value: Any) -> str | Callable[..., Any]:
    if (isinstance(value, str) and "." in value) or (
        callable(value) and not isinstance(value, str)
    ):
        return value
    raise ValueError("must be a dotted import path ('package.module.name') or a callable")


def _seconds(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValueError("must be a number of seconds")
    if value < 0:
        raise ValueError("must not be negative")
    if value > LONGEST_SECONDS:  # infinity too
        raise ValueError("must be at most a century (use None where it means no limit)")
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ValueError("must be a list of strings")
    return tuple(value)


def _site_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be the site's absolute URL ('https://ops.example.com')")
    return value


#: True or False.
Flag = StrictBool
#: A non-empty string.
Text = Annotated[StrictStr, Field(min_length=1)]
#: A list (or tuple) of strings, kept as a tuple.
Strings = Annotated[tuple[str, ...], BeforeValidator(_strings)]
#: Seconds: a number, 0 or more.
Seconds = Annotated[int | float, PlainValidator(_seconds)]
#: A whole number, 0 or more.
Count = Annotated[StrictInt, Field(ge=0)]
#: A whole number, 1 or more.
Positive = Annotated[StrictInt, Field(ge=1)]
UrlPath = Annotated[StrictStr, AfterValidator(_url_path)]
DottedPath = Annotated[str | Callable[..., Any], PlainValidator(_dotted_path)]
SiteUrl = Annotated[StrictStr, AfterValidator(_site_url)]


class CompanionToolNames(BaseModel):
    """The companion tools' names (README "Clients without tasks"); check ``E020``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    check: Text = "check_task"
    answer: Text = "answer_task"
    cancel: Text = "cancel_task"
    list: Text = "list_tasks"


class _Endpoint(BaseModel):
    """The endpoint: its path, what it announces, what it accepts and who may call."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    PATH: UrlPath = setting("/mcp", "URL path of the MCP endpoint.")
    SERVER_NAME: Text = setting("mcp-tasks", "Server name announced to clients.")
    SERVER_VERSION: Text = setting("0.1.0", "Server version announced to clients.")
    INSTRUCTIONS: StrictStr | None = setting(
        None, "Instructions for the model, announced to clients."
    )
    ALLOWED_ORIGINS: Strings = setting(
        (),
        'Extra browser origins allowed to call the endpoint (`"https://app.example.com"`; a '
        'default port written or not), or `"*"`. Requests without an `Origin` header, and '
        "the server's own origin (the request's scheme, `Host` and port; behind a proxy that "
        "ends TLS, the scheme `SECURE_PROXY_SSL_HEADER` reads), are always allowed; any other "
        "origin gets 403.",
    )
    MAX_BODY_BYTES: Count = setting(
        4 * 1024 * 1024, "Largest accepted request body; larger → HTTP 413."
    )
    MAX_REQUESTS_IN_PROGRESS: Positive | None = setting(
        1000,
        "POSTs one process serves at once. Past it a new POST is refused at once with HTTP "
        '503, `Retry-After: 1` and a JSON-RPC error (`-32000` "Server busy"), logged as a '
        "warning (at most once a second, with the count). Streams don't count: a legacy "
        "`GET`, an acknowledged `subscriptions/listen`. Requests that wait long still count "
        "(a slow tool, a legacy call waiting for the client's answer, a `tasks/get` held up "
        "to `TASK_GET_HOLD`): raise it if many do. `None`: no limit.",
    )
    MAX_ACCEPT_WAIT: Seconds | None = setting(
        1.0,
        "Seconds a new connection may wait in the kernel's accept queue. Past it, uvicorn run "
        "with `--http mcp_tasks.contrib.uvicorn_http:HttpToolsProtocol` answers it with HTTP "
        '503, `Retry-After: 1` and a JSON-RPC error (`-32000` "Server busy") without '
        "running the application, and refuses the other late connections of the queue at once "
        "(see [Production](../how-to/production.md)). Linux only (`TCP_INFO`); other ASGI "
        "servers ignore it. `None`: no limit.",
    )
    TOKEN_VERIFIER: DottedPath | None = setting(
        None,
        "Dotted path to a callable `(token: str) -> AccessToken | None` (sync or async) that "
        "verifies bearer tokens. `None`: bearer tokens are rejected with 401.",
    )
    ALLOW_ANONYMOUS: Flag = setting(
        True, "Serve clients with no credentials at all; `False` → 401 for them."
    )
    PERMISSION_CACHE_TTL: Seconds = setting(
        5.0,
        "Seconds the request path remembers whether a user holds the Django permissions a "
        "tool, prompt or resource requires (`0`: ask every time). Workers ask afresh before "
        "every job.",
    )


class _SignIn(_Endpoint):
    """Sign-in with OAuth, and the protocol's own timers."""

    AUTHORIZATION_SERVERS: Strings = setting(
        (),
        "Issuer URLs of the OAuth authorization servers clients sign in with; a path "
        '(`"/"`, `"/o"`) is an issuer on this server\'s own origin. Non-empty: the RFC '
        "9728 metadata is served at `/.well-known/oauth-protected-resource` and "
        "`/.well-known/oauth-protected-resource<PATH>`, and 401 challenges point at it. See "
        "[Sign-in](../how-to/sign-in.md).",
    )
    RESOURCE: StrictStr | None = setting(
        None,
        "Canonical URI of this MCP server, the audience tokens must be issued for (RFC 8707). "
        "`None`: the request's `scheme://host` + `PATH`.",
    )
    SCOPES_SUPPORTED: Strings | None = setting(
        None,
        "Scopes announced in the metadata. `None`: `SIGN_IN_SCOPES`, then every scope a "
        "registered tool, prompt or resource requires.",
    )
    SIGN_IN_SCOPES: Strings = setting(
        (),
        "Scopes a client asks for to use this server at all (e.g. the authorization server's "
        'default scope): every 401 challenge names them (`scope="…"`, as the MCP '
        "authorization spec asks), and they lead `scopes_supported`. Not checked on tokens: "
        "items that need a scope say so with `scopes=[...]`. See "
        "[Sign-in](../how-to/sign-in.md).",
    )
    BEARER_METHODS_SUPPORTED: Strings = setting(
        ("header",),
        "How clients may send the token, announced in the metadata (only the `Authorization` "
        "header is read).",
    )
    TOKEN_CACHE_TTL: Seconds = setting(
        10.0,
        "Seconds the ready verifiers remember a verified token (`0`: verify every request); a "
        "revoked token is refused after at most this long.",
    )
    JWT_ISSUER: StrictStr | None = setting(
        None, "`mcp_tasks.auth.verifiers.jwks`: the `iss` every token must carry."
    )
    JWT_JWKS_URL: StrictStr | None = setting(
        None, "`mcp_tasks.auth.verifiers.jwks`: the issuer's JWKS URL (keys are cached 5 minutes)."
    )
    JWT_ALGORITHMS: Strings = setting(
        ("RS256", "ES256"), "`mcp_tasks.auth.verifiers.jwks`: accepted signature algorithms."
    )
    RESOURCE_METADATA_URL: StrictStr | None = setting(
        None,
        "URL of the protected-resource metadata announced in `WWW-Authenticate`. `None`: "
        "built from the request when `AUTHORIZATION_SERVERS` is set.",
    )
    REQUEST_STATE_TTL: Seconds = setting(
        900, "Seconds a modern-era `requestState` (input-required retry) stays valid."
    )
    SSE_KEEPALIVE: Seconds = setting(15.0, "Seconds between `: ping` comments on idle SSE streams.")
    CLIENT_REQUEST_TIMEOUT: Seconds = setting(
        300.0,
        "Seconds a legacy-era call waits for the client's reply to a server request "
        "(elicitation, sampling, roots).",
    )
    SESSION_IDLE_TIMEOUT: Seconds = setting(
        24 * 3600, "Seconds of inactivity after which a legacy session is forgotten."
    )
    SESSION_CACHE_TTL: Seconds = setting(
        10.0,
        "Seconds a process keeps a legacy session it read from the database, instead of "
        "reading it on every request. A `DELETE` or `logging/setLevel` drops it from every "
        "process through the channel layer before the client gets its answer: a process lists "
        "itself in the channel layer's Redis as keeping the session before it reads it, and "
        "the change waits (at most 2 s) until each listed process acknowledged dropping its "
        "copy, so a request answered from a kept copy costs no round trip. The TTL bounds how "
        "long a change goes unseen if that message is lost (Redis restarting). `0`: read the "
        "session on every request.",
    )
    LIFESPAN: DottedPath | None = setting(
        None,
        "Dotted path to an async context manager factory `(server) -> "
        "AsyncContextManager[T]`; `T` is `ctx.lifespan_context`.",
    )
    CHANNEL_LAYER: Text = setting(
        "default", "Alias in `CHANNEL_LAYERS` used for cross-process routing."
    )
    LIST_TTL_MS: Count = setting(
        0, "`ttlMs` announced on list results and `server/discover` (modern era)."
    )


class _Tasks(_SignIn):
    """Background tasks."""

    TASK_QUEUE: Text = setting(
        "mcp_tasks", "rq queue for task jobs; `TaskConfig(queue=...)` overrides it."
    )
    TASK_TTL: Seconds | None = setting(
        24 * 3600,
        "Seconds a task and its result are kept after creation (`None`: forever); "
        "`TaskConfig(ttl=...)`.",
    )
    TASK_POLL_INTERVAL: Seconds = setting(
        0.5,
        "Seconds between polls suggested to clients (`pollIntervalMs`); "
        "`TaskConfig(poll_interval=...)`.",
    )
    TASK_GET_HOLD: Seconds = setting(
        0.5,
        "Seconds a `tasks/get` of a `working` task may wait for the task's next change before "
        "it answers: it answers the moment the task changes (a result, a question, progress), "
        "so a client hears of it at once instead of at its next poll. `0`: always at once.",
    )


class _ClientsWithoutTasks(_Tasks):
    """Clients without the tasks extension, and the workers."""

    TASKS_FOR_ALL_CLIENTS: Flag = setting(
        True,
        "A task tool called by a client that does not speak tasks (no "
        "`io.modelcontextprotocol/tasks` extension in the request; a 2025 session without the "
        "`tasks` capability) still runs as a task: the call waits `INLINE_WINDOW`, then "
        "answers with a handle, and the companion tools check, answer, cancel and list such "
        "tasks ([Clients without tasks](../how-to/clients.md#clients-without-tasks)). "
        "`False`: such a call runs an `optional` tool inline and refuses a `required` one "
        "(`-32021`), and no companion tool is listed.",
    )
    INLINE_WINDOW: Seconds = setting(
        20.0,
        "Seconds such a call waits for its task before it answers with a handle; meanwhile "
        "progress goes out as `notifications/progress` (when the request has a progress "
        "token) and questions are asked inline where the client can answer them. "
        "`TaskConfig(inline_window=...)` per tool; `0`: a handle at once. Keep it well under "
        "the clients' request timeout (60 s in the TypeScript SDK).",
    )
    CHECK_WAIT: Seconds = setting(
        20.0,
        "The longest the check tool waits: it answers at the task's next change (a result, a "
        "question, a staff decision) or then.",
    )
    COMPANION_TOOLS: CompanionToolNames = setting(
        CompanionToolNames(),
        "The companion tools' names (any subset of the keys). Check `mcp_tasks.E020` refuses "
        "a name that is not a valid tool name or that a registered tool has.",
    )
    TASK_TIMEOUT: Seconds = setting(
        3600,
        "rq job timeout in seconds; `TaskConfig(timeout=...)`. A job past it fails its task "
        '("The task timed out after N s") and its tool is cancelled.',
    )
    TASK_CONCURRENCY: Positive = setting(
        16,
        "Tools one `TaskWorker` process runs at once (async tools on its event loop, sync "
        "tools on its thread pool). A task waiting for an answer does not count.",
    )
    TASK_MAINTENANCE_INTERVAL: Seconds = setting(
        30,
        "Seconds between the housekeeping runs of each worker (stalled tasks, timed-out "
        "questions, expired rows): the bound on how late those are noticed.",
    )
    TASK_HEARTBEAT_INTERVAL: Seconds = setting(5.0, "Seconds between a running task's heartbeats.")
    TASK_LOST_AFTER: Seconds = setting(
        30.0, "A task whose heartbeat is older than this many seconds failed with its worker."
    )
    TASK_REQUEUE_AFTER: Seconds = setting(
        30.0,
        "A task still queued after this many seconds whose job vanished (Redis restarted "
        "without persistence) is queued again.",
    )
    REDIS_FAILOVER_WAIT: Seconds = setting(
        5.0,
        "Seconds a write to Redis that a request or a running task waits on (a new task's "
        "job queued, a task's question announced) is tried again, on new connections, while "
        "Redis is unreachable (a Sentinel failover, a restart) before it fails: cover the "
        "Sentinels' failover time (`down-after-milliseconds` plus a second or two). See "
        "[High availability](../how-to/high-availability.md).",
    )
    INPUT_HOLD_WINDOW: Seconds = setting(
        5.0,
        "Seconds a worker waits for an answer to `ctx.elicit`/`ctx.sample` before it lets go "
        "of the task (the task resumes on a new job once answered).",
    )
    INPUT_TIMEOUT: Seconds = setting(
        24 * 3600, "Seconds a task's question waits before the tool gets `CancelledElicitation`."
    )
    SNAPSHOT_HEADERS: Strings = setting(
        ("user-agent", "accept-language", "x-request-id"),
        "Request headers kept (encrypted) in a task's snapshot and shown to the tool as "
        "`ctx.headers`.",
    )


class _Limits(_ClientsWithoutTasks):
    """Limits and fairness."""

    FAIR_SHARE: Flag = setting(
        True,
        "Free worker slots go to the principals with tasks waiting in turn (round robin), "
        "first in first out within one principal. `False`: one line, first in first out. See "
        "[Limits and fairness](../how-to/limits.md).",
    )
    RESERVED_SLOTS: Count = setting(
        1,
        "Slots of each `TaskWorker` that one principal never fills (with `FAIR_SHARE`): they "
        "stay for the next principal, whose task starts at once instead of when a running "
        "task ends. A worker of one slot keeps none. `0`: a principal may fill a worker.",
    )
    MAX_ACTIVE_TASKS: Positive | None = setting(
        1000,
        "Tasks one principal may have that are not over yet (`working`, `input_required`). A "
        "task call past it is refused before anything is written (`-32029`; HTTP 429 with "
        "`Retry-After` on the modern era). `None`: no limit.",
    )
    MAX_ACTIVE_TASKS_PER_CLIENT: Positive | None = setting(
        None,
        "The same per OAuth client (the `client_id` of the bearer token), over all its users. "
        "`None`: no limit.",
    )
    EMBEDDED_WORKER: Flag = setting(
        False,
        "Run a task worker thread inside the ASGI process, on an in-process fake Redis "
        "(development without Redis). The example project sets it when `REDIS_URL` is unset.",
    )
    EMBEDDED_WORKERS: Positive = setting(
        1,
        "How many embedded worker threads run when `EMBEDDED_WORKER` is on (each runs "
        "`TASK_CONCURRENCY` tasks at once).",
    )
    GC_FREEZE: Flag = setting(
        True,
        "Once a process has started (`mcp_application` built, a worker bootstrapped), collect "
        "once and move every object alive then into Python's permanent GC generation "
        "(`gc.freeze()`). A loaded process otherwise runs a full collection every few seconds "
        "that walks Django, the app and its tools (80-100 ms each in the example project "
        "under the benchmark's load; 4-6 ms after). `False`: leave the collector alone.",
    )


class McpTasksSettings(_Limits):
    """Every key of ``settings.MCP_TASKS``, with its type, default and meaning (the
    fields of its bases first: one class per concern).

    This class: the operators' settings (mail, the admin, metrics, traces)."""

    NOTIFY_QUESTIONS: Flag = setting(
        False,
        "E-mail new questions to the people who may answer them (see [E-mail about new "
        "questions](../how-to/operators.md#e-mail-about-new-questions)); needs `SITE_URL`.",
    )
    NOTIFY_RECIPIENTS: Strings = setting(
        (),
        "Addresses those mails go to (every question). Empty: each question to the active "
        "staff users with an e-mail address who may answer it: "
        "`mcp_tasks.answer_inputrequest`, or a staff question's own permission and group "
        "(superusers included).",
    )
    NOTIFY_DIGEST_WINDOW: Seconds = setting(
        60,
        "Seconds after a notification mail during which new questions are gathered; once it "
        "has passed they go out together in one digest.",
    )
    SITE_URL: SiteUrl | None = setting(
        None, 'Scheme and host that links in mails start with (`"https://ops.example.com"`).'
    )
    ADMIN_LIVE_PATH: UrlPath | None = setting(
        None,
        "URL path of the live admin's WebSocket, routed by `mcp_application` (the example "
        'project uses `"/mcp-tasks/admin-live/"`). `None`: no WebSocket and nothing '
        "published for it; the admin's task and question pages refresh every "
        "`ADMIN_REFRESH_INTERVAL` seconds instead.",
    )
    ADMIN_REFRESH_INTERVAL: Seconds = setting(
        5,
        "Seconds between refreshes of the admin's task list, task page and waiting questions "
        "when their WebSocket is not available (`0`: never).",
    )
    METRICS: Flag = setting(
        False,
        "Count Prometheus metrics in each process and serve them with "
        "`mcp_tasks.metrics.view.metrics` (see "
        "[Metrics](../how-to/observability.md#metrics)); needs the `metrics` extra "
        "(`prometheus-client`, check `mcp_tasks.W012`) and `PROMETHEUS_MULTIPROC_DIR` for "
        "several processes (`mcp_tasks.W013`). `False`: nothing is imported or counted.",
    )
    METRICS_TOKEN: StrictStr | None = setting(
        None,
        "A bearer token the metrics view requires (`Authorization: Bearer <token>`; 401 "
        "without it). `None`: no token; restrict the view by network.",
    )
    TRACING: Flag = setting(
        False,
        "OpenTelemetry spans for each MCP request, each task's creation, its jobs in the "
        "workers (children of the creating request), its questions and waits, and the tool's "
        "runs (see [Traces](../how-to/observability.md#traces)); needs `opentelemetry-api` "
        "(the `otel` extra) and a `TracerProvider` the site configures. `False`: nothing is "
        "traced and the tracer module is not imported.",
    )


def imported(value: str | Callable[..., Any]) -> Any:
    """A setting that names an object: imported from its dotted path, or the callable given."""
    return import_string(value) if isinstance(value, str) else value


#: Every key with its default (the fields' defaults, as plain values).
DEFAULTS: dict[str, Any] = McpTasksSettings().model_dump()


def validate(values: Any) -> McpTasksSettings:
    """``values`` (a site's ``MCP_TASKS``) over the defaults; raises ``ValidationError``."""
    return McpTasksSettings.model_validate(values or {})


@lru_cache(maxsize=1)
def get_config() -> McpTasksSettings:
    """The site's settings (``MCP_TASKS`` over the defaults), validated once.

    Raises ``ImproperlyConfigured`` when ``MCP_TASKS`` is not valid (``manage.py check``
    says what is wrong, with a hint)."""
    user = getattr(settings, "MCP_TASKS", None)
    if user is not None and not isinstance(user, dict):
        raise ImproperlyConfigured(f"MCP_TASKS must be a dict, not {type(user).__name__}")
    try:
        return validate(user)
    except ValidationError as exc:
        problems = "; ".join(describe(error) for error in exc.errors())
        raise ImproperlyConfigured(
            f"MCP_TASKS is not valid: {problems} (manage.py check says more)"
        ) from None


def describe(error: Any) -> str:
    """One validation error of ``MCP_TASKS`` in words: the key and what is wrong."""
    key = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown key {key!r}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"MCP_TASKS[{key!r}] {message[0].lower()}{message[1:]}, got {error['input']!r}"


def reset_config(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: forget the cached config."""
    if setting == "MCP_TASKS":
        get_config.cache_clear()

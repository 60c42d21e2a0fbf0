"""Settings of every live server and rq worker the tests (and benchmarks) start.

The example project's settings (``project.settings``) plus the test-only tools app
(``tests.live_tools``) and the test token verifier, without daphne's app (see
``INSTALLED_APPS``). Environment variables named
``MCP_TASKS_TEST_*`` adjust the settings per process (pass them with
``asgi_server(env={...})``, ``task_server({...})`` or ``rq_worker(server, env={...})``);
unset, a setting keeps the example project's value (or the library default).

The name of a variable is ``MCP_TASKS_TEST_`` plus the ``MCP_TASKS`` key it sets, without
the key's ``TASK_`` prefix (``MCP_TASKS_TEST_HEARTBEAT_INTERVAL`` →
``TASK_HEARTBEAT_INTERVAL``). The ``TASK_*`` names inside ``MCP_TASKS`` are real settings,
not environment variables.

===========================================  =======================================================
Environment variable                         Sets
===========================================  =======================================================
``MCP_TASKS_TEST_TOKEN_VERIFIER``            ``MCP_TASKS["TOKEN_VERIFIER"]`` (default: the test
                                             verifier, below; the OAuth end-to-end test uses
                                             ``mcp_tasks.auth.verifiers.dot.verify``)
``MCP_TASKS_TEST_ALLOW_ANONYMOUS=0``         ``MCP_TASKS["ALLOW_ANONYMOUS"] = False``
``MCP_TASKS_TEST_MAX_BODY_BYTES``            ``MCP_TASKS["MAX_BODY_BYTES"]`` (default 4 MiB)
``MCP_TASKS_TEST_REQUEST_STATE_TTL``         ``MCP_TASKS["REQUEST_STATE_TTL"]`` (default 900 s)
``MCP_TASKS_TEST_ALLOWED_ORIGINS``           ``MCP_TASKS["ALLOWED_ORIGINS"]`` (comma-separated)
``MCP_TASKS_TEST_SSE_KEEPALIVE``             ``MCP_TASKS["SSE_KEEPALIVE"]`` (default 15 s)
``MCP_TASKS_TEST_ADMIN_LIVE_PATH``           ``MCP_TASKS["ADMIN_LIVE_PATH"]`` (``none``: no live
                                             admin WebSocket)
``MCP_TASKS_TEST_ADMIN_REFRESH_INTERVAL``    ``MCP_TASKS["ADMIN_REFRESH_INTERVAL"]`` (default 5 s)
``MCP_TASKS_TEST_HEARTBEAT_INTERVAL``        ``MCP_TASKS["TASK_HEARTBEAT_INTERVAL"]`` (seconds)
``MCP_TASKS_TEST_LOST_AFTER``                ``MCP_TASKS["TASK_LOST_AFTER"]`` (seconds)
``MCP_TASKS_TEST_REQUEUE_AFTER``             ``MCP_TASKS["TASK_REQUEUE_AFTER"]`` (seconds)
``MCP_TASKS_TEST_MAINTENANCE_INTERVAL``      ``MCP_TASKS["TASK_MAINTENANCE_INTERVAL"]`` (seconds)
``MCP_TASKS_TEST_TTL``                       ``MCP_TASKS["TASK_TTL"]`` (seconds)
``MCP_TASKS_TEST_POLL_INTERVAL``             ``MCP_TASKS["TASK_POLL_INTERVAL"]`` (seconds)
``MCP_TASKS_TEST_INPUT_HOLD_WINDOW``         ``MCP_TASKS["INPUT_HOLD_WINDOW"]`` (seconds)
``MCP_TASKS_TEST_SESSION_CACHE_TTL``         ``MCP_TASKS["SESSION_CACHE_TTL"]`` (seconds)
``MCP_TASKS_TEST_INPUT_TIMEOUT``             ``MCP_TASKS["INPUT_TIMEOUT"]`` (seconds)
``MCP_TASKS_TEST_INLINE_WINDOW``             ``MCP_TASKS["INLINE_WINDOW"]`` (seconds)
``MCP_TASKS_TEST_CHECK_WAIT``                ``MCP_TASKS["CHECK_WAIT"]`` (seconds)
``MCP_TASKS_TEST_TASKS_FOR_ALL_CLIENTS=0``   ``MCP_TASKS["TASKS_FOR_ALL_CLIENTS"] = False``
``MCP_TASKS_TEST_MAX_ACCEPT_WAIT``           ``MCP_TASKS["MAX_ACCEPT_WAIT"]`` (seconds, or ``none``)
``MCP_TASKS_TEST_MAX_REQUESTS_IN_PROGRESS``  ``MCP_TASKS["MAX_REQUESTS_IN_PROGRESS"]`` (an integer)
``MCP_TASKS_TEST_LIFESPAN``                  ``MCP_TASKS["LIFESPAN"]`` (a dotted path)
``MCP_TASKS_TEST_CONCURRENCY``               ``MCP_TASKS["TASK_CONCURRENCY"]`` (an integer)
``MCP_TASKS_TEST_MAX_ACTIVE_TASKS``          ``MCP_TASKS["MAX_ACTIVE_TASKS"]`` (an integer, or
                                             ``none``)
``MCP_TASKS_TEST_SECRET_KEY_FALLBACKS``      Django's ``SECRET_KEY_FALLBACKS`` (comma-separated;
                                             ``DJANGO_SECRET_KEY`` already sets ``SECRET_KEY``)
``MCP_TASKS_TEST_TRACE_FILE``                ``MCP_TASKS["TRACING"] = True``, each span written as
                                             a JSON line to that file
                                             (``tests.support.trace_export``)
``MCP_TASKS_TEST_TRACING``                   ``otlp``: ``MCP_TASKS["TRACING"] = True``, spans
                                             batched, encoded as OTLP protobuf and dropped (the
                                             benchmarks' ``observed`` server)
``MCP_TASKS_TEST_CHANNEL_LAYER_URL``         the Redis of ``CHANNEL_LAYERS["default"]`` only (the rq
                                             queue stays on ``REDIS_URL``): point one worker at an
                                             unreachable Redis and announcing a question fails for
                                             real
===========================================  =======================================================

The other ``MCP_TASKS_TEST_*`` variables (``SERVER``, ``ANONYMOUS``, ``TOKEN``, ``MATRIX``,
``WORKERS``, ``DATABASES``) choose how a test run goes (``tests/conftest.py``,
``tests/support/live.py``, ``noxfile.py``); none of them is read here. The project's own variables
(``DATABASE_URL``, ``REDIS_URL``, ``REDIS_PREFIX``, ``DJANGO_SECRET_KEY``,
``DJANGO_DEBUG``…) work as in ``project.settings``.

The token verifier, ``tests.live_tools.task_tools.verify``, accepts the tokens of
``tests.live_tools.auth.verify`` (``valid-<name>``, ``expired-<name>``,
``user-<username>``) and also ``short-<seconds>-<name>`` tokens that expire that many
seconds after they are verified.

Why pytest's own process does not use this module (``tests.settings``, the
``DJANGO_SETTINGS_MODULE`` of ``pyproject.toml``): the in-process tests start from the
library's defaults (``MCP_TASKS = {}``, a minimal middleware stack), on an in-memory SQLite
database and the in-memory channel layer, with a fresh ``REDIS_PREFIX`` per run; the live
servers run the example project's settings, on a database file (or PostgreSQL) their
workers share. Folding both into one module would make every setting depend on which kind
of process reads it, so there are exactly two: ``tests.settings`` (in-process) and this one
(live servers and workers).
"""

import os

from project.settings import *  # noqa: F403
from project.settings import CHANNEL_LAYERS, INSTALLED_APPS, MCP_TASKS, REDIS_PREFIX

_PREFIX = "MCP_TASKS_TEST_"


def _env(name: str) -> str:
    """The value of ``MCP_TASKS_TEST_<name>``, or ``""``."""
    return os.environ.get(_PREFIX + name, "")


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in _env(name).split(",") if item.strip()]


#: The example project's apps, less ``daphne``, plus the test tools. Daphne's app only swaps
#: in an ASGI ``runserver``, which no live process runs (daphne serves with ``python -m
#: daphne``, which needs no app), and importing it installs Twisted's reactor: a quarter of
#: a second of start-up in every server, worker and shell the tests start.
INSTALLED_APPS = [*(app for app in INSTALLED_APPS if app != "daphne"), "tests.live_tools"]
#: What the check's hint says to do when no process uses ``runserver``.
SILENCED_SYSTEM_CHECKS = ["mcp_tasks.E001"]

#: Variables in seconds: ``MCP_TASKS_TEST_<name>`` → ``MCP_TASKS[<key>]``.
_SECONDS = {
    "HEARTBEAT_INTERVAL": "TASK_HEARTBEAT_INTERVAL",
    "LOST_AFTER": "TASK_LOST_AFTER",
    "REQUEUE_AFTER": "TASK_REQUEUE_AFTER",
    "MAINTENANCE_INTERVAL": "TASK_MAINTENANCE_INTERVAL",
    "TTL": "TASK_TTL",
    "POLL_INTERVAL": "TASK_POLL_INTERVAL",
    "INPUT_HOLD_WINDOW": "INPUT_HOLD_WINDOW",
    "SESSION_CACHE_TTL": "SESSION_CACHE_TTL",
    "INPUT_TIMEOUT": "INPUT_TIMEOUT",
    "INLINE_WINDOW": "INLINE_WINDOW",
    "CHECK_WAIT": "CHECK_WAIT",
}

MCP_TASKS = {
    **MCP_TASKS,
    "TOKEN_VERIFIER": _env("TOKEN_VERIFIER") or "tests.live_tools.task_tools.verify",
    "ALLOW_ANONYMOUS": (_env("ALLOW_ANONYMOUS") or "1") != "0",
    "MAX_BODY_BYTES": int(_env("MAX_BODY_BYTES") or 4 * 1024 * 1024),
    "REQUEST_STATE_TTL": int(_env("REQUEST_STATE_TTL") or 900),
    "SSE_KEEPALIVE": float(_env("SSE_KEEPALIVE") or 15.0),
    "ADMIN_LIVE_PATH": (
        None
        if _env("ADMIN_LIVE_PATH") == "none"
        else _env("ADMIN_LIVE_PATH") or MCP_TASKS["ADMIN_LIVE_PATH"]
    ),
    "ADMIN_REFRESH_INTERVAL": float(_env("ADMIN_REFRESH_INTERVAL") or 5),
    "ALLOWED_ORIGINS": _env_list("ALLOWED_ORIGINS"),
    **{key: float(_env(name)) for name, key in _SECONDS.items() if _env(name)},
}
if _env("TASKS_FOR_ALL_CLIENTS"):
    MCP_TASKS["TASKS_FOR_ALL_CLIENTS"] = _env("TASKS_FOR_ALL_CLIENTS") != "0"
if _env("MAX_REQUESTS_IN_PROGRESS"):
    MCP_TASKS["MAX_REQUESTS_IN_PROGRESS"] = int(_env("MAX_REQUESTS_IN_PROGRESS"))
if _env("MAX_ACCEPT_WAIT"):
    MCP_TASKS["MAX_ACCEPT_WAIT"] = (
        None if _env("MAX_ACCEPT_WAIT") == "none" else float(_env("MAX_ACCEPT_WAIT"))
    )
if _env("LIFESPAN"):
    MCP_TASKS["LIFESPAN"] = _env("LIFESPAN")
if _env("CONCURRENCY"):
    MCP_TASKS["TASK_CONCURRENCY"] = int(_env("CONCURRENCY"))
if _env("MAX_ACTIVE_TASKS"):
    MCP_TASKS["MAX_ACTIVE_TASKS"] = (
        None if _env("MAX_ACTIVE_TASKS") == "none" else int(_env("MAX_ACTIVE_TASKS"))
    )
if _env("TRACE_FILE"):
    from tests.support import trace_export

    MCP_TASKS["TRACING"] = True
    trace_export.install(_env("TRACE_FILE"))
elif _env("TRACING") == "otlp":
    from tests.support import trace_export

    MCP_TASKS["TRACING"] = True
    trace_export.install_otlp_encoding()

SECRET_KEY_FALLBACKS = _env_list("SECRET_KEY_FALLBACKS")

if _env("CHANNEL_LAYER_URL"):
    CHANNEL_LAYERS = {
        **CHANNEL_LAYERS,
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [_env("CHANNEL_LAYER_URL")], "prefix": REDIS_PREFIX},
        },
    }

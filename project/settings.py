"""Settings of the example project.

With no environment variables set it runs on embedded defaults: a SQLite file next to
``manage.py`` and the in-memory channel layer (one process). Production-style services are
switched on by environment variables:

- ``DATABASE_URL`` (e.g. ``postgres://user:pass@db:5432/mcp``) → that database;
- ``REDIS_URL`` (e.g. ``redis://127.0.0.1:6379/0``) → channels_redis channel layer and the
  django-rq queue on that Redis; ``REDIS_PREFIX`` keeps several deployments (or test runs)
  apart on one Redis;
- ``REDIS_SENTINELS`` (e.g. ``10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379``) with
  ``REDIS_MASTER_NAME`` (and ``REDIS_DB``) → the same on the Redis those Sentinels name
  master, followed through a failover (instead of ``REDIS_URL``);
- ``ALLOWED_HOSTS`` (comma-separated) → added to the loopback hosts;
- ``MCP_ALLOWED_ORIGINS`` (comma-separated) → browser origins allowed to call ``/mcp``;
- ``DJANGO_SECRET_KEY``, ``DJANGO_DEBUG`` (``0``/``1``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get(
    "DJANGO_SECRET_KEY", "django-insecure-example-project-key-change-me-in-production"
)
DEBUG = os.environ.get("DJANGO_DEBUG", "1").lower() in ("1", "true", "yes", "on")

ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", *_env_list("ALLOWED_HOSTS")]

INSTALLED_APPS = [
    # daphne first: its runserver (ASGI) must win over staticfiles' (WSGI).
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_rq",
    # The OAuth authorization server MCP clients sign in with (README "Sign-in (OAuth)").
    "oauth2_provider",
    "mcp_tasks",
    "project.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------------------
# Persistent connections: each thread that touches the ORM (mcp_tasks runs its ORM work on one
# thread per process, sync tools on a small pool) keeps its connection instead of opening one
# per query; health checks replace a connection the server dropped before a request uses it
# (mcp_tasks pings only connections idle for 30 s, and replaces without a ping one its server
# closed: a restart or a primary replaced at the same address costs no request an error;
# README "High availability"). System check mcp_tasks.W005 warns when PostgreSQL connections
# are not kept.
_database: dict[str, Any] = dict(
    dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=600,
        conn_health_checks=True,
    )
)
if _database["ENGINE"] == "django.db.backends.sqlite3":
    # Several threads (and, in tests, processes) share the file: wait for locks instead of
    # failing at once, take the write lock up front, and let readers run beside a writer.
    _database.setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
elif _database["ENGINE"] == "django.db.backends.postgresql":
    # Server-side prepared statements for what runs often (psycopg prepares a statement on
    # its 5th run on a connection; Django turns them off by default for connection poolers):
    # mcp_tasks' per-task statements bind on the server, and PostgreSQL then skips parsing
    # and planning them (a third of its CPU per task). Set it to None behind PgBouncer in
    # transaction mode older than 1.21 (or without max_prepared_statements).
    _database.setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)
    # A server that does not answer at all (a primary replaced behind an address that drops
    # packets) is given up after 5 s, instead of the system's TCP timeout of minutes.
    _database["OPTIONS"].setdefault("connect_timeout", 5)
DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: channel layer and queue ----------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
REDIS_PREFIX = os.environ.get("REDIS_PREFIX", "mcp_tasks")
# Redis Sentinel (README "High availability"): every Redis user follows the master the
# Sentinels name, each library configured its own way: django-rq's SENTINELS/MASTER_NAME,
# channels_redis' sentinels/master_name (system checks mcp_tasks.E019 and W016 compare them).
REDIS_SENTINELS = [
    (host, int(port))
    for host, _, port in (entry.rpartition(":") for entry in _env_list("REDIS_SENTINELS"))
]
REDIS_MASTER_NAME = os.environ.get("REDIS_MASTER_NAME", "mymaster")
REDIS_DB = int(os.environ.get("REDIS_DB", "0"))
#: Seconds a Redis read or connect may take before the client gives up on that server (and,
#: with Sentinel, asks the Sentinels again): a master that vanished without closing its
#: connections is left after this long.
REDIS_SOCKET_TIMEOUT = 10

_redis_host: str | dict[str, Any] = REDIS_URL
if REDIS_SENTINELS:
    _redis_host = {
        "sentinels": REDIS_SENTINELS,
        "master_name": REDIS_MASTER_NAME,
        "db": REDIS_DB,
        "socket_timeout": REDIS_SOCKET_TIMEOUT,
        "socket_connect_timeout": REDIS_SOCKET_TIMEOUT,
    }
if _redis_host:
    CHANNEL_LAYERS = {
        "default": {
            # The pub/sub layer: one reader per process that requests never cancel
            # (RedisChannelLayer can lose messages when they do: system check mcp_tasks.W004).
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [_redis_host], "prefix": REDIS_PREFIX},
        }
    }
else:
    # Embedded mode, one process only: an in-memory layer that the worker thread can use too.
    CHANNEL_LAYERS = {"default": {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}

# With REDIS_URL the `mcp_tasks` queue lives on that Redis and `manage.py rqworker mcp_tasks`
# runs the jobs. Without it (embedded mode) the queue is an in-process fake Redis and a
# worker thread inside the ASGI server runs them (MCP_TASKS["EMBEDDED_WORKER"] below).
RQ_QUEUES: dict[str, dict[str, Any]] = {
    "mcp_tasks": {"URL": REDIS_URL or "redis://127.0.0.1:6379/0", "DEFAULT_TIMEOUT": 3600}
}
if REDIS_SENTINELS:
    RQ_QUEUES["mcp_tasks"] = {
        "SENTINELS": REDIS_SENTINELS,
        "MASTER_NAME": REDIS_MASTER_NAME,
        "DB": REDIS_DB,
        "SOCKET_TIMEOUT": REDIS_SOCKET_TIMEOUT,
        "CONNECTION_KWARGS": {"socket_connect_timeout": REDIS_SOCKET_TIMEOUT},
        "DEFAULT_TIMEOUT": 3600,
    }
RQ = {"WORKER_CLASS": "mcp_tasks.tasks.worker.TaskWorker"}

# --- MCP ------------------------------------------------------------------------------------
# Every key and its default is documented in the README ("Settings").
MCP_TASKS: dict[str, Any] = {
    "PATH": "/mcp",
    "SERVER_NAME": "mcp-tasks-demo",
    "INSTRUCTIONS": (
        "Demo server of django-mcp-tasks: try the `add`, `slow_count` and "
        "`greet_with_question` tools; `account_info` needs the `account:read` scope."
    ),
    "ALLOWED_ORIGINS": _env_list("MCP_ALLOWED_ORIGINS"),
    "EMBEDDED_WORKER": not _redis_host,
    # Sign-in: tokens issued by django-oauth-toolkit below; its issuer is this origin.
    "TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.dot.verify",
    "AUTHORIZATION_SERVERS": ["/"],
    # The scope every client asks for (DOT's default scope below): named in 401 challenges
    # and first in the metadata's scopes_supported, followed by the tools' own scopes.
    "SIGN_IN_SCOPES": ["mcp"],
    # MCP_ALLOW_ANONYMOUS=0: every client must sign in (401 with the metadata's URL).
    "ALLOW_ANONYMOUS": os.environ.get("MCP_ALLOW_ANONYMOUS", "1") != "0",
    # The admin's task and question pages update themselves over this WebSocket.
    "ADMIN_LIVE_PATH": "/mcp-tasks/admin-live/",
    # Prometheus metrics at /metrics when every process shares PROMETHEUS_MULTIPROC_DIR
    # (README "Metrics"); MCP_METRICS_TOKEN: the bearer token the scraper sends.
    "METRICS": bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR")),
    "METRICS_TOKEN": os.environ.get("MCP_METRICS_TOKEN") or None,
}

# --- OAuth authorization server (django-oauth-toolkit) ------------------------------------------
# What MCP clients expect: authorization code with PKCE (S256 only), RFC 8414 metadata at
# /.well-known/oauth-authorization-server, the RFC 9207 `iss` in every authorization response,
# and two ways for a client nobody registered by hand to get a client_id (README "Sign-in"):
# - Client ID Metadata Documents (CIMD): the client_id is an https URL serving the client's
#   metadata (Claude, ChatGPT, VS Code…); it is fetched with DOT's rules (public addresses
#   only, no redirects, bounded size) within a deadline, and DOT keeps the client for the
#   document's max-age, clamped below;
# - dynamic client registration (RFC 7591) at /o/register/, for clients without a document.
# Users sign in at LOGIN_URL. Resources other than this MCP server are refused with
# invalid_target (RFC 8707; project/views.py).
LOGIN_URL = "/accounts/login/"
_CIMD_ALLOWED_HOSTS = _env_list("MCP_CIMD_ALLOWED_HOSTS")
OAUTH2_PROVIDER = {
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # refuse code_challenge_method=plain
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,  # RFC 9207 `iss`, announced in metadata
    "SCOPES": {
        "mcp": "Use this server's MCP tools and tasks",
        "account:read": "See which account and client you are signed in with (tool `account_info`)",
    },
    "DEFAULT_SCOPES": ["mcp"],
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "none",
        "client_secret_post",
        "client_secret_basic",
    ],
    # Client ID Metadata Documents. Who may present one: MCP_CIMD_ALLOWED_HOSTS names the
    # hosts of the clients the site expects (Django ALLOWED_HOSTS syntax: "claude.ai",
    # ".example.com"), which is what a production site should do (README "Sign-in"); unset,
    # any https host may (DOT's default policy), so that any client can try the demo.
    "CIMD_ENABLED": True,
    "CIMD_REGISTRATION_PERMISSION_CLASSES": (
        ("oauth2_provider.cimd.HostAllowlistCIMDPermission",)
        if _CIMD_ALLOWED_HOSTS
        else ("oauth2_provider.cimd.AllowAllCIMDPermission",)
    ),
    "CIMD_ALLOWED_HOSTS": _CIMD_ALLOWED_HOSTS,
    # The whole fetch (lookup, connection, TLS, headers, body) ends at the timeout; DOT's
    # own fetcher times each read only (mcp_tasks.W014).
    "CIMD_METADATA_FETCHER": "mcp_tasks.auth.cimd.BoundedMetadataFetcher",
    "CIMD_METADATA_MIN_AGE_SECONDS": 300,  # a document is fetched again after 5 min at the
    "CIMD_METADATA_MAX_AGE_SECONDS": 86400,  # earliest and one day at the latest
    "CIMD_FETCH_TIMEOUT_SECONDS": 5,
    "CIMD_MAX_DOCUMENT_SIZE": 16 * 1024,
    # Dynamic client registration: open to any client (restrict it where unknown clients
    # are not welcome, e.g. oauth2_provider.dcr.IsAuthenticatedDCRPermission).
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
}

# --- the rest -------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "mcp_tasks": {
            "handlers": ["console"],
            "level": os.environ.get("MCP_TASKS_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
        "project": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}

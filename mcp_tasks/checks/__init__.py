"""Django system checks for mcp_tasks: each message has a stable id and a hint."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning as CheckWarning, register
from django.utils.module_loading import import_string
from pydantic import ValidationError

from ..conf import DEFAULTS, describe, get_config, validate
from . import workers as worker_checks
from .approvals import check_approvals
from .companions import check_companions
from .metrics import check_metrics
from .oauth import check_oauth
from .redis import check_redis
from .tools import check_tools
from .workers import IN_MEMORY_LAYER, IN_PROCESS_LAYER

_README = "See https://django-mcp-tasks.readthedocs.io/en/latest/reference/settings.html"
_CORE_REDIS_LAYER = "channels_redis.core.RedisChannelLayer"
_PUBSUB_LAYER = "channels_redis.pubsub.RedisPubSubChannelLayer"


@register()
def check_mcp_tasks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report misconfiguration of the ASGI server, channels, ``MCP_TASKS`` and hosts."""
    messages: list[CheckMessage] = []
    messages += _check_asgi_server()
    messages += _check_channels()
    settings_messages = _check_settings_dict()
    messages += settings_messages
    if not settings_messages:  # the checks below read the merged config
        messages += _check_asgi_route()
        messages += _check_channel_layer()
        messages += _check_hosts()
        messages += check_oauth()
        messages += _check_notifications()
        messages += worker_checks.check_workers()
        messages += check_redis()
        messages += check_metrics()
        messages += check_companions()
    messages += _check_database_connections()
    messages += check_approvals()
    messages += check_tools()
    return messages


def _check_asgi_server() -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    apps = list(settings.INSTALLED_APPS)
    if "daphne" not in apps:
        messages.append(
            Error(
                "'daphne' is not in INSTALLED_APPS, so `manage.py runserver` serves WSGI and "
                "the MCP endpoint is unreachable.",
                hint=(
                    "Add 'daphne' at the top of INSTALLED_APPS (before "
                    "'django.contrib.staticfiles'). If you serve only with another ASGI server "
                    "(uvicorn, hypercorn) and never use runserver, add 'mcp_tasks.E001' to "
                    "SILENCED_SYSTEM_CHECKS."
                ),
                id="mcp_tasks.E001",
            )
        )
    elif "django.contrib.staticfiles" in apps and apps.index("daphne") > apps.index(
        "django.contrib.staticfiles"
    ):
        messages.append(
            Error(
                "'daphne' comes after 'django.contrib.staticfiles' in INSTALLED_APPS, so "
                "staticfiles' WSGI `runserver` wins and the MCP endpoint is unreachable.",
                hint="Move 'daphne' to the top of INSTALLED_APPS.",
                id="mcp_tasks.E013",
            )
        )
    if not getattr(settings, "ASGI_APPLICATION", None):
        messages.append(
            Error(
                "ASGI_APPLICATION is not set, so no ASGI server knows which application serves "
                "the MCP endpoint.",
                hint=(
                    "Set ASGI_APPLICATION = '<project>.asgi.application' and, in that module, "
                    "wrap Django's app: application = mcp_application(get_asgi_application()) "
                    "(from mcp_tasks.asgi import mcp_application)."
                ),
                id="mcp_tasks.E014",
            )
        )
    return messages


def _check_channels() -> list[CheckMessage]:
    if worker_checks.module_available("channels"):
        return []
    return [
        Error(
            "The 'channels' package is not installed; mcp_tasks serves MCP through Django "
            "Channels.",
            hint="Install it: pip install 'channels>=4.2' (reinstalling django-mcp-tasks pulls it in).",
            id="mcp_tasks.E002",
        )
    ]


def _check_settings_dict() -> list[CheckMessage]:
    user = getattr(settings, "MCP_TASKS", None)
    if user is None:
        return []
    if not isinstance(user, dict):
        return [
            Error(
                f"MCP_TASKS must be a dict, not {type(user).__name__}.",
                hint="Set MCP_TASKS = {...} with the keys you want to change. " + _README,
                id="mcp_tasks.E016",
            )
        ]
    try:
        validate(user)
    except ValidationError as exc:
        first: dict[Any, Any] = {}  # one message per key (a union may give several)
        for error in exc.errors():
            first.setdefault(error["loc"][:1], error)
        return [_settings_error(error) for error in first.values()]
    return []


def _settings_error(error: Any) -> CheckMessage:
    """E003 (an unknown key) or E015 (a wrong value), from one validation error."""
    key = str(error["loc"][0])
    if error["type"] == "extra_forbidden" and len(error["loc"]) == 1:
        close = difflib.get_close_matches(key, DEFAULTS, n=1)
        did_you_mean = f"Did you mean {close[0]!r}? " if close else ""
        return Error(
            f"MCP_TASKS has an unknown key {key!r}.",
            hint=f"{did_you_mean}Remove it or use one of: {', '.join(sorted(DEFAULTS))}. "
            + _README,
            id="mcp_tasks.E003",
        )
    return Error(
        f"{describe(error)}.",
        hint=f"Fix the value or remove the key to use the default ({DEFAULTS[key]!r}). " + _README,
        id="mcp_tasks.E015",
    )


_WRAPPER_ATTRIBUTES = ("inner", "app", "application", "__wrapped__")


def _candidates(app: Any, depth: int = 0) -> Iterator[Any]:
    """``app`` and the applications it wraps (middleware, ProtocolTypeRouter), depth-limited."""
    yield app
    if depth >= 6:
        return
    children: list[Any] = [getattr(app, name, None) for name in _WRAPPER_ATTRIBUTES]
    mapping = getattr(app, "application_mapping", None)
    if isinstance(mapping, dict):
        children += list(mapping.values())
    for child in children:
        if child is not None and child is not app:
            yield from _candidates(child, depth + 1)


def _check_asgi_route() -> list[CheckMessage]:
    dotted = getattr(settings, "ASGI_APPLICATION", None)
    if not dotted:
        return []  # reported as E014
    path = get_config().PATH
    try:
        application = import_string(dotted)
    except Exception as exc:
        return [
            Error(
                f"ASGI_APPLICATION {dotted!r} could not be imported ({type(exc).__name__}: "
                f"{exc}), so it cannot be checked that it routes {path!r} to mcp_tasks.",
                hint="Fix the import error, or point ASGI_APPLICATION at your ASGI application.",
                id="mcp_tasks.E017",
            )
        ]
    if any(getattr(app, "mcp_tasks_path", None) for app in _candidates(application)):
        return []
    return [
        Error(
            f"The ASGI application {dotted!r} does not route {path!r} to mcp_tasks; MCP "
            "clients will get 404.",
            hint=(
                "In your asgi module, wrap Django's application: "
                "application = mcp_application(get_asgi_application()) "
                "(from mcp_tasks.asgi import mcp_application)."
            ),
            id="mcp_tasks.E004",
        )
    ]


def _check_channel_layer() -> list[CheckMessage]:
    alias = get_config().CHANNEL_LAYER
    layers = getattr(settings, "CHANNEL_LAYERS", None) or {}
    layer = layers.get(alias) if isinstance(layers, dict) else None
    if not layer or not isinstance(layer, dict):
        return [
            Error(
                f"CHANNEL_LAYERS has no {alias!r} layer (a dict with its 'BACKEND'); mcp_tasks "
                "reaches legacy sessions' streams and waiting calls through it.",
                hint=(
                    f"Add CHANNEL_LAYERS = {{{alias!r}: {{'BACKEND': '{_PUBSUB_LAYER}', "
                    "'CONFIG': {'hosts': [REDIS_URL]}}} "
                    "(or 'mcp_tasks.layers.InProcessChannelLayer' for a single development "
                    "process), or set "
                    "MCP_TASKS['CHANNEL_LAYER'] to an alias you have."
                ),
                id="mcp_tasks.E005",
            )
        ]
    if layer.get("BACKEND") in (IN_MEMORY_LAYER, IN_PROCESS_LAYER) and not settings.DEBUG:
        return [
            CheckWarning(
                "An in-memory channel layer only reaches the process it lives in: with more "
                "than one ASGI process, legacy sessions, replies to elicitation and task "
                "updates get lost between processes.",
                hint=(
                    f"Use channels_redis (BACKEND '{_PUBSUB_LAYER}') in production; if you "
                    "really run a single process, add 'mcp_tasks.W001' to "
                    "SILENCED_SYSTEM_CHECKS."
                ),
                id="mcp_tasks.W001",
            )
        ]
    if layer.get("BACKEND") != _CORE_REDIS_LAYER:
        return []
    core_layer = CheckWarning(
        "channels_redis' RedisChannelLayer pops the messages of all consumers of a process "
        "from one Redis key; when a request ends while its read holds that key, a message "
        "just popped for another consumer is lost (django/channels_redis#366): under load, "
        "streams miss notifications and waiting calls miss their wake-ups.",
        hint=(
            f"Use BACKEND '{_PUBSUB_LAYER}' (one reader per process, never cancelled) with "
            "the same CONFIG."
        ),
        id="mcp_tasks.W004",
    )
    return [core_layer, *_check_redis_read_timeout(layer)]


def _check_redis_read_timeout(layer: dict[str, Any]) -> list[CheckMessage]:
    """W003: channels_redis blocks 5 s per read; redis-py's default socket timeout is 5 s."""
    config = layer.get("CONFIG")
    hosts = (config.get("hosts") if isinstance(config, dict) else None) or []
    if all(isinstance(host, dict) and (host.get("socket_timeout") or 0) > 5 for host in hosts):
        return []
    return [
        CheckWarning(
            "A channels_redis host has no socket_timeout above 5 s. channels_redis blocks 5 s "
            "on each read and redis-py times sockets out after 5 s by default, so idle "
            "streams see read errors and wake-ups arrive late.",
            hint=(
                "Give each host a longer timeout: CONFIG = {'hosts': [{'address': REDIS_URL, "
                "'socket_timeout': 15}]}."
            ),
            id="mcp_tasks.W003",
        )
    ]


def _check_database_connections() -> list[CheckMessage]:
    """W005: a PostgreSQL connection opened per ORM call costs more than the call."""
    messages: list[CheckMessage] = []
    for alias, database in settings.DATABASES.items():
        if "postgresql" not in str(database.get("ENGINE", "")):
            continue
        max_age = database.get("CONN_MAX_AGE", 0)
        if max_age is None or max_age > 0 or (database.get("OPTIONS") or {}).get("pool"):
            continue  # kept for a while, forever, or pooled
        messages.append(
            CheckWarning(
                f"DATABASES[{alias!r}] opens a new PostgreSQL connection for every request and "
                "every ORM call of mcp_tasks (CONN_MAX_AGE is 0): each costs a few "
                "milliseconds, several per background task.",
                hint=(
                    "Keep connections: CONN_MAX_AGE = 600 with CONN_HEALTH_CHECKS = True (what "
                    "the example project does), or psycopg 3's pool: "
                    "OPTIONS = {'pool': True}."
                ),
                id="mcp_tasks.W005",
            )
        )
    return messages


def _check_hosts() -> list[CheckMessage]:
    if "*" not in settings.ALLOWED_HOSTS:
        return []
    return [
        CheckWarning(
            "ALLOWED_HOSTS contains '*': the MCP endpoint then accepts any Host header, so a "
            "web page whose domain is re-bound to your server (DNS rebinding) can call it as "
            "its own origin. MCP_TASKS['ALLOWED_ORIGINS'] cannot close that hole.",
            hint="List your real host names in ALLOWED_HOSTS (e.g. ['mcp.example.com']).",
            id="mcp_tasks.W002",
        )
    ]


def _check_notifications() -> list[CheckMessage]:
    config = get_config()
    if not config.NOTIFY_QUESTIONS or config.SITE_URL:
        return []
    return [
        Error(
            "MCP_TASKS['NOTIFY_QUESTIONS'] is on but MCP_TASKS['SITE_URL'] is not set, so the "
            "mails cannot link to the admin's Answer page.",
            hint="Set MCP_TASKS['SITE_URL'] to the admin's scheme and host, e.g. "
            "'https://ops.example.com'.",
            id="mcp_tasks.E006",
        )
    ]

"""System checks of what runs background tasks: the worker class, the queues, embedded
mode's packages, the channel layer and SQLite a worker shares."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning as CheckWarning
from django.utils.module_loading import import_string

from ..authoring.registry import mcp
from ..conf import get_config
from ..core import module_available as module_available  # tests patch it here
from ..core.db import SQLITE_OPTIONS as _SQLITE_OPTIONS, in_memory_name
from ..tasks.worker.task_worker import takes_task_jobs

_TASK_WORKER = "mcp_tasks.tasks.worker.TaskWorker"
IN_MEMORY_LAYER = "channels.layers.InMemoryChannelLayer"
IN_PROCESS_LAYER = "mcp_tasks.layers.InProcessChannelLayer"


def check_workers() -> list[CheckMessage]:
    """Report what would leave tasks queued, slow or failing to start."""
    messages: list[CheckMessage] = []
    if get_config().EMBEDDED_WORKER:
        messages += _check_embedded_packages()
        messages += _check_embedded_layer()
    else:
        messages += _check_worker_class()
        messages += _check_worker_layer()
        messages += _check_queues()
    messages += _check_sqlite()
    return messages


def _layer_backend() -> Any:
    layers = getattr(settings, "CHANNEL_LAYERS", None) or {}
    layer = layers.get(get_config().CHANNEL_LAYER) if isinstance(layers, dict) else None
    return layer.get("BACKEND") if isinstance(layer, dict) else None


def _check_worker_class() -> list[CheckMessage]:
    """Task jobs wait in mcp_tasks' fair queue, which rq's own worker classes never read."""
    rq_settings = getattr(settings, "RQ", None)
    name = rq_settings.get("WORKER_CLASS") if isinstance(rq_settings, dict) else None
    if name is None:
        problem = "RQ['WORKER_CLASS'] is not set, so `manage.py rqworker` runs rq's own Worker"
    else:
        try:
            worker_class = import_string(name) if isinstance(name, str) else name
        except ImportError as exc:
            problem = f"RQ['WORKER_CLASS'] {name!r} cannot be imported ({exc})"
        else:
            if isinstance(worker_class, type) and takes_task_jobs(worker_class):
                return []
            problem = f"RQ['WORKER_CLASS'] {name!r} is not a task worker"
    return [
        CheckWarning(
            f"{problem}: it never takes task jobs (they wait in mcp_tasks' fair queue), so "
            "background tasks stay 'Queued'.",
            hint=(
                f'Set RQ = {{"WORKER_CLASS": "{_TASK_WORKER}"}} (or '
                "mcp_tasks.tasks.worker.ForkingTaskWorker, or a subclass of either), or pass "
                "--worker-class to rqworker and add 'mcp_tasks.W007' to SILENCED_SYSTEM_CHECKS."
            ),
            id="mcp_tasks.W007",
        )
    ]


#: The modules embedded mode imports (tasks/embedded.py): an in-process Redis, and the Lua
#: runtime its scripts (rq's, the fair queue's) run on.
_EMBEDDED_MODULES = {"fakeredis": "fakeredis", "lupa": "lupa (fakeredis[lua])"}


def _check_embedded_packages() -> list[CheckMessage]:
    missing = [label for name, label in _EMBEDDED_MODULES.items() if not module_available(name)]
    if not missing:
        return []
    return [
        Error(
            f"MCP_TASKS['EMBEDDED_WORKER'] is on but {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed: embedded mode runs its "
            "queue on an in-process fake Redis with Lua scripts, so requests that start the "
            "embedded worker or queue a task fail.",
            hint='Install the extra: pip install "django-mcp-tasks[embedded]".',
            id="mcp_tasks.E011",
        )
    ]


def _check_embedded_layer() -> list[CheckMessage]:
    """Channels' in-memory layer keeps asyncio queues of one event loop: the embedded
    worker's thread, on another loop, cannot use it safely."""
    if _layer_backend() != IN_MEMORY_LAYER:
        return []
    return [
        CheckWarning(
            f"{IN_MEMORY_LAYER} with MCP_TASKS['EMBEDDED_WORKER']: the worker thread runs "
            "its own event loop, which that layer does not support, so an answer or a cancel "
            "reaches a running task only at its next heartbeat (seconds, not milliseconds).",
            hint=(
                f"Set CHANNEL_LAYERS = {{'default': {{'BACKEND': '{IN_PROCESS_LAYER}'}}}}: "
                "the same in-memory layer, safe across the threads of one process."
            ),
            id="mcp_tasks.W008",
        )
    ]


def _check_worker_layer() -> list[CheckMessage]:
    """Task workers in their own processes cannot reach an in-process layer."""
    if _layer_backend() not in (IN_MEMORY_LAYER, IN_PROCESS_LAYER):
        return []
    return [
        CheckWarning(
            "An in-process channel layer with task workers in processes of their own "
            "(`manage.py rqworker`): they cannot reach it, so an answer or a cancel reaches a "
            "running task only at its next heartbeat, and a waiting tasks/get hears of a "
            "result only when it asks again.",
            hint=(
                "Use channels_redis (BACKEND 'channels_redis.pubsub.RedisPubSubChannelLayer' "
                "on the queue's Redis), or run the worker in the ASGI process in development "
                "(MCP_TASKS['EMBEDDED_WORKER'] = True)."
            ),
            id="mcp_tasks.W010",
        )
    ]


def task_queues() -> dict[str, str]:
    """Every queue a task can go to (``TASK_QUEUE`` first), with the setting that names it."""
    wanted = {get_config().TASK_QUEUE: "MCP_TASKS['TASK_QUEUE']"}
    for tool in mcp.tools.values():
        if tool.task.mode != "forbidden" and tool.task.queue:
            wanted.setdefault(tool.task.queue, f"tool {tool.name!r}'s TaskConfig(queue=...)")
    return wanted


def configured_queues() -> set[str]:
    queues = getattr(settings, "RQ_QUEUES", None)
    return set(queues) if isinstance(queues, dict) else set()


def _check_queues() -> list[CheckMessage]:
    """Every queue a task can go to is in ``RQ_QUEUES``."""
    known = configured_queues()
    return [
        Error(
            f"RQ_QUEUES has no {name!r} queue, which {source} names: its tasks could not be "
            "queued (a task call answers -32603).",
            hint=(
                f"Add RQ_QUEUES[{name!r}] = {{'URL': 'redis://127.0.0.1:6379/0'}} (the Redis "
                "your workers use) and run `python manage.py rqworker "
                f"{name}`, or turn on MCP_TASKS['EMBEDDED_WORKER'] in development."
            ),
            id="mcp_tasks.E012",
        )
        for name, source in task_queues().items()
        if name not in known
    ]


def _check_sqlite() -> list[CheckMessage]:
    """W009: a SQLite file workers share needs to wait for locks, take the write lock up
    front and let readers run beside a writer."""
    database = settings.DATABASES.get("default", {})
    if database.get("ENGINE") != "django.db.backends.sqlite3":
        return []
    if in_memory_name(database.get("NAME")):
        return []
    options = database.get("OPTIONS") or {}
    init = str(options.get("init_command", "")).lower().replace(" ", "")
    missing = [
        name
        for name, ok in (
            ("transaction_mode", str(options.get("transaction_mode", "")).upper() == "IMMEDIATE"),
            ("timeout", isinstance(options.get("timeout"), int | float)),
            ("init_command", "journal_mode=wal" in init),
        )
        if not ok
    ]
    if not missing:
        return []
    return [
        CheckWarning(
            f"The SQLite database misses OPTIONS {', '.join(missing)}: task workers share the "
            "file with the ASGI server, so writes meet 'database is locked' or wait for "
            "seconds, and a task resumes late after its answer.",
            hint=f"Set DATABASES['default']['OPTIONS'] = {_SQLITE_OPTIONS!r}.",
            id="mcp_tasks.W009",
        )
    ]

"""The method tables of both eras, built in one place from what is configured."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from . import handlers
from .companion_tools import CompanionTools
from .handlers import Handler
from .legacy_task_methods import LegacyTaskMethods
from .ports import TaskEngine
from .task_handles import TaskHandles
from .task_methods import TaskMethods

#: Methods whose modern results carry caching hints (``ttlMs``, ``cacheScope``).
CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)


@dataclass(frozen=True)
class MethodTables:
    """What each era serves; ``tasks``/``legacy_tasks``: the task methods (None: no engine)."""

    modern: Mapping[str, Handler]
    legacy: Mapping[str, Handler]
    tasks: TaskMethods | None
    legacy_tasks: LegacyTaskMethods | None


def method_tables(engine: TaskEngine | None) -> MethodTables:
    """The tables; with an ``engine``, task tools run as tasks and both eras' task methods answer."""
    tasks = TaskMethods(engine) if engine is not None else None
    legacy_tasks = LegacyTaskMethods(engine) if engine is not None else None
    companions = CompanionTools(TaskHandles(tasks)) if tasks is not None else None
    has_tasks = tasks is not None
    common: dict[str, Handler] = {
        "tools/list": functools.partial(
            handlers.list_tools, tasks=has_tasks, companions=companions
        ),
        "tools/call": functools.partial(handlers.call_tool, tasks=tasks, companions=companions),
        "prompts/list": handlers.list_prompts,
        "prompts/get": handlers.get_prompt,
        "resources/list": handlers.list_resources,
        "resources/templates/list": handlers.list_resource_templates,
        "resources/read": handlers.read_resource,
        "completion/complete": handlers.complete,
    }
    modern: dict[str, Handler] = {
        "server/discover": functools.partial(handlers.server_discover, tasks=has_tasks),
        **common,
    }
    legacy: dict[str, Handler] = {
        "initialize": functools.partial(handlers.initialize, tasks=has_tasks),
        "ping": handlers.ping,
        "logging/setLevel": handlers.set_log_level,
        **common,
        "resources/subscribe": functools.partial(handlers.resource_subscription, subscribe=True),
        "resources/unsubscribe": functools.partial(handlers.resource_subscription, subscribe=False),
    }
    if tasks is not None and legacy_tasks is not None:
        modern.update(
            {"tasks/get": tasks.get, "tasks/update": tasks.update, "tasks/cancel": tasks.cancel}
        )
        legacy.update(
            {
                "tasks/get": legacy_tasks.get,
                "tasks/result": legacy_tasks.result,
                "tasks/list": legacy_tasks.list,
                "tasks/cancel": legacy_tasks.cancel,
            }
        )
    return MethodTables(modern=modern, legacy=legacy, tasks=tasks, legacy_tasks=legacy_tasks)

"""The ``task_id``, ``tool`` and ``principal`` fields of log lines about a task: passed as
``extra``, and added by :class:`TaskFields` to every line written while a job runs."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: The names of the fields, as attributes of a ``logging.LogRecord``.
FIELDS = ("task_id", "tool", "principal")

_current: ContextVar[dict[str, str] | None] = ContextVar("mcp_tasks_task_fields", default=None)


def of(task: Any) -> dict[str, str]:
    """The ``extra`` of a log line about ``task`` (a :class:`~mcp_tasks.models.Task`)."""
    return {"task_id": task.id, "tool": task.tool_name, "principal": task.principal_scope}


@contextmanager
def running(task: Any) -> Iterator[None]:
    """While inside, the code runs ``task`` (a job in the worker): :class:`TaskFields` adds
    its fields to every line written, in this context and the asyncio tasks it starts."""
    token = _current.set(of(task))
    try:
        yield
    finally:
        _current.reset(token)


class TaskFields(logging.Filter):
    """A handler filter: a line written while a task's job runs carries the task's fields
    (unless the line set its own). Lines about no task pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = _current.get()
        if current is not None:
            for name, value in current.items():
                if not hasattr(record, name):
                    setattr(record, name, value)
        return True

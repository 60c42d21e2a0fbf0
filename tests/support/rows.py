"""Task and question rows written the way the engine writes them (through the task
service), for tests that need one without a client or a worker."""

from __future__ import annotations

import dataclasses
from typing import Any

from mcp_tasks.authoring.approval import StaffAudience
from mcp_tasks.core import task_contract
from mcp_tasks.models import InputRequest, Task
from mcp_tasks.tasks.state import service

#: The answer schema of the questions :func:`ask` asks: one required boolean, ``ok``.
YES_NO = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


_CALLER_FIELDS = frozenset(field.name for field in dataclasses.fields(task_contract.Caller))


def new_record(tool: str = "long_report", **fields: Any) -> task_contract.NewTask:
    """What creates a task of ``tool``: modern era, anonymous, no arguments unless ``fields``
    say otherwise (any field of :class:`~mcp_tasks.core.task_contract.NewTask` or of its
    :class:`~mcp_tasks.core.task_contract.Caller`)."""
    caller: dict[str, Any] = {
        "principal_scope": "anonymous",
        "era": "modern",
        "protocol_version": "2026-07-28",
    }
    caller |= {name: value for name, value in fields.items() if name in _CALLER_FIELDS}
    rest = {name: value for name, value in fields.items() if name not in _CALLER_FIELDS}
    return task_contract.NewTask(
        **{"tool_name": tool, "arguments": {}, **rest}, caller=task_contract.Caller(**caller)
    )


def new_task(tool: str = "long_report", **fields: Any) -> Task:
    """A new task of ``tool``, created by the task service (fields: :func:`new_record`)."""
    return service.create_task(new_record(tool, **fields))


def ask(
    task: Task,
    message: str = "Include draft figures?",
    *,
    key: str | None = None,
    method: str = "elicitation/create",
    schema: dict[str, Any] = YES_NO,
    params: dict[str, Any] | None = None,
    staff: StaffAudience | None = None,
) -> InputRequest:
    """The task's next question: an elicitation of ``message`` with ``schema`` (or
    ``method`` with ``params``), recorded as a worker records it; ``staff``: only staff may
    answer it."""
    if params is None:
        params = {"message": message, "requestedSchema": schema}
    sequence = task.input_requests.count() + 1
    return service.ask(task.id, sequence, method, params, "w", key, staff=staff)

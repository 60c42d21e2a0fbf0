"""Task and question rows written the way the engine writes them (through the task
service), for tests that need one without a client or a worker."""

from __future__ import annotations

from typing import Any

from mcp_tasks.authoring.approval import StaffAudience
from mcp_tasks.core import task_contract
from mcp_tasks.models import InputRequest, Task
from mcp_tasks.tasks import service

#: The answer schema of the questions :func:`ask` asks: one required boolean, ``ok``.
YES_NO = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def new_task(tool: str = "long_report", **fields: Any) -> Task:
    """A new task of ``tool`` (modern era, anonymous, no arguments unless ``fields`` say
    otherwise: any field of :class:`~mcp_tasks.core.task_contract.NewTask`)."""
    values: dict[str, Any] = {
        "tool_name": tool,
        "arguments": {},
        "principal_scope": "anonymous",
        "era": "modern",
        "protocol_version": "2026-07-28",
        "client_info": {},
        "client_capabilities": {},
    }
    return service.create_task(task_contract.NewTask(**{**values, **fields}))


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

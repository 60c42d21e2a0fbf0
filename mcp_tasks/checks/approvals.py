"""E018: a tool that needs a staff approval but could run as a plain call."""

from __future__ import annotations

from django.core.checks import CheckMessage, Error

from ..authoring.registry import mcp


def check_approvals() -> list[CheckMessage]:
    """Every tool declared with ``approval=...`` runs only as a task (``mode="required"``):
    a plain call would have nobody to wait for."""
    return [
        Error(
            f"Tool {tool.name!r} has approval=Approval(...) but TaskConfig(mode="
            f"{tool.task.mode!r}): a client without tasks would call it plainly, and it would "
            "answer an error instead of waiting for staff.",
            hint=(
                "Declare it with task=True (approval makes that 'required') or "
                "task=TaskConfig(mode='required', ...)."
            ),
            obj=tool.fn,
            id="mcp_tasks.E018",
        )
        for tool in mcp.tools.values()
        if getattr(tool, "approval", None) is not None and tool.task.mode != "required"
    ]

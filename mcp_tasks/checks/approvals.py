"""The tools declared with ``approval=Approval(...)``: E018, one that could run as a plain
call; W015, one whose permission no installed model declares."""

from __future__ import annotations

import difflib

from django.apps import apps
from django.contrib.auth import get_permission_codename
from django.core.checks import CheckMessage, Error, Warning as CheckWarning

from ..authoring.registry import mcp


def check_approvals() -> list[CheckMessage]:
    """Every tool declared with ``approval=...`` runs only as a task (``mode="required"``):
    a plain call would have nobody to wait for; and its permission exists."""
    messages: list[CheckMessage] = [
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
        if tool.approval is not None and tool.task.mode != "required"
    ]
    return messages + _check_permissions()


def _check_permissions() -> list[CheckMessage]:
    """W015: a permission no model declares, usually a typo (only superusers could decide)."""
    if not apps.is_installed("django.contrib.auth"):
        return []
    declared = declared_permissions()
    messages: list[CheckMessage] = []
    for tool in mcp.tools.values():
        approval = tool.approval
        if approval is None or approval.permission in declared:
            continue
        app_label = approval.permission.split(".")[0]
        close = difflib.get_close_matches(approval.permission, declared, n=3)
        if close:
            hint = f"Did you mean {' or '.join(repr(name) for name in close)}?"
        elif any(config.label == app_label for config in apps.get_app_configs()):
            hint = f"Declare it in the Meta.permissions of a model of {app_label!r}."
        else:
            hint = (
                f"{app_label!r} is not an installed app's label: name 'app_label.codename' "
                "of a permission a model declares (Meta.permissions)."
            )
        messages.append(
            CheckWarning(
                f"Tool {tool.name!r} has Approval(permission={approval.permission!r}), which "
                "no installed model declares: only superusers could approve its tasks.",
                hint=hint,
                obj=tool.fn,
                id="mcp_tasks.W015",
            )
        )
    return messages


def declared_permissions() -> set[str]:
    """``app_label.codename`` of every permission the installed models declare."""
    names: set[str] = set()
    for model in apps.get_models():
        opts = model._meta
        codenames = [get_permission_codename(action, opts) for action in opts.default_permissions]
        codenames += [codename for codename, _ in opts.permissions]
        names.update(f"{opts.app_label}.{codename}" for codename in codenames)
    return names

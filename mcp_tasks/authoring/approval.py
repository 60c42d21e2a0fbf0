"""Staff sign-off: questions only staff may answer (``ctx.ask_staff``) and tools whose task
waits for an operator's approval (``approval=Approval(...)``). The client never sees them:
its task stays ``working`` with :data:`WAITING_FOR_STAFF` as ``statusMessage``."""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..core import LONGEST_SECONDS, is_count

#: The permission a staff question needs by default (the one that answers client questions).
DEFAULT_PERMISSION = "mcp_tasks.answer_inputrequest"
#: The ``statusMessage`` a client sees while staff decide.
WAITING_FOR_STAFF = "Waiting for approval by staff"
#: The method of an approval question (never sent on the wire).
APPROVAL_METHOD = "mcp_tasks/approval"
#: The key of a task's approval question.
APPROVAL_KEY = "approval"


@dataclass(frozen=True)
class StaffAudience:
    """Who may answer a staff question: a Django ``permission`` and optionally a ``group``;
    ``timeout``: seconds before it times out (None: ``INPUT_TIMEOUT``)."""

    permission: str = DEFAULT_PERMISSION
    group: str | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.permission, str) or self.permission.count(".") != 1:
            raise ImproperlyConfigured(
                f"permission={self.permission!r}: use 'app_label.codename', "
                f"e.g. {DEFAULT_PERMISSION!r}"
            )
        if self.timeout is not None and not 0 < self.timeout <= LONGEST_SECONDS:  # no NaN
            raise ImproperlyConfigured(
                f"timeout={self.timeout!r}: use seconds > 0 (at most a century), or None"
            )


@dataclass(frozen=True)
class Approval:
    """A tool whose task waits for an operator's decision before it runs.

    ``summary``: what the operator reads, formatted with the arguments
    (``"Refund {amount} to {customer}"``). ``permission`` (and ``group``): who may decide.
    ``editable``: arguments the operator may change before approving (validated against
    the tool's input schema). ``approvers``: how many different users must approve (2:
    four eyes). ``timeout``: seconds without a decision before the task ends as rejected
    (None: ``INPUT_TIMEOUT``)."""

    summary: str
    permission: str = DEFAULT_PERMISSION
    editable: tuple[str, ...] = ()
    approvers: int = 1
    group: str | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.summary, str) or not self.summary.strip():
            raise ImproperlyConfigured("Approval(summary=...): say what the operator approves")
        if isinstance(self.editable, str):
            raise ImproperlyConfigured(
                f"Approval(editable={self.editable!r}): use a tuple of argument names, "
                f"e.g. ({self.editable!r},)"
            )
        object.__setattr__(self, "editable", tuple(self.editable))
        if not is_count(self.approvers):
            raise ImproperlyConfigured(
                f"Approval(approvers={self.approvers!r}): use an int >= 1 (2: four eyes)"
            )
        StaffAudience(self.permission, self.group, self.timeout)  # the same rules

    @property
    def audience(self) -> StaffAudience:
        return StaffAudience(self.permission, self.group, self.timeout)

    def placeholders(self) -> list[str]:
        """The argument names ``summary`` formats in."""
        return [
            name.split(".")[0].split("[")[0]
            for _, name, _, _ in string.Formatter().parse(self.summary)
            if name
        ]

    def render(self, arguments: Mapping[str, Any]) -> str:
        """The summary with ``arguments`` filled in (a missing one stays ``{name}``)."""
        try:
            return self.summary.format_map(_Missing(arguments))
        except (ValueError, AttributeError, IndexError, KeyError, TypeError):
            return self.summary

    def check_tool(self, tool_name: str, argument_names: list[str]) -> None:
        """Every name in ``editable`` and the summary is an argument of the tool."""
        for where, names in (("editable", self.editable), ("summary", self.placeholders())):
            unknown = [name for name in names if name not in argument_names]
            if unknown:
                raise ImproperlyConfigured(
                    f"tool {tool_name!r}: Approval({where}=...) names {', '.join(unknown)}, "
                    f"not an argument of the tool (it has: {', '.join(argument_names) or 'none'})"
                )


class _Missing(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def rejection_result(reason: str) -> dict[str, Any]:
    """What a rejected task ends with: a ``CallToolResult`` with ``isError`` (the task is
    ``completed``), so the client and its model read why."""
    text = f"Rejected by staff: {reason}" if reason else "Rejected by staff."
    return {"content": [{"type": "text", "text": text}], "isError": True}


def expired_result() -> dict[str, Any]:
    """What a task ends with when nobody decided in time."""
    text = "Not approved: no staff decision in time."
    return {"content": [{"type": "text", "text": text}], "isError": True}


__all__ = [
    "APPROVAL_KEY",
    "APPROVAL_METHOD",
    "DEFAULT_PERMISSION",
    "WAITING_FOR_STAFF",
    "Approval",
    "StaffAudience",
    "expired_result",
    "rejection_result",
]

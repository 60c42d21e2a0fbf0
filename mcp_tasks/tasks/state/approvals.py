"""Approvals: a tool with ``approval=Approval(...)`` waits for operators before its first run.

The approval is staff question 0 (key ``approval``, method ``mcp_tasks/approval``).
:func:`decide` records each decision (``decisions``) and edit, and answers it once enough
users approved; a rejection completes the task at once with an ``isError`` result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from ...authoring.approval import (
    APPROVAL_KEY,
    APPROVAL_METHOD,
    WAITING_FOR_STAFF,
    StaffAudience,
    rejection_result,
)
from ...authoring.registry import mcp
from ...authoring.tool_call import validate_arguments
from ...core.task_contract import InvalidAnswer
from ...models import InputRequest, InputRequestStatus, TaskStatus
from . import outbox
from .changes import finish, locked, touch
from .questions import NotAllowed, after_answer, ask_all, may_answer, store_answer


def ask_approval(
    task_id: str, params: dict[str, Any], staff: StaffAudience, worker_name: str
) -> InputRequest:
    """The task's approval question: recorded (task parked) the first time, else found."""
    existing = InputRequest.objects.filter(task_id=task_id, key=APPROVAL_KEY).first()
    if existing is not None:
        return existing
    (request,) = ask_all(task_id, 0, [(APPROVAL_METHOD, params, APPROVAL_KEY, staff)], worker_name)
    return request


def approvals_in_force(decisions: list[dict[str, Any]]) -> list[Any]:
    """Users whose approvals count for the current arguments (a change restarts the count)."""
    users: list[Any] = []
    for entry in decisions:
        if entry.get("action") != "approve":
            continue
        if entry.get("changes"):
            users = []
        if entry.get("user_id") not in users:
            users.append(entry.get("user_id"))
    return users


@dataclass(frozen=True)
class Decision:
    """What :func:`decide` did: ``entry`` recorded, ``final``, ``approvals`` of ``needed``."""

    entry: dict[str, Any]
    final: bool
    approvals: int
    needed: int


def _edits(
    question: InputRequest, current: dict[str, Any], edits: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arguments with ``edits`` (schema-checked), and ``{name: {"from": old, "to": new}}``."""
    editable = set((question.params or {}).get("editable") or [])
    refused = sorted(set(edits) - editable)
    if refused:
        raise InvalidAnswer(f"{', '.join(refused)} may not be changed")
    merged = {**current, **edits}
    changes = {
        name: {"from": current.get(name), "to": value}
        for name, value in edits.items()
        if current.get(name) != value
    }
    if changes:
        tool = mcp.tools.get(question.task.tool_name)
        if tool is None:
            raise InvalidAnswer(f"the tool {question.task.tool_name!r} is not registered here")
        try:
            validate_arguments(tool, merged)
        except ValueError as exc:
            raise InvalidAnswer(str(exc)) from None
    return merged, changes


def decide(
    question_id: int,
    user: Any,
    *,
    approve: bool,
    reason: str = "",
    edits: dict[str, Any] | None = None,
) -> Decision | None:
    """Record ``user``'s decision on an approval question (None: it no longer waits); the task
    runs once ``approvers`` users approved its arguments as ``edits`` left them. Raises
    :class:`NotAllowed` or :class:`InvalidAnswer` (bad edit, repeat, rejection without reason)."""
    reason = (reason or "").strip()[:2000]
    with transaction.atomic():
        try:
            question = InputRequest.objects.select_related("task").get(
                pk=question_id, method=APPROVAL_METHOD
            )
        except InputRequest.DoesNotExist:
            return None
        task = locked(question.task_id)
        question = InputRequest.objects.select_for_update().get(pk=question.pk)
        question.task = task
        if task.is_terminal or question.status != InputRequestStatus.PENDING:
            return None
        if not may_answer(user, question):
            raise NotAllowed(question.permission)
        if not approve and not reason:
            raise InvalidAnswer("give a reason for the rejection: the client reads it")
        merged, changes = _edits(question, dict(task.arguments or {}), edits or {})
        decisions = list(question.decisions or [])
        entry: dict[str, Any] = {
            "action": "approve" if approve else "reject",
            "user": user.get_username(),
            "user_id": user.pk,
            "at": timezone.now().isoformat(),
            "reason": reason,
            "changes": changes if approve else {},
        }
        needed = int((question.params or {}).get("approvers") or 1)
        if approve and not changes and user.pk in approvals_in_force(decisions):
            raise InvalidAnswer(
                f"you already approved this task; it needs {needed} different approvers"
            )
        decisions.append(entry)
        question.decisions = decisions
        approvals = len(approvals_in_force(decisions))
        if approve and approvals < needed:
            question.save(update_fields=["decisions"])
            fields: dict[str, Any] = {
                "status_message": f"{WAITING_FOR_STAFF} ({approvals} of {needed} approvals)"
            }
            if changes:
                fields["arguments"] = merged
            touch(task, **fields)
            outbox.publish(task)
            outbox.announce(task.id, "question_asked")
            return Decision(entry, False, approvals, needed)
        response = (
            {"action": "approve", "arguments": merged}
            if approve
            else {"action": "reject", "reason": reason}
        )
        store_answer(question, response, f"admin:{user.get_username()}", user, "decisions")
        if approve:
            if changes:
                touch(task, arguments=merged)
            after_answer(task, others_pending=False, answered=question)
        else:
            finish(
                task.id,
                TaskStatus.COMPLETED,
                result=rejection_result(reason),
                message="Rejected by staff",
            )
        return Decision(entry, True, approvals, needed)


__all__ = ["Decision", "approvals_in_force", "ask_approval", "decide"]

"""Approvals: a task of a tool declared with ``approval=Approval(...)`` waits for an
operator's decision before its first run.

The approval is a staff question (key ``approval``, method ``mcp_tasks/approval``, number 0:
the tool's own questions start at 1), parked like any question. :func:`decide` is its one
decision path: it records each decision on the question's row (``decisions``), applies the
operator's edits to the task's arguments, and, once enough different users approved, answers
the question so that the task runs; a rejection ends the task at once, ``completed`` with an
``isError`` result that says why.
"""

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
    """The task's approval question: recorded (and the task parked, waiting for staff) the
    first time, found as it is (decided or not) on every later run."""
    existing = InputRequest.objects.filter(task_id=task_id, key=APPROVAL_KEY).first()
    if existing is not None:
        return existing
    (request,) = ask_all(task_id, 0, [(APPROVAL_METHOD, params, APPROVAL_KEY, staff)], worker_name)
    return request


def approvals_in_force(decisions: list[dict[str, Any]]) -> list[Any]:
    """The users whose approvals count for the arguments as they are now: an approval that
    changed them starts the count again."""
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
    """What :func:`decide` did: the ``entry`` recorded, whether it settled the approval
    (``final``), and how many approvals are in force out of how many are needed."""

    entry: dict[str, Any]
    final: bool
    approvals: int
    needed: int


def _edits(
    question: InputRequest, current: dict[str, Any], edits: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arguments with ``edits`` applied (validated against the tool's input schema),
    and what changed: ``{name: {"from": old, "to": new}}``."""
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
    """Record ``user``'s decision on an approval question; None when it no longer waits.

    Approving with ``edits`` (the editable arguments' new values) changes the task's
    arguments; the task runs once ``approvers`` different users approved them as they are
    (an approval that changes them counts anew). Rejecting needs a ``reason`` and ends the
    task ``completed`` with ``isError``. Raises :class:`NotAllowed` when ``user`` lacks the
    approval's permission or group, :class:`InvalidAnswer` for an edit the tool's schema
    refuses, a second approval by the same user, or a rejection without a reason.
    """
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


__all__ = ["Decision", "NotAllowed", "approvals_in_force", "ask_approval", "decide"]

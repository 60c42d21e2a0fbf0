"""Staff decisions in tests: approve or reject a task's approval (``Approval(...)``) the way
an operator does in the admin, through the same decision path
(:func:`mcp_tasks.tasks.state.approvals.decide`)."""

from __future__ import annotations

import time
from typing import Any

from ..authoring.approval import APPROVAL_KEY
from ..models import InputRequest, InputRequestStatus
from ..tasks.state import approvals
from .client import TaskRun
from .results import McpClientError


def approve(
    run: TaskRun | str, user: Any, *, edits: dict[str, Any] | None = None, timeout: float = 10.0
) -> None:
    """Approve the task's approval as ``user`` (who needs its permission: a superuser
    passes), with ``edits`` to its editable arguments; waits up to ``timeout`` seconds for
    the task's first job to ask for it."""
    approvals.decide(_waiting_approval(run, timeout).pk, user, approve=True, edits=edits)


def reject(run: TaskRun | str, user: Any, reason: str, *, timeout: float = 10.0) -> None:
    """Reject the task's approval as ``user``, saying why: the task completes with an
    ``isError`` result."""
    approvals.decide(_waiting_approval(run, timeout).pk, user, approve=False, reason=reason)


def _waiting_approval(run: TaskRun | str, timeout: float) -> InputRequest:
    task_id = run.task_id if isinstance(run, TaskRun) else run
    deadline = time.monotonic() + timeout
    while True:
        question = InputRequest.objects.filter(
            task_id=task_id, key=APPROVAL_KEY, status=InputRequestStatus.PENDING
        ).first()
        if question is not None:
            return question
        if time.monotonic() > deadline:
            raise McpClientError(
                f"task {task_id} asked for no approval within {timeout:g} s (is its tool "
                "declared with approval=Approval(...), and does a worker run it?)"
            )
        time.sleep(0.02)

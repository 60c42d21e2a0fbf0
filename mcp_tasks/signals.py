"""Signals the task service sends once per event, after the transaction that made the
change commits (never for a rolled-back change), with ``sender=Task``, ``task_id`` and:

- :data:`task_created`: ``task`` (the new :class:`~mcp_tasks.models.Task`).
- :data:`task_status_changed`: ``old_status``, ``new_status`` (``TaskStatus`` values).
- :data:`question_asked`: ``question`` (the new :class:`~mcp_tasks.models.InputRequest`,
  its ``task`` attached).
- :data:`question_answered`: ``question``, ``answered_by`` (``"client"`` for an MCP
  client, ``"admin:<username>"`` for staff) and ``user`` (the staff user, or None).
- :data:`task_finished`: ``status`` (``completed``, ``failed`` or ``cancelled``).

Receivers run in the process and thread that committed (often a worker's database thread):
keep them short. One that raises is logged and changes nothing for the task or the others."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

from .models import Task

logger = logging.getLogger("mcp_tasks.signals")

task_created = Signal(use_caching=True)
task_status_changed = Signal(use_caching=True)
question_asked = Signal(use_caching=True)
question_answered = Signal(use_caching=True)
task_finished = Signal(use_caching=True)

_NAMES = {
    id(task_created): "task_created",
    id(task_status_changed): "task_status_changed",
    id(question_asked): "question_asked",
    id(question_answered): "question_answered",
    id(task_finished): "task_finished",
}


def listened(signal: Signal) -> bool:
    """Whether any receiver is connected (the service skips building arguments if not)."""
    return signal.has_listeners(Task)


def send_on_commit(signal: Signal, **arguments: Any) -> None:
    """Send ``signal`` once the current transaction commits (at once outside one); nothing
    when no receiver is connected."""
    if listened(signal):
        transaction.on_commit(lambda: send_now(signal, **arguments))


def send_now(signal: Signal, **arguments: Any) -> None:
    """Send ``signal`` to every receiver; a receiver that raises is logged."""
    for receiver, result in signal.send_robust(Task, **arguments):
        if isinstance(result, Exception):
            logger.warning(
                "receiver %r of mcp_tasks signal %s failed for task %s: %r",
                receiver,
                _NAMES.get(id(signal), "?"),
                arguments.get("task_id"),
                result,
            )

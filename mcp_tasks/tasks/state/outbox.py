"""What a transaction of the task service sends once it commits: the one way out.

Every transition tells others of itself only after its transaction commits (durable
before visible), through these functions and no other ``transaction.on_commit``: the
task's watchers and the worker running it (:func:`publish`, :func:`publish_by_worker`,
through :mod:`.notify`), the live admin (:func:`announce`, through the announcer the live
admin installs: :func:`install_announcer`),
the site's receivers of :mod:`mcp_tasks.signals` (:func:`signal`), and the queue
(:func:`enqueue`, :func:`after_commit` for the rest: a job's stop, the metrics). A
rolled-back savepoint drops what it added, as ``on_commit`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from django.db import transaction
from django.dispatch import Signal

from ... import signals
from ...models import Task
from ..queues import queue
from . import notify


class Announcer(Protocol):
    """Who else hears of the service's events (a module with these three functions will
    do): :class:`~mcp_tasks.apps.McpTasksConfig` installs :mod:`mcp_tasks.admin.events` when
    ``django.contrib.admin`` is installed. The engine knows no admin; until then nothing
    is heard."""

    def announce(self, task_id: str, event: str) -> None: ...

    def announce_on_commit(self, task_id: str, event: str) -> None: ...

    def may_announce(self) -> bool: ...


_announcer: Announcer | None = None


def install_announcer(announcer: Announcer | None) -> None:
    """Send the service's events to ``announcer`` from now on (None: to nobody)."""
    global _announcer
    _announcer = announcer


def may_announce() -> bool:
    """False when :func:`announce_now` surely would do nothing now (async callers skip a
    hop to the ORM thread)."""
    return _announcer is not None and _announcer.may_announce()


def announce_now(task_id: str, event: str) -> None:
    """Tell the announcer that ``task_id`` changed (``event`` names how), outside any
    transaction: a change committed from the event loop."""
    if _announcer is not None:
        _announcer.announce(task_id, event)


def after_commit(fn: Callable[[], Any], *, robust: bool = False) -> None:
    """``fn`` once the transaction commits (``robust``: an error is logged, not raised
    into the committing request)."""
    transaction.on_commit(fn, robust=robust)


def publish(task: Task, *, wake: bool = False, answers: dict[str, Any] | None = None) -> None:
    """Tell the task's watchers (and, with ``wake``, the worker running it: the change came
    from someone else, with the ``answers`` it waits for) that it changed."""
    task_id, status = task.id, task.status
    session_id = task.session_id if task.era == "legacy" else None
    worker = task.worker_name if wake and task.worker_name else None
    after_commit(lambda: notify.publish_task_change(task_id, status, session_id, worker, answers))


def publish_by_worker(task: Task | str, status: str, fields: dict[str, Any] | None = None) -> None:
    """:func:`publish` for a change the worker running the task made with a conditional
    update (``task``: the row as the worker loaded it, or its id; ``fields``: those of
    a task that ended, :func:`~.changes.final_fields`)."""
    if isinstance(task, str):
        task = Task.objects.only("era", "session_id").get(pk=task)
    task_id = task.id
    legacy_session = task.session_id if task.era == "legacy" else None
    after_commit(lambda: notify.publish_task_change(task_id, status, legacy_session, fields=fields))


def announce(task_id: str, event: str) -> None:
    """Tell the live admin (when one is installed) that ``task_id`` changed."""
    if _announcer is not None:
        _announcer.announce_on_commit(task_id, event)


def signal(sent: Signal, **arguments: Any) -> None:
    """Send one of :mod:`mcp_tasks.signals` (nothing when no receiver listens)."""
    signals.send_on_commit(sent, **arguments)


def enqueue(task: Task, *, delay: float = 0.0, robust: bool = False) -> None:
    """Queue the task's next job (``robust``: a queue that cannot take it now is logged;
    the housekeeping queues it again after ``TASK_REQUEUE_AFTER``)."""
    after_commit(lambda: queue.enqueue(task, delay=delay), robust=robust)

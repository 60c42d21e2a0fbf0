"""What the task service tells others of a change: the one way out.

Every transition tells others of itself only after its transaction commits (durable
before visible), through these functions and no other ``transaction.on_commit``: the
task's watchers and the worker running it (:func:`publish`, :func:`publish_by_worker`,
through the channel layer: :func:`apublish_task_change`, which a change committed from the
event loop calls itself), the live admin (:func:`announce`, through the announcer the live
admin installs: :func:`install_announcer`), the site's receivers of :mod:`mcp_tasks.signals`
(:func:`signal`), and the queue (:func:`enqueue`, :func:`after_commit` for the rest: a
job's stop, the metrics). A rolled-back savepoint drops what it added, as ``on_commit``
does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, Protocol

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.dispatch import Signal

from ... import signals
from ...conf import get_config
from ...core.background import in_background
from ...core.db import calling_loop
from ...core.groups import ADMIN, session_group, task_shard_group, worker_group
from ...models import Task
from ..queues import layer_publish, queue

logger = logging.getLogger("mcp_tasks.tasks")

P = ParamSpec("P")


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
    after_commit(lambda: publish_task_change(task_id, status, session_id, worker, answers))


def publish_by_worker(task: Task | str, status: str, fields: dict[str, Any] | None = None) -> None:
    """:func:`publish` for a change the worker running the task made with a conditional
    update (``task``: the row as the worker loaded it, or its id; ``fields``: those of
    a task that ended, :func:`~.changes.final_fields`)."""
    if isinstance(task, str):
        task = Task.objects.only("era", "session_id").get(pk=task)
    task_id = task.id
    legacy_session = task.session_id if task.era == "legacy" else None
    after_commit(lambda: publish_task_change(task_id, status, legacy_session, fields=fields))


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


# -- the channel layer: streams in any process and the worker running the task hear of a
# change at once ----------------------------------------------------------------------


async def apublish_task_change(
    task_id: str,
    status: str,
    session_id: str | None = None,
    worker: str | None = None,
    answers: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
) -> None:
    """Tell the task's watchers (requests waiting on it, through its shard group; a legacy
    creator's session streams; the ``worker`` runtime running it) that it changed.
    ``answers`` (question key → committed answer) go to the worker only: it goes on without
    reading them back. ``fields``: the task's fields as the change committed them (an ended
    task's, :func:`~mcp_tasks.tasks.state.changes.final_fields`; an asking task's,
    :func:`~mcp_tasks.tasks.state.changes.asked_fields`), to the waiting requests only: they
    answer without reading the task back."""
    alias = get_config().CHANNEL_LAYER
    layer = get_channel_layer(alias)
    if layer is None:
        return
    message: dict[str, Any] = {"type": "mcp.task", "task_id": task_id, "status": status}
    shard_message = {**message, "fields": fields} if fields else message
    await layer_publish.group_send(alias, layer, task_shard_group(task_id), shard_message)
    if session_id:
        await layer_publish.group_send(alias, layer, session_group(session_id), message)
    if worker:
        worker_message = {**message, "answers": answers or {}}
        await layer_publish.group_send(alias, layer, worker_group(worker), worker_message)


async def apublish_admin_event(task_id: str, event: str) -> None:
    """Tell the live admin pages (:data:`~mcp_tasks.core.groups.ADMIN`) that a task changed."""
    layer = get_channel_layer(get_config().CHANNEL_LAYER)
    if layer is not None:
        message = {"type": "mcp.admin", "task_id": task_id, "event": event}
        await layer.group_send(ADMIN, message)


def _from_sync_code(send: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """``send`` (its first argument: the task id) for synchronous code. Inside a
    :func:`~mcp_tasks.core.db.db` call the message goes out from the awaiting event loop without
    blocking the ORM thread; elsewhere (admin views, management commands) it is sent before
    this returns. Failures are logged: pollers and the worker's heartbeat still see the row."""

    def publish(*args: P.args, **kwargs: P.kwargs) -> None:
        task_id = args[0]
        loop = calling_loop()
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(
                in_background,
                send(*args, **kwargs),
                logger,
                "could not publish the change of task %s",
                task_id,
            )
            return
        try:
            async_to_sync(layer_publish.one_off(send))(*args, **kwargs)
        except Exception:
            logger.warning(
                "could not publish the change of task %s",
                task_id,
                exc_info=True,
                extra={"task_id": task_id},
            )

    return publish


#: :func:`apublish_task_change` from synchronous code.
publish_task_change = _from_sync_code(apublish_task_change)
#: :func:`apublish_admin_event` from synchronous code.
publish_admin_event = _from_sync_code(apublish_admin_event)

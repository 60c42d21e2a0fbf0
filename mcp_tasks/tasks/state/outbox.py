"""The one way the task service tells others of a change: after commit (durable before
visible), through these functions only: watchers and worker (:func:`publish`, through the
channel layer), the live admin (:func:`announce`), :mod:`mcp_tasks.signals` (:func:`signal`),
the queue (:func:`enqueue`) and the rest (:func:`after_commit`). A rolled-back savepoint
drops what it added, as ``on_commit`` does."""

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
    """Who hears the service's events (:mod:`mcp_tasks.admin.events`, installed by the app)."""

    def announce(self, task_id: str, event: str) -> None: ...

    def announce_on_commit(self, task_id: str, event: str) -> None: ...

    def may_announce(self) -> bool: ...


_announcer: Announcer | None = None


def install_announcer(announcer: Announcer | None) -> None:
    """Send the service's events to ``announcer`` from now on (None: to nobody)."""
    global _announcer
    _announcer = announcer


def may_announce() -> bool:
    """False when :func:`announce_now` would surely do nothing (async callers skip a hop)."""
    return _announcer is not None and _announcer.may_announce()


def announce_now(task_id: str, event: str) -> None:
    """Tell the announcer now of a change committed from the event loop (no transaction)."""
    if _announcer is not None:
        _announcer.announce(task_id, event)


def after_commit(fn: Callable[[], Any], *, robust: bool = False) -> None:
    """``fn`` once the transaction commits (``robust``: its error is logged, not raised)."""
    transaction.on_commit(fn, robust=robust)


def publish(task: Task, *, wake: bool = False, answers: dict[str, Any] | None = None) -> None:
    """Tell the task's watchers (with ``wake``, its worker too, and ``answers``) it changed."""
    task_id, status = task.id, task.status
    session_id = task.session_id if task.era == "legacy" else None
    worker = task.worker_name if wake and task.worker_name else None
    after_commit(lambda: publish_task_change(task_id, status, session_id, worker, answers))


def publish_by_worker(task: Task | str, status: str, fields: dict[str, Any] | None = None) -> None:
    """:func:`publish` of the worker's own update (``fields``: :func:`~.changes.final_fields`)."""
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
    """Queue the task's next job (``robust``: a failure is logged; requeued later)."""
    after_commit(lambda: queue.enqueue(task, delay=delay), robust=robust)


# -- the channel layer: streams and the task's worker hear of a change at once -------------


async def apublish_task_change(
    task_id: str,
    status: str,
    session_id: str | None = None,
    worker: str | None = None,
    answers: dict[str, Any] | None = None,
    fields: dict[str, Any] | None = None,
) -> None:
    """Tell the task's shard group, legacy session and ``worker`` that it changed. The
    worker alone gets ``answers`` (key → answer); waiting requests alone get ``fields``
    (:func:`~.changes.final_fields`, :func:`~.changes.asked_fields`): no read back."""
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
    alias = get_config().CHANNEL_LAYER
    layer = get_channel_layer(alias)
    if layer is not None:
        message = {"type": "mcp.admin", "task_id": task_id, "event": event}
        await layer_publish.group_send(alias, layer, ADMIN, message)


def _from_sync_code(send: Callable[P, Coroutine[Any, Any, None]]) -> Callable[P, None]:
    """``send`` (first argument: the task id) for sync code: from the awaiting loop inside
    :func:`~mcp_tasks.core.db.db`, else before returning. Failures are only logged."""

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

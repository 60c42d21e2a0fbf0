"""Publishing task changes to the channel layer, so streams in any process and the
worker running the task hear about them at once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from ...conf import get_config
from ...core.background import in_background
from ...core.db import calling_loop
from ...core.groups import ADMIN, session_group, task_shard_group, worker_group

logger = logging.getLogger("mcp_tasks.tasks")

P = ParamSpec("P")


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
    layer = get_channel_layer(get_config().CHANNEL_LAYER)
    if layer is None:
        return
    message: dict[str, Any] = {"type": "mcp.task", "task_id": task_id, "status": status}
    await layer.group_send(
        task_shard_group(task_id), {**message, "fields": fields} if fields else message
    )
    if session_id:
        await layer.group_send(session_group(session_id), message)
    if worker:
        await layer.group_send(worker_group(worker), {**message, "answers": answers or {}})


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
            async_to_sync(send)(*args, **kwargs)
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

"""Publishing task changes to the channel layer, so streams in any process and the
worker running the task hear about them at once."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from ..conf import get_config
from ..groups import session_group, task_group

logger = logging.getLogger("mcp_tasks.tasks")


async def apublish_task_change(task_id: str, status: str, session_id: str | None = None) -> None:
    """Tell the task's watchers (and a legacy creator's session streams) it changed."""
    layer = get_channel_layer(get_config()["CHANNEL_LAYER"])
    if layer is None:
        return
    message = {"type": "mcp.task", "task_id": task_id, "status": status}
    await layer.group_send(task_group(task_id), message)
    if session_id:
        await layer.group_send(session_group(session_id), message)


def publish_task_change(task_id: str, status: str, session_id: str | None = None) -> None:
    """Tell watchers the task changed. Failures are logged: pollers still see the row."""
    try:
        async_to_sync(apublish_task_change)(task_id, status, session_id)
    except Exception:
        logger.warning("could not publish the change of task %s", task_id, exc_info=True)

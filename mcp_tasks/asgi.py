"""Mount the MCP endpoint in a project's ASGI application with one line::

application = mcp_application(get_asgi_application())
"""

from __future__ import annotations

from typing import Any

from channels.routing import ProtocolTypeRouter
from django.apps import apps

from .conf import get_config

ASGIApp = Any


def mcp_application(django_app: ASGIApp, path: str | None = None) -> ASGIApp:
    """Route HTTP requests for the MCP path to the MCP consumer and everything else to
    ``django_app``. With ``django.contrib.auth`` installed, the Django session user is
    available to tools (``ctx.user``)."""
    from .transport.consumer import McpConsumer

    mcp_path = (path or get_config()["PATH"]).rstrip("/") or "/"
    consumer: ASGIApp = McpConsumer.as_asgi()
    if apps.is_installed("django.contrib.auth") and apps.is_installed("django.contrib.sessions"):
        from channels.auth import AuthMiddlewareStack

        consumer = AuthMiddlewareStack(consumer)

    async def http(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if get_config()["EMBEDDED_WORKER"]:
            from .tasks import embedded

            embedded.start_worker(_task_queues(), get_config()["EMBEDDED_WORKERS"])  # once
        if scope["path"].rstrip("/") == mcp_path or scope["path"] == mcp_path:
            await consumer(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    router = ProtocolTypeRouter({"http": http})
    router.mcp_tasks_path = mcp_path  # read by the system checks
    return router


def _task_queues() -> list[str]:
    from .server import mcp

    queues = {get_config()["TASK_QUEUE"]}
    queues.update(tool.task.queue for tool in mcp.tools.values() if tool.task.queue)
    return sorted(queues)

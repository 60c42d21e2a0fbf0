"""Mount the MCP endpoint: ``application = mcp_application(get_asgi_application())``.

Where the layers meet: the protocol's :class:`~.protocol.Dispatcher` for the site's server,
with the task engine when django-rq is installed (else task tools run as plain calls), handed
to the transport's consumer."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from channels.routing import ProtocolTypeRouter
from django.apps import apps
from django.conf import settings

from .conf import get_config
from .core.gc_freeze import freeze_startup_objects

if TYPE_CHECKING:
    from .protocol import Dispatcher

ASGIApp = Any


def mcp_application(django_app: ASGIApp, path: str | None = None) -> ASGIApp:
    """Route HTTP requests for the MCP path to the MCP consumer and everything else to
    ``django_app``. With ``django.contrib.auth`` installed, tools see the Django session user
    (``ctx.user``). WebSockets at ``ADMIN_LIVE_PATH`` reach the live admin."""
    from .tasks.worker.embedded_worker import autostart
    from .transport import resource_metadata
    from .transport.consumer import McpConsumer

    mcp_path = (path or get_config().PATH).rstrip("/") or "/"
    consumer: ASGIApp = McpConsumer.as_asgi(dispatcher=dispatcher())
    with_session: ASGIApp = consumer
    if apps.is_installed("django.contrib.auth") and apps.is_installed("django.contrib.sessions"):
        from channels.auth import AuthMiddlewareStack

        with_session = AuthMiddlewareStack(consumer)
    session_cookie = f"{settings.SESSION_COOKIE_NAME}=".encode("latin-1")

    async def http(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if get_config().EMBEDDED_WORKER:
            autostart()  # once
        if scope["path"].rstrip("/") == mcp_path or scope["path"] == mcp_path:
            # Only a request with a session cookie can have a session user: the others
            # skip the session and user lookups (a trip to the ORM thread each).
            app = with_session if _has_cookie(scope, session_cookie) else consumer
            await app(scope, receive, send)
        elif resource_metadata.is_metadata_path(scope["path"]):
            await resource_metadata.serve(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    protocols: dict[str, ASGIApp] = {"http": http}
    live = admin_live_application()
    if live is not None:
        protocols["websocket"] = live
    router = ProtocolTypeRouter(protocols)
    router.mcp_tasks_path = mcp_path  # read by the system checks
    freeze_startup_objects()  # the ASGI module is imported once, before the server starts
    return router


@functools.cache
def dispatcher() -> Dispatcher:
    """The site's dispatcher (one per process: its method tables are built once)."""
    from .authoring.registry import mcp
    from .protocol import Dispatcher
    from .tasks.engine import Engine

    return Dispatcher(mcp, Engine() if apps.is_installed("django_rq") else None)


def admin_live_application() -> ASGIApp | None:
    """The live admin's WebSocket at ``ADMIN_LIVE_PATH`` (None when it is not set): the
    admin session's user, from a page of this server's own origin (``SameOriginWebSocket``)."""
    live_path = get_config().ADMIN_LIVE_PATH
    if not live_path or not apps.is_installed("django.contrib.sessions"):
        return None
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from django.urls import path as route

    from .admin.live import AdminLiveConsumer
    from .transport.http import SameOriginWebSocket

    routes = [route(live_path.lstrip("/"), AdminLiveConsumer.as_asgi())]
    return SameOriginWebSocket(AuthMiddlewareStack(URLRouter(routes)))


def _has_cookie(scope: dict[str, Any], prefix: bytes) -> bool:
    return any(name == b"cookie" and prefix in value for name, value in scope.get("headers") or ())

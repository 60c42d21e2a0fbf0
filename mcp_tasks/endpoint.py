"""Where the layers meet: the protocol's :class:`~.protocol.Dispatcher` for the site's
server, with the task engine when django-rq is installed (else task tools run as plain
calls). The transport is handed what this builds (:func:`mcp_tasks.asgi.mcp_application`).
"""

from __future__ import annotations

import functools

from django.apps import apps

from .authoring.registry import mcp
from .protocol import Dispatcher
from .tasks.engine import Engine


@functools.cache
def dispatcher() -> Dispatcher:
    """The site's dispatcher (one per process: its method tables are built once)."""
    return Dispatcher(mcp, Engine() if apps.is_installed("django_rq") else None)

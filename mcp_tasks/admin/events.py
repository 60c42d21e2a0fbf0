"""The task service's events, forwarded to the :data:`~mcp_tasks.core.groups.ADMIN` group
for :mod:`mcp_tasks.admin.live` pages, while ``ADMIN_LIVE_PATH`` is set and a page is open.
Installed with :func:`mcp_tasks.tasks.state.outbox.install_announcer`, not as a :mod:`mcp_tasks.signals`
receiver: a listener would make every completion hop to Django's thread."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from ..conf import DEFAULTS
from ..tasks.state import outbox
from . import watchers

_DEFAULT_PATH = DEFAULTS["ADMIN_LIVE_PATH"]


def enabled() -> bool:
    """``ADMIN_LIVE_PATH`` is set (read from the settings: a broken dict is E003's business)."""
    user = getattr(settings, "MCP_TASKS", None)
    user = {} if user is None else user
    return isinstance(user, dict) and user.get("ADMIN_LIVE_PATH", _DEFAULT_PATH) is not None


def announce(task_id: str, event: str) -> None:
    """Tell the live admin pages that ``task_id`` changed; nothing while none is open."""
    if enabled() and watchers.pages_open():
        outbox.publish_admin_event(task_id, event)


def announce_on_commit(task_id: str, event: str) -> None:
    """:func:`announce` once the current transaction commits (at once outside one)."""
    if enabled():
        transaction.on_commit(lambda: announce(task_id, event))


def may_announce() -> bool:
    """Whether :func:`announce` could publish now; False only when it surely would not
    (off, or no page open as last read), so async callers skip a hop to the ORM thread."""
    return enabled() and watchers.may_be_open()

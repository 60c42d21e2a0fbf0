"""Who else hears of the task service's events: a hook, filled by the live admin.

The service calls :func:`announce_on_commit` (and :func:`announce`, after asking
:func:`may_announce`) at every change a live admin page shows. The engine knows no admin:
:class:`~mcp_tasks.apps.McpTasksConfig` installs :mod:`mcp_tasks.admin.events` here when
``django.contrib.admin`` is installed; until then, and without the admin, nothing is heard.
"""

from __future__ import annotations

from typing import Protocol


class Announcer(Protocol):
    """What the service tells (a module with these three functions will do)."""

    def announce(self, task_id: str, event: str) -> None: ...

    def announce_on_commit(self, task_id: str, event: str) -> None: ...

    def may_announce(self) -> bool: ...


_announcer: Announcer | None = None


def install(announcer: Announcer | None) -> None:
    """Send the service's events to ``announcer`` from now on (None: to nobody)."""
    global _announcer
    _announcer = announcer


def announce(task_id: str, event: str) -> None:
    """Tell the announcer that ``task_id`` changed (``event`` names how)."""
    if _announcer is not None:
        _announcer.announce(task_id, event)


def announce_on_commit(task_id: str, event: str) -> None:
    """:func:`announce` once the current transaction commits."""
    if _announcer is not None:
        _announcer.announce_on_commit(task_id, event)


def may_announce() -> bool:
    """False when :func:`announce` surely would do nothing now (async callers skip a hop
    to the ORM thread)."""
    return _announcer is not None and _announcer.may_announce()

"""Live admin pages: the task service's signals, forwarded to the channel layer's
:data:`~mcp_tasks.groups.ADMIN` group, where :mod:`mcp_tasks.admin_live` consumers hear
them. Progress of a task reaches them through the task's own group, which the service
already publishes to. Connected only while ``ADMIN_LIVE_PATH`` is set; published only while
a live admin page is open somewhere (:mod:`mcp_tasks.admin_watchers`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from . import admin_watchers, signals
from .conf import DEFAULTS
from .tasks import notify

_EVENTS = {
    "task_created": signals.task_created,
    "task_status_changed": signals.task_status_changed,
    "question_asked": signals.question_asked,
    "question_answered": signals.question_answered,
}


def announce(task_id: str, event: str) -> None:
    """Tell the live admin pages that ``task_id`` changed; nothing while none is open."""
    if admin_watchers.pages_open():
        notify.publish_admin_event(task_id, event)


def _receiver(event: str) -> Any:
    def forward(sender: Any, task_id: str, **arguments: Any) -> None:
        announce(task_id, event)

    forward.__name__ = f"forward_{event}"
    return forward


_DEFAULT_PATH = DEFAULTS["ADMIN_LIVE_PATH"]
_RECEIVERS = {event: _receiver(event) for event in _EVENTS}


def enabled() -> bool:
    """``ADMIN_LIVE_PATH`` is set (read from the settings: a broken dict is E003's business)."""
    user = getattr(settings, "MCP_TASKS", None)
    user = {} if user is None else user
    return isinstance(user, dict) and user.get("ADMIN_LIVE_PATH", _DEFAULT_PATH) is not None


def connect(**kwargs: Any) -> None:
    """Connect the receivers while the live admin is on (at start-up and on
    ``setting_changed``)."""
    if kwargs.get("setting", "MCP_TASKS") != "MCP_TASKS":
        return
    on = enabled()
    for event, signal in _EVENTS.items():
        uid = f"mcp_tasks.live.{event}"
        if on:
            signal.connect(_RECEIVERS[event], dispatch_uid=uid)
        else:
            signal.disconnect(dispatch_uid=uid)

"""``subscriptions/listen`` (modern era): what a stream agreed to hear; its notification filter."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.jsonrpc import INVALID_PARAMS, Message, notification
from ..exceptions import ProtocolError
from .constants import META_SUBSCRIPTION_ID
from .request import RequestInfo
from .task_methods import TaskMethods, require_tasks_capability

#: ``subscriptions/listen`` filter keys → the notification each one selects.
LIST_CHANGED_FILTERS = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}


@dataclass
class Subscription:
    """One ``subscriptions/listen`` stream: its id (the request's), what was agreed, and
    the tasks it watches (those of ``principal_scope`` among the ones it named)."""

    id: Any
    principal_scope: str
    agreed: dict[str, Any]
    task_ids: frozenset[str]

    def acknowledgement(self) -> Message:
        """The stream's first event: ``notifications/subscriptions/acknowledged``."""
        return notification(
            "notifications/subscriptions/acknowledged",
            {"_meta": {META_SUBSCRIPTION_ID: self.id}, "notifications": self.agreed},
        )

    def accepts(self, message: Message) -> bool:
        """Whether a broadcast is for this stream (then tagged with the subscription id)."""
        method = message.get("method")
        params = message.setdefault("params", {})
        if method == "notifications/resources/updated":
            if params.get("uri") not in self.agreed.get("resourceSubscriptions", []):
                return False
        elif method not in {
            LIST_CHANGED_FILTERS[key] for key in self.agreed if key in LIST_CHANGED_FILTERS
        }:
            return False
        params.setdefault("_meta", {})[META_SUBSCRIPTION_ID] = self.id
        return True

    def tagged(self, detailed_task: dict[str, Any]) -> Message:
        """A ``notifications/tasks`` push of one of the watched tasks."""
        detailed_task["_meta"] = {META_SUBSCRIPTION_ID: self.id}
        return notification("notifications/tasks", detailed_task)


async def subscribe(message: Message, info: RequestInfo, tasks: TaskMethods | None) -> Subscription:
    """Read a ``subscriptions/listen`` request (``-32602`` when its filter is not an
    object; ``taskIds`` need the tasks extension and keep only the caller's tasks)."""
    wanted = (message.get("params") or {}).get("notifications") or {}
    if not isinstance(wanted, dict):
        raise ProtocolError(INVALID_PARAMS, "params.notifications must be an object")
    agreed: dict[str, Any] = {key: True for key in LIST_CHANGED_FILTERS if wanted.get(key) is True}
    uris = wanted.get("resourceSubscriptions")
    if isinstance(uris, list) and all(isinstance(uri, str) for uri in uris):
        agreed["resourceSubscriptions"] = uris
    task_ids = wanted.get("taskIds")
    owned: list[str] = []
    if task_ids is not None:
        require_tasks_capability(info)
        listed = task_ids if isinstance(task_ids, list) else []
        owned = await tasks.owned_ids(listed, info.principal.scope) if tasks else []
        agreed["taskIds"] = owned
    return Subscription(message["id"], info.principal.scope, agreed, frozenset(owned))

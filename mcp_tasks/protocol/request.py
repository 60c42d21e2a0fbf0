"""What the protocol layer knows about the request it serves, and how it answers back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..auth import Principal
from ..conf import get_config
from ..core.task_contract import Caller

Era = Literal["modern", "legacy"]


class Sink(Protocol):
    """The transport's side of a request: where notifications and server requests go."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification on this request's response stream."""

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a server→client request on this stream and await the reply (legacy era only)."""

    async def publish(self, method: str, params: dict[str, Any]) -> None:
        """Broadcast a server-wide notification (list changed, resource updated) to every
        stream that listens for it, in any process."""

    async def close_stream(self) -> None:
        """End the response stream now; the rest is kept for a resume (legacy only)."""

    async def watch_task(self, task_id: str) -> None:
        """Start hearing the task's changes (its channel-layer group, any process)."""

    async def wait_for_task(self, task_id: str, timeout: float) -> dict[str, Any] | None:
        """Return once the task changed since it was first watched or the last wait returned (at
        once if it has), or after ``timeout`` seconds: the task's fields when the change carried
        them (:func:`~mcp_tasks.tasks.state.service.with_fields`), else None."""


class SessionHandle(Protocol):
    """A legacy session's stored state, as the protocol layer reads and changes it."""

    id: str
    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any]
    log_level: str | None

    async def set_log_level(self, level: str) -> None: ...

    async def subscribe(self, uri: str) -> None: ...

    async def unsubscribe(self, uri: str) -> None: ...


@dataclass
class RequestInfo:
    """One request: its era, caller, declared client capabilities and headers."""

    era: Era
    protocol_version: str
    principal: Principal
    request_id: str | int | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    progress_token: str | int | None = None
    headers: Mapping[str, str | list[str]] = field(default_factory=dict)
    session: SessionHandle | None = None
    lifespan_context: Any = None

    @property
    def modern(self) -> bool:
        return self.era == "modern"

    def declares_extension(self, extension: str) -> bool:
        """True when the client declared ``extension`` in its capabilities' extensions."""
        extensions = self.client_capabilities.get("extensions")
        return isinstance(extensions, dict) and extension in extensions

    @property
    def session_id(self) -> str | None:
        return self.session.id if self.session is not None else None

    def caller(self) -> Caller:
        """What a task started by this request keeps of its caller: the headers
        ``SNAPSHOT_HEADERS`` names, the access token as a record."""
        keep = {name.lower() for name in get_config().SNAPSHOT_HEADERS}
        token = self.principal.access_token
        return Caller(
            era=self.era,
            protocol_version=self.protocol_version,
            principal_scope=self.principal.scope,
            client_info=self.client_info,
            client_capabilities=self.client_capabilities,
            log_level=self.log_level,
            access_token=token.to_record() if token is not None else None,
            headers={
                name: value
                for name, value in self.headers.items()
                if name in keep and isinstance(value, str)
            },
        )

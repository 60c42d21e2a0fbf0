"""What the protocol layer hands the task engine, and the errors it gets back (both import
this module, neither the other)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class TaskNotFound(Exception):  # noqa: N818 - reads like Django's DoesNotExist
    """No such task for this principal (unknown, expired, or someone else's)."""


class InvalidAnswer(ValueError):  # noqa: N818
    """An answer that does not fit the question (the message says why)."""


class QuotaExceeded(Exception):  # noqa: N818
    """A new task would take its caller past a limit of active tasks; nothing was written.
    ``setting``: the limit's name (``MAX_ACTIVE_TASKS``), ``limit``: its value."""

    def __init__(self, setting: str, limit: int, whose: str) -> None:
        super().__init__(f"{whose} already has {limit} active tasks ({setting} = {limit})")
        self.setting = setting
        self.limit = limit


@dataclass(frozen=True)
class Caller:
    """Who a task runs for, as its creating request said, kept in the task's snapshot for
    its jobs and retries. ``access_token`` and ``headers`` (``SNAPSHOT_HEADERS``) are
    sealed at rest."""

    era: str
    protocol_version: str
    principal_scope: str
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    access_token: dict[str, Any] | None = None  # AccessToken.to_record()
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def client_id(self) -> str:
        """The OAuth client the caller signed in with ("" when none)."""
        return str((self.access_token or {}).get("client_id") or "")


@dataclass(frozen=True)
class NewTask:
    """Everything recorded when a task is created."""

    tool_name: str
    arguments: dict[str, Any]
    caller: Caller
    progress_token: str | int | None = None
    session_id: str | None = None
    origin_request_id: str | int | None = None
    prepared: Any = None
    queue: str | None = None
    ttl: float | None = None
    poll_interval: float | None = None
    timeout: int | None = None
    retry_of: str | None = None

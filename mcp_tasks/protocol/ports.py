"""What the protocol layer needs from the task engine (:class:`mcp_tasks.tasks.engine.Engine`
fits it); tasks come back as read-only :class:`TaskView`s."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from ..core.task_contract import NewTask


class TaskView(Protocol):
    """A task as the wire shows it."""

    @property
    def id(self) -> str: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def status_message(self) -> str: ...
    @property
    def progress(self) -> float | None: ...
    @property
    def progress_total(self) -> float | None: ...
    @property
    def waiting_for(self) -> str:
        """Why a ``working`` task waits: ``"staff"`` (an approval or a staff question),
        ``"limit"``, ``"retry"``, or ``""``."""

    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def ttl_ms(self) -> int | None: ...
    @property
    def poll_interval_ms(self) -> int | None: ...
    @property
    def result(self) -> Any: ...
    @property
    def error(self) -> Any: ...
    @property
    def is_terminal(self) -> bool: ...


class QuestionView(Protocol):
    """One of a task's waiting questions (an input request)."""

    @property
    def key(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def params(self) -> Any: ...


class TaskEngine(Protocol):
    """Tasks for the wire handlers, scoped to a principal: a task that is unknown, expired
    or someone else's raises :class:`~mcp_tasks.core.task_contract.TaskNotFound`."""

    async def create(self, new: NewTask) -> TaskView:
        """Record the task and queue its first job; raises ``RuntimeError`` if it cannot."""

    async def get(self, task_id: str, principal_scope: str) -> TaskView: ...

    def with_fields(self, task: TaskView, fields: dict[str, Any]) -> TaskView:
        """``task`` as the change that carried ``fields`` left it (an ended task's, or an
        asking one's with its questions)."""

    async def questions(self, task: TaskView) -> Sequence[QuestionView]:
        """The task's questions that wait for an answer."""

    async def waiting_questions(self, task_id: str, principal_scope: str) -> Sequence[QuestionView]:
        """The questions of the principal's task that wait ([] when it is not theirs)."""

    async def answer(
        self, task_id: str, key: str, response: Any, principal_scope: str, *, strict: bool
    ) -> bool:
        """The one answer path: False when the question no longer waits (the first answer
        wins). ``strict``: a task that is not found raises. Raises
        :class:`~mcp_tasks.core.task_contract.InvalidAnswer` when it does not fit."""

    async def cancel(self, task_id: str, principal_scope: str) -> TaskView: ...

    async def page(self, principal_scope: str, offset: int, limit: int) -> Sequence[TaskView]:
        """The principal's tasks, newest first."""

    async def unfinished(self, principal_scope: str, limit: int) -> Sequence[TaskView]:
        """The principal's tasks that have not ended, newest first."""

    async def owned(self, task_ids: list[str], principal_scope: str) -> list[str]:
        """The ids among ``task_ids`` that name the principal's tasks."""

    async def of_session(self, task_id: str, session_id: str) -> TaskView | None:
        """The task when a legacy session created it."""

    async def claim_relay(self, task_id: str, key: str) -> bool:
        """Claim the question for one stream to send (False: another stream has it)."""

    async def release_relay(self, task_id: str, key: str) -> None: ...

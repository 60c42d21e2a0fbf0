"""The task engine for the wire handlers (:class:`mcp_tasks.protocol.ports.TaskEngine`):
async methods over :mod:`.service`, handed to the protocol layer by :mod:`mcp_tasks.asgi`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.db import db
from ..core.task_contract import NewTask
from ..models import ACTIVE_STATUSES, InputRequest, Task
from .state import service
from .state.loop_database import LoopDatabase
from .state.rows import WaitingQuestion


def _row(task: object) -> Task:
    """A task the protocol layer hands back: one of this engine's rows."""
    assert isinstance(task, Task)
    return task


def _waiting_questions(task_id: str, principal_scope: str) -> list[InputRequest]:
    task = service.find_task(task_id)  # by primary key; the owner is checked here
    if task is None or task.principal_scope != principal_scope:
        return []
    return service.outstanding_requests(task)


def _page(principal_scope: str, offset: int, limit: int) -> list[Task]:
    return list(service.list_tasks(principal_scope)[offset : offset + limit])


def _unfinished(principal_scope: str, limit: int) -> list[Task]:
    return list(service.list_tasks(principal_scope).filter(status__in=ACTIVE_STATUSES)[:limit])


def _of_session(task_id: str, session_id: str) -> Task | None:
    task = service.find_task(task_id)
    return task if task is not None and task.session_id == session_id else None


class Engine:
    """Tasks, scoped to the principal that created them."""

    async def create(self, new: NewTask) -> Task:
        return await service.acreate_task(new)

    async def get(self, task_id: str, principal_scope: str) -> Task:
        return await service.aget_task(task_id, principal_scope)

    def with_fields(self, task: object, fields: dict[str, Any]) -> Task:
        return service.with_fields(_row(task), fields)

    async def questions(self, task: object) -> Sequence[InputRequest | WaitingQuestion]:
        task = _row(task)
        if task.carried_questions is not None:  # the change it came with carried them
            return task.carried_questions
        return await service.aoutstanding_requests(task)

    async def waiting_questions(self, task_id: str, principal_scope: str) -> list[InputRequest]:
        return await db(_waiting_questions)(task_id, principal_scope)

    async def answer(
        self, task_id: str, key: str, response: Any, principal_scope: str, *, strict: bool
    ) -> bool:
        database = LoopDatabase.of_running_loop()
        if database is not None:
            return await service.aanswer(
                database, task_id, key, response, principal_scope, not_found_raises=strict
            )
        return await db(service.answer)(
            task_id,
            key,
            response,
            principal_scope=principal_scope,
            answered_by="client",
            not_found_raises=strict,
        )

    async def cancel(self, task_id: str, principal_scope: str) -> Task:
        return await db(service.cancel)(task_id, principal_scope)

    async def page(self, principal_scope: str, offset: int, limit: int) -> list[Task]:
        return await db(_page)(principal_scope, offset, limit)

    async def unfinished(self, principal_scope: str, limit: int) -> list[Task]:
        return await db(_unfinished)(principal_scope, limit)

    async def owned(self, task_ids: list[str], principal_scope: str) -> list[str]:
        return await service.aowned_task_ids(task_ids, principal_scope)

    async def of_session(self, task_id: str, session_id: str) -> Task | None:
        return await db(_of_session)(task_id, session_id)

    async def claim_relay(self, task_id: str, key: str) -> bool:
        return await db(service.claim_relay)(task_id, key)

    async def release_relay(self, task_id: str, key: str) -> None:
        await db(service.release_relay)(task_id, key)

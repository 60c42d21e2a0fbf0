"""The common case of questions in one statement from the event loop (PostgreSQL,
:mod:`.loop_database`): :func:`aask_all`, a new round of client questions; :func:`aanswer`,
the answer to the one question a held task waits for.

Anything else (a replay, staff questions, a reused key, a task changed since read) goes the
ORM's way (:mod:`.questions`): each statement's conditions make it write nothing then."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.utils import timezone

from ... import jsontext, signals
from ...core.background import in_background
from ...core.db import db
from ...core.task_contract import TaskNotFound
from ...models import Audience, InputRequest, InputRequestStatus, Task, TaskStatus, WaitingFor
from . import outbox
from .changes import asked_fields, expired, status_changed
from .loop_database import LoopDatabase
from .questions import (
    Asked,
    answer,
    ask_all,
    new_question,
    question_text,
    suffixed_key,
    tell_answered,
    tell_asked,
    validate_answer,
)
from .rows import TASK_COLUMNS, Columns, column_of, inserted, owned, update_params, update_sql

logger = logging.getLogger("mcp_tasks.tasks")

_QUESTION = Columns(InputRequest, "q")
#: The columns a new question's INSERT names (the database numbers its id).
_NEW_FIELDS = [field for field in InputRequest._meta.concrete_fields if not field.primary_key]


def _told_anyone() -> bool:
    """Whether a change has receivers beyond the task's watchers (signals, a live admin)."""
    return (
        outbox.may_announce()
        or signals.listened(signals.task_status_changed)
        or signals.listened(signals.question_asked)
        or signals.listened(signals.question_answered)
    )


@functools.lru_cache(maxsize=16)
def _ask_sql(alias: str, count: int) -> str:
    """Task to ``input_required`` plus ``count`` questions, only if it is working and has
    no question from the first number on nor with their keys (else nothing changes)."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    table = quote(InputRequest._meta.db_table)

    def column(name: str) -> str:
        return f"{quote('p')}.{quote(column_of(InputRequest, name))}"

    keys = ", ".join(["%s"] * count)
    update = update_sql(
        alias, ("status", "status_message", "waiting_worker", "updated_at"), ("id", "status")
    )
    guard = (
        f"NOT EXISTS (SELECT 1 FROM {table} {quote('p')} WHERE {column('task')} = %s "
        f"AND ({column('sequence')} >= %s OR {column('key')} IN ({keys})))"
    )
    typed = ", ".join(f"%s::{field.db_type(connection)}" for field in _NEW_FIELDS)
    values = ", ".join([f"({typed})"] * count)
    columns = ", ".join(quote(str(field.column)) for field in _NEW_FIELDS)
    pk = quote(str(InputRequest._meta.pk.column))
    sequence = quote(column_of(InputRequest, "sequence"))
    return (
        f"WITH {quote('t')} AS ({update} AND {guard} RETURNING 1), "
        f"{quote('n')} AS (INSERT INTO {table} ({columns}) SELECT {quote('v')}.* "
        f"FROM {quote('t')}, (VALUES {values}) {quote('v')} RETURNING {pk}, {sequence}) "
        f"SELECT array_agg({pk} ORDER BY {sequence}) FROM {quote('n')}"
    )


def _new_questions(
    task_id: str, first_sequence: int, questions: Sequence[Asked]
) -> list[InputRequest] | None:
    """The round's rows as :func:`~.questions.ask_all` writes them; None for the ORM's way."""
    if any(len(question) > 3 and question[3] is not None for question in questions):
        return None
    now = timezone.now()
    new: list[InputRequest] = []
    for offset, (method, params, key, *_) in enumerate(questions):
        params, key = jsontext.storable((params, key), f"a question of task {task_id}")
        sequence = first_sequence + offset
        key = key if key is not None else suffixed_key(method, sequence)
        new.append(new_question(task_id, sequence, method, params, key, now))
    return new if len({request.key for request in new}) == len(new) else None


async def aask_all(
    database: LoopDatabase,
    task_id: str,
    first_sequence: int,
    questions: Sequence[Asked],
    worker_name: str,
) -> tuple[list[InputRequest], dict[str, Any] | None]:
    """:func:`~.questions.ask_all` from the worker's loop, in one statement when it can; with
    the rows, the wake-up's fields (:func:`~.changes.asked_fields`, None: read back)."""
    new = _new_questions(task_id, first_sequence, questions)
    if new is None:
        return await db(ask_all)(task_id, first_sequence, questions, worker_name), None
    connection = database.wrapper
    status_message = question_text(new[-1].method, new[-1].params)
    updated_at = timezone.now()
    changes = {
        "status": TaskStatus.INPUT_REQUIRED,
        "status_message": status_message,
        "waiting_worker": worker_name[:255],
        "updated_at": updated_at,
    }
    params = update_params(connection, task_id, {"status": TaskStatus.WORKING}, changes)
    params += [task_id, first_sequence, *(request.key for request in new)]
    for request in new:
        params += [
            field.get_db_prep_save(field.pre_save(request, True), connection)
            for field in _NEW_FIELDS
        ]
    _, (ids,) = await database.fetch_one(_ask_sql(database.alias, len(new)), params)
    if not ids:  # replayed, a key used before, or the task is not working
        return await db(ask_all)(task_id, first_sequence, questions, worker_name), None
    for request, pk in zip(new, ids, strict=True):
        request.pk = pk
    inserted(database.alias, *new)
    if _told_anyone():
        await db(tell_asked)(task_id, TaskStatus.WORKING, new)
    return new, asked_fields(status_message, updated_at, new)


@functools.lru_cache(maxsize=8)
def _question_sql(alias: str) -> str:
    """The task, its question with a key, and how many of its questions wait."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    tasks = quote(Task._meta.db_table)
    questions = quote(InputRequest._meta.db_table)
    task_id = f"{quote('t')}.{quote(column_of(Task, 'id'))}"

    def column(alias: str, name: str) -> str:
        return f"{quote(alias)}.{quote(column_of(InputRequest, name))}"

    return (
        f"SELECT {TASK_COLUMNS.sql(connection)}, {_QUESTION.sql(connection)}, "
        f"(SELECT COUNT(*) FROM {questions} {quote('p')} WHERE {column('p', 'task')} = {task_id} "
        f"AND {column('p', 'status')} = %s) "
        f"FROM {tasks} {quote('t')} LEFT JOIN {questions} {quote('q')} "
        f"ON {column('q', 'task')} = {task_id} AND {column('q', 'key')} = %s "
        f"WHERE {task_id} = %s"
    )


@functools.lru_cache(maxsize=8)
def _answer_sql(alias: str) -> str:
    """Task back to working plus the answer, both or neither: only if the question waits
    and the task's ``updated_at`` (moved by every change of its questions) is as read."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    questions = quote(InputRequest._meta.db_table)
    pk = quote(str(InputRequest._meta.pk.column))

    def column(name: str) -> str:
        return quote(column_of(InputRequest, name))

    waits = f"{pk} = %s AND {column('status')} = %s"
    resume = update_sql(
        alias,
        ("status", "status_message", "waiting_for", "updated_at"),
        ("id", "status", "updated_at"),
    )
    worker = quote(column_of(Task, "worker_name"))
    record = (
        f"UPDATE {questions} SET {column('response')} = %s, {column('status')} = %s, "
        f"{column('answered_by')} = %s, {column('answered_at')} = %s "
        f"WHERE {waits} AND EXISTS (SELECT 1 FROM {quote('r')})"
    )
    return (
        f"WITH {quote('r')} AS ({resume} AND EXISTS (SELECT 1 FROM {questions} WHERE {waits}) "
        f"RETURNING {worker}), {quote('a')} AS ({record} RETURNING 1) "
        f"SELECT (SELECT {worker} FROM {quote('r')}), (SELECT COUNT(*) FROM {quote('a')})"
    )


async def aanswer(
    database: LoopDatabase,
    task_id: str,
    key: str,
    response: Any,
    principal_scope: str,
    *,
    not_found_raises: bool = False,
) -> bool:
    """A client's :func:`~.questions.answer` from the event loop: one read and one statement
    when a held task waits for this question alone, else the ORM's way."""
    connection = database.wrapper
    params = [InputRequestStatus.PENDING.value, key, task_id]
    _, row = await database.fetch_one(_question_sql(database.alias), params)
    width = len(TASK_COLUMNS.fields)
    task = None if row is None else owned(row[:width], connection, principal_scope)
    if not_found_raises and (task is None or expired(task)):
        raise TaskNotFound(task_id)
    if task is None or task.is_terminal:
        return False
    if row[width] is None:  # no question with this key
        return False
    request: InputRequest = _QUESTION.build(row[width : width + len(_QUESTION.fields)], connection)
    if request.status != InputRequestStatus.PENDING or request.audience != Audience.CLIENT:
        return False  # answered already, or a staff question the client never saw
    the_orm_way = functools.partial(
        db(answer),
        task_id,
        key,
        response,
        principal_scope=principal_scope,
        answered_by="client",
        not_found_raises=not_found_raises,
    )
    waiting = row[-1]
    if waiting != 1 or task.status != TaskStatus.INPUT_REQUIRED or not task.waiting_worker:
        return await the_orm_way()
    request.response = validate_answer(request, response)
    request.status = InputRequestStatus.ANSWERED
    request.answered_by = "client"
    request.answered_at = now = timezone.now()
    params = update_params(
        connection,
        task_id,
        {"status": TaskStatus.INPUT_REQUIRED, "updated_at": task.updated_at},
        {
            "status": TaskStatus.WORKING,
            "status_message": "Answered",
            "waiting_for": WaitingFor.NOTHING,
            "updated_at": now,
        },
    )
    waits: list[Any] = [request.pk, InputRequestStatus.PENDING.value]
    fields = InputRequest._meta
    params += waits + [
        fields.get_field(name).get_db_prep_save(getattr(request, name), connection)  # type: ignore[union-attr]
        for name in ("response", "status", "answered_by", "answered_at")
    ]
    _, (worker, recorded) = await database.fetch_one(_answer_sql(database.alias), params + waits)
    if not recorded:
        # Changed since read (or sent twice over a broken connection): the ORM's way.
        return await the_orm_way()
    session_id = task.session_id if task.era == "legacy" else None
    in_background(
        outbox.apublish_task_change(
            task_id, TaskStatus.WORKING, session_id, worker or None, {key: request.response}
        ),
        logger,
        "could not publish the change of task %s",
        task_id,
    )
    if _told_anyone():
        await db(_tell_answered)(task_id, request)
    return True


def _tell_answered(task_id: str, request: InputRequest) -> None:
    """What :func:`~.questions.answer` tells others, for :func:`aanswer`'s answer."""
    status_changed(task_id, TaskStatus.INPUT_REQUIRED, TaskStatus.WORKING)
    tell_answered(request)

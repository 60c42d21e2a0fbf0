"""A question asked, and a client's answer recorded, in one statement each from the event
loop (PostgreSQL, :mod:`.loop_database`), for the common case:

- :func:`aask_all`: a round of client questions asked for the first time by the worker
  running its task;
- :func:`aanswer`: a client's answer to the one question its task waits for, while the
  worker holds the task (its hold window).

Everything else — a replay after a resume, staff questions, a key used before, several
questions waiting, a task that changed between the read and the write — goes the ORM's way
(:mod:`.questions`), under the task's row lock. The conditions in each statement make the
two ways agree: a statement that finds anything unusual writes nothing, and the ORM's way
then does it all."""

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


# -- asking ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _ask_sql(alias: str, count: int) -> str:
    """The task moves to ``input_required`` and its ``count`` questions go in, only when it
    is working and has no question numbered from the first of these on and none with
    their keys (a replay, a key used before: then nothing changes)."""
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
    """The round's rows as :func:`~.questions.ask_all` would write them; None when it
    needs the ORM's way (a staff question, a key repeated within the round)."""
    if any(len(question) > 3 and question[3] is not None for question in questions):
        return None
    now = timezone.now()
    new: list[InputRequest] = []
    for offset, (method, params, key, *_) in enumerate(questions):
        params, key = jsontext.storable((params, key), f"a question of task {task_id}")
        sequence = first_sequence + offset
        key = key if key is not None else suffixed_key(method, sequence)
        new.append(new_question(task_id, sequence, method, params, key, now))
    if len({request.key for request in new}) < len(new):
        return None
    return new


async def aask_all(
    database: LoopDatabase,
    task_id: str,
    first_sequence: int,
    questions: Sequence[Asked],
    worker_name: str,
) -> tuple[list[InputRequest], dict[str, Any] | None]:
    """:func:`~.questions.ask_all` from the worker's event loop: one statement when the
    round is new and for the client, else the ORM's way. With the rows, the task's fields
    for the wake-up that announces them (:func:`~.changes.asked_fields`; None: the waiting
    requests read them back)."""
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
        await db(_tell_asked)(task_id, new)
    return new, asked_fields(status_message, updated_at, new)


def _tell_asked(task_id: str, new: list[InputRequest]) -> None:
    """What :func:`~.questions.ask_all` tells others, for a round :func:`aask_all` wrote."""
    status_changed(task_id, TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED)
    outbox.announce(task_id, "question_asked")
    for request in new:
        outbox.signal(signals.question_asked, task_id=task_id, question=request)


# -- answering ------------------------------------------------------------------------------


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
    """The task goes back to working and the answer goes in, both or neither: only if the
    task is as it was read (its ``updated_at``: every change of its questions moves it,
    and the row lock orders this statement after any under way) and the question waits."""
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
    """A client's answer (:func:`~.questions.answer` with ``answered_by="client"``), from
    the event loop: one read and one statement when its task waits for this question alone
    and its worker holds it; else the ORM's way."""
    connection = database.wrapper
    params = [InputRequestStatus.PENDING.value, key, task_id]
    _, row = await database.fetch_one(_question_sql(database.alias), params)
    width = len(TASK_COLUMNS.fields)
    task = None if row is None else owned(row[:width], connection, principal_scope)
    if not_found_raises and (task is None or expired(task)):
        raise TaskNotFound(task_id)
    if task is None or task.is_terminal:
        return False
    assert row is not None
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
        # The task changed since it was read (another question or answer, its worker
        # letting it go), or this was sent twice over a broken connection: the ORM's way.
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
    """What :func:`~.questions.answer` tells others, for an answer :func:`aanswer` wrote
    that resumed its task."""
    status_changed(task_id, TaskStatus.INPUT_REQUIRED, TaskStatus.WORKING)
    outbox.announce(task_id, "question_answered")
    outbox.signal(
        signals.question_answered,
        task_id=task_id,
        question=request,
        answered_by=request.answered_by,
        user=None,
    )

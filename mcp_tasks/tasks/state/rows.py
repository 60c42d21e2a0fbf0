"""The hot path's statements as SQL built once from the models' metadata.

The ORM compiles each query anew, costing more CPU than a primary-key lookup (README,
"Performance"). A new task, a task by id, a task with its snapshot and conditional updates
of a task row are built once per database and column set; values and rows go through the
fields' and backend's own preparation and converters, as with a queryset."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import Field, Model

from ...models import (
    ACTIVE_STATUSES,
    Audience,
    InputRequest,
    InputRequestStatus,
    Task,
    TaskSnapshot,
)
from .loop_database import LoopDatabase

Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]


class Columns:
    """One model's concrete columns in a SELECT: their SQL and how to read them back."""

    def __init__(self, model: type[Model], alias: str) -> None:
        self.model = model
        self.alias = alias
        self.fields: list[Field[Any, Any]] = list(model._meta.concrete_fields)
        self.attnames = [field.attname for field in self.fields]

    def sql(self, connection: BaseDatabaseWrapper) -> str:
        quote = connection.ops.quote_name
        return ", ".join(f"{quote(self.alias)}.{quote(str(field.column))}" for field in self.fields)

    def build(self, values: Sequence[Any], connection: BaseDatabaseWrapper) -> Any:
        row = list(values)
        for index, column, chain in _converters(self, connection.alias):
            value = row[index]
            for convert in chain:
                value = convert(value, column, connection)
            row[index] = value
        return self.model.from_db(connection.alias, self.attnames, row)


@functools.lru_cache(maxsize=32)
def _converters(columns: Columns, alias: str) -> list[tuple[int, Any, list[Converter]]]:
    """``(index, column expression, converters)`` of the columns that need converting."""
    connection = connections[alias]
    found: list[tuple[int, Any, list[Converter]]] = []
    for index, field in enumerate(columns.fields):
        column = field.get_col(columns.alias)
        chain = [*connection.ops.get_db_converters(column), *field.get_db_converters(connection)]
        if chain:
            found.append((index, column, chain))
    return found


def column_of(model: type[Model], name: str) -> str:
    return str(model._meta.get_field(name).column)  # type: ignore[union-attr]


def _cursor(connection: BaseDatabaseWrapper) -> CursorWrapper:
    """A Django-wrapped cursor (query logging, ``execute_wrapper``); on PostgreSQL psycopg
    3's ``Cursor``, binding parameters on the server (Django's bind on the client)."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    import psycopg

    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    if connection.queries_logged:
        return connection.make_debug_cursor(raw)  # type: ignore[arg-type]
    return connection.make_cursor(raw)  # type: ignore[arg-type]


def _fetch_one(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any]) -> Any:
    """The first row of one statement (None: no row)."""
    with _cursor(connection) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


TASK_COLUMNS = Columns(Task, "t")
_SNAPSHOT = Columns(TaskSnapshot, "s")


def _join_snapshot(connection: BaseDatabaseWrapper, tasks: str) -> str:
    """SELECT task and snapshot columns FROM ``tasks`` (aliased ``t``) joined to its snapshot."""
    quote = connection.ops.quote_name
    columns = f"{TASK_COLUMNS.sql(connection)}, {_SNAPSHOT.sql(connection)}"
    snapshots = f"{quote(TaskSnapshot._meta.db_table)} {quote('s')}"
    snapshot_of = f"{quote('s')}.{quote(column_of(TaskSnapshot, 'task'))}"
    task_id = f"{quote('t')}.{quote(column_of(Task, 'id'))}"
    return f"SELECT {columns} FROM {tasks} INNER JOIN {snapshots} ON {snapshot_of} = {task_id}"


@functools.lru_cache(maxsize=8)
def _task_with_snapshot_sql(alias: str) -> str:
    connection = connections[alias]
    quote = connection.ops.quote_name
    tasks = f"{quote(Task._meta.db_table)} {quote('t')}"
    return (
        f"{_join_snapshot(connection, tasks)} "
        f"WHERE {quote('t')}.{quote(column_of(Task, 'id'))} = %s"
    )


@functools.lru_cache(maxsize=8)
def _task_sql(alias: str, locked: bool) -> str:
    """One task by primary key. The owner is checked on the row, not in SQL: a filter on
    ``principal_scope`` can make the planner scan that principal's index instead."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    sql = (
        f"SELECT {TASK_COLUMNS.sql(connection)} FROM {quote(Task._meta.db_table)} {quote('t')} "
        f"WHERE {quote('t')}.{quote(column_of(Task, 'id'))} = %s"
    )
    if locked and connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    return sql


def owned(row: Any, connection: Any, principal_scope: str | None) -> Task | None:
    if row is None:
        return None
    task: Task = TASK_COLUMNS.build(row, connection)
    if principal_scope is not None and task.principal_scope != principal_scope:
        return None
    return task


def locked_task(
    task_id: str, principal_scope: str | None = None, using: str = "default"
) -> Task | None:
    """The task, row locked for the transaction (``principal_scope``: if it owns it)."""
    connection = connections[using]
    row = _fetch_one(connection, _task_sql(using, True), [task_id])
    return owned(row, connection, principal_scope)


def task_of(task_id: str, principal_scope: str, using: str = "default") -> Task | None:
    """The task ``task_id`` if ``principal_scope`` owns it (expired ones included)."""
    connection = connections[using]
    row = _fetch_one(connection, _task_sql(using, False), [task_id])
    return owned(row, connection, principal_scope)


async def atask_of(database: LoopDatabase, task_id: str, principal_scope: str) -> Task | None:
    """:func:`task_of`, sent from the event loop."""
    _, row = await database.fetch_one(_task_sql(database.alias, False), [task_id])
    return owned(row, database.wrapper, principal_scope)


@dataclass(frozen=True)
class WaitingQuestion:
    """A client's question that waits for an answer, as the wire shows it."""

    key: str
    method: str
    params: Any


@functools.lru_cache(maxsize=8)
def _waiting_questions_sql(alias: str) -> str:
    """A task's pending client questions in order, as one JSON array of triples."""
    quote = connections[alias].ops.quote_name

    def column(name: str) -> str:
        return f"{quote('q')}.{quote(column_of(InputRequest, name))}"

    triple = f"json_build_array({column('key')}, {column('method')}, {column('params')})"
    return (
        f"SELECT coalesce(json_agg({triple} ORDER BY {column('sequence')}), '[]') "
        f"FROM {quote(InputRequest._meta.db_table)} {quote('q')} "
        f"WHERE {column('task')} = %s AND {column('status')} = %s AND {column('audience')} = %s"
    )


async def awaiting_questions(database: LoopDatabase, task_id: str) -> list[WaitingQuestion]:
    """:func:`~mcp_tasks.tasks.state.questions.outstanding_requests`, from the event loop."""
    params = [task_id, InputRequestStatus.PENDING.value, Audience.CLIENT.value]
    _, (found,) = await database.fetch_one(_waiting_questions_sql(database.alias), params)
    triples = json.loads(found) if isinstance(found, str | bytes) else found
    return [WaitingQuestion(key, method, params) for key, method, params in triples]


def task_with_snapshot(task_id: str, using: str = "default") -> Task | None:
    """The task with its snapshot loaded (``task.snapshot`` costs no query)."""
    connection = connections[using]
    row = _fetch_one(connection, _task_with_snapshot_sql(using), [task_id])
    return None if row is None else _with_snapshot(row, connection)


def _with_snapshot(row: Sequence[Any], connection: BaseDatabaseWrapper) -> Task:
    width = len(TASK_COLUMNS.fields)
    task: Task = TASK_COLUMNS.build(row[:width], connection)
    task.snapshot = _SNAPSHOT.build(row[width:], connection)
    return task


#: A condition ``<field>__null_or``: the field is NULL or has the value given.
NULL_OR = "__null_or"


def _condition(quote: Callable[[str], str], name: str) -> str:
    column = quote(column_of(Task, name.removesuffix(NULL_OR)))
    if name.endswith(NULL_OR):
        return f"({column} IS NULL OR {column} = %s)"
    return f"{column} = %s"


@functools.lru_cache(maxsize=64)
def update_sql(alias: str, changed: tuple[str, ...], conditions: tuple[str, ...]) -> str:
    quote = connections[alias].ops.quote_name
    assignments = ", ".join(f"{quote(column_of(Task, name))} = %s" for name in changed)
    where = " AND ".join(_condition(quote, name) for name in conditions)
    return f"UPDATE {quote(Task._meta.db_table)} SET {assignments} WHERE {where}"


def update_task(
    task_id: str, when: dict[str, Any], changes: dict[str, Any], using: str = "default"
) -> bool:
    """Apply ``changes`` to the row if it matches ``when`` (:data:`NULL_OR`); True if changed."""
    connection = connections[using]
    params = update_params(connection, task_id, when, changes)
    with _cursor(connection) as cursor:
        cursor.execute(update_sql(using, tuple(changes), ("id", *when)), params)
        return bool(cursor.rowcount)


def update_params(
    connection: BaseDatabaseWrapper, task_id: str, when: dict[str, Any], changes: dict[str, Any]
) -> list[Any]:
    fields = Task._meta
    return [
        fields.get_field(name).get_db_prep_save(value, connection)  # type: ignore[union-attr]
        for name, value in changes.items()
    ] + [
        fields.get_field(name.removesuffix(NULL_OR)).get_db_prep_value(value, connection)  # type: ignore[union-attr]
        for name, value in {"id": task_id, **when}.items()
    ]


@functools.lru_cache(maxsize=64)
def _claim_sql(alias: str, changed: tuple[str, ...], conditions: tuple[str, ...]) -> str:
    """PostgreSQL: the conditional UPDATE and the read of task and snapshot, in one statement."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    returning = ", ".join(quote(str(field.column)) for field in TASK_COLUMNS.fields)
    return (
        f"WITH {quote('t')} AS ({update_sql(alias, changed, conditions)} "
        f"RETURNING {returning}) {_join_snapshot(connection, quote('t'))}"
    )


def claim_task(
    task_id: str, when: dict[str, Any], changes: dict[str, Any], using: str = "default"
) -> Task | None:
    """:func:`update_task`, then the task and snapshot (None: no match); one query on PostgreSQL."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        if not update_task(task_id, when, changes, using):
            return None
        return task_with_snapshot(task_id, using)
    sql = _claim_sql(using, tuple(changes), ("id", *when))
    row = _fetch_one(connection, sql, update_params(connection, task_id, when, changes))
    return None if row is None else _with_snapshot(row, connection)


async def aupdate_task(
    database: LoopDatabase, task_id: str, when: dict[str, Any], changes: dict[str, Any]
) -> bool:
    """:func:`update_task`, sent from the worker's event loop."""
    params = update_params(database.wrapper, task_id, when, changes)
    count, _ = await database.fetch_one(
        update_sql(database.alias, tuple(changes), ("id", *when)), params
    )
    return bool(count)


async def aclaim_task(
    database: LoopDatabase, task_id: str, when: dict[str, Any], changes: dict[str, Any]
) -> Task | None:
    """:func:`claim_task` (PostgreSQL's one statement), sent from the worker's event loop."""
    sql = _claim_sql(database.alias, tuple(changes), ("id", *when))
    _, row = await database.fetch_one(sql, update_params(database.wrapper, task_id, when, changes))
    return None if row is None else _with_snapshot(row, database.wrapper)


@functools.lru_cache(maxsize=16)
def _insert_sql(alias: str, model: type[Model], typed: bool = False) -> str:
    """INSERT of one row; ``typed``: ``SELECT %s::type, ...`` (typed as VALUES would be) to
    which a WHERE can be added."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    fields = model._meta.concrete_fields
    columns = ", ".join(quote(str(field.column)) for field in fields)
    into = f"INSERT INTO {quote(model._meta.db_table)} ({columns})"
    if typed:
        values = ", ".join(f"%s::{field.db_type(connection)}" for field in fields)
        return f"{into} SELECT {values}"
    return f"{into} VALUES ({', '.join(['%s'] * len(fields))})"


#: Limits on a new task: ``(column, value, limit)``, e.g. ``("principal_scope", "user:7", 1000)``.
Quotas = Sequence[tuple[str, Any, int]]
#: The active statuses as SQL literals (fixed names): a parameter would keep the planner
#: from proving that the partial index of active tasks applies.
_ACTIVE_SQL = ", ".join(f"'{status.value}'" for status in ACTIVE_STATUSES)


def _active_count_sql(connection: BaseDatabaseWrapper, column: str) -> str:
    """Count (up to ``limit``) active tasks with ``column`` = ``value``; partial-indexed."""
    quote = connection.ops.quote_name
    return (
        f"SELECT COUNT(*) FROM (SELECT 1 FROM {quote(Task._meta.db_table)} "
        f"WHERE {quote(column_of(Task, column))} = %s AND {quote(column_of(Task, 'status'))} "
        f"IN ({_ACTIVE_SQL}) LIMIT %s) {quote('active')}"
    )


@functools.lru_cache(maxsize=8)
def _insert_task_sql(alias: str, limited_by: tuple[str, ...] = ()) -> str:
    """PostgreSQL: task and snapshot in one statement; ``limited_by``: only under those quotas."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    if not limited_by:
        return (
            f"WITH {quote('t')} AS ({_insert_sql(alias, Task)} RETURNING 1) "
            f"{_insert_sql(alias, TaskSnapshot)}"
        )
    under = " AND ".join(f"({_active_count_sql(connection, column)}) < %s" for column in limited_by)
    return (
        f"WITH {quote('t')} AS ({_insert_sql(alias, Task, typed=True)} WHERE {under} "
        f"RETURNING 1) {_insert_sql(alias, TaskSnapshot, typed=True)} FROM {quote('t')}"
    )


def _insert_task_statement(
    connection: BaseDatabaseWrapper, task: Task, snapshot: TaskSnapshot, quotas: Quotas
) -> tuple[str, list[Any]]:
    """PostgreSQL's one statement of :func:`insert_task`, and its parameters."""
    limits = [param for _, value, limit in quotas for param in (value, limit, limit)]
    params = _insert_params(task, connection) + limits + _insert_params(snapshot, connection)
    return _insert_task_sql(connection.alias, tuple(column for column, _, _ in quotas)), params


def _under_quotas(quotas: Quotas, using: str) -> bool:
    """Every quota has room for one more task (read in the caller's transaction)."""
    connection = connections[using]
    with _cursor(connection) as cursor:
        for column, value, limit in quotas:
            cursor.execute(_active_count_sql(connection, column), [value, limit])
            if cursor.fetchone()[0] >= limit:
                return False
    return True


def exceeded_quota(quotas: Quotas, using: str = "default") -> tuple[str, Any, int] | None:
    """The first quota that has no room left (None: all have)."""
    return next((quota for quota in quotas if not _under_quotas([quota], using)), None)


def insert_task(
    task: Task, snapshot: TaskSnapshot, using: str = "default", quotas: Quotas = ()
) -> bool:
    """INSERT a task and its snapshot together; False, writing nothing, when a quota is full
    (on PostgreSQL not serialised: concurrent calls may each take the last free place)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        with transaction.atomic(using=using):
            if quotas and not _under_quotas(quotas, using):
                return False
            insert(task, snapshot, using=using)
        return True
    with _cursor(connection) as cursor:
        cursor.execute(*_insert_task_statement(connection, task, snapshot, quotas))
        written = bool(cursor.rowcount > 0)
    if written:
        inserted(using, task, snapshot)
    return written


async def ainsert_task(
    database: LoopDatabase, task: Task, snapshot: TaskSnapshot, quotas: Quotas = ()
) -> bool:
    """:func:`insert_task` (PostgreSQL's one statement), sent from the event loop."""
    import psycopg

    sql, params = _insert_task_statement(database.wrapper, task, snapshot, quotas)
    try:
        count, _ = await database.fetch_one(sql, params)
    except psycopg.errors.UniqueViolation:
        # Resent after a broken connection, the first had committed (the id is random).
        _, row = await database.fetch_one(_task_sql(database.alias, False), [task.id])
        if row is None:
            raise
        count = 1
    if count > 0:
        inserted(database.alias, task, snapshot)
    return count > 0


def inserted(using: str, *instances: Model) -> None:
    """Mark rows written by these statements as saved, as the ORM does after an INSERT."""
    for instance in instances:
        instance._state.adding = False
        instance._state.db = using


def _insert_params(instance: Model, connection: BaseDatabaseWrapper) -> list[Any]:
    return [
        field.get_db_prep_save(field.pre_save(instance, True), connection)
        for field in type(instance)._meta.concrete_fields
    ]


def insert(*instances: Model, using: str = "default") -> None:
    """INSERT new rows whose primary key is already set (no auto fields, no signals)."""
    connection = connections[using]
    with _cursor(connection) as cursor:
        for instance in instances:
            cursor.execute(_insert_sql(using, type(instance)), _insert_params(instance, connection))
            inserted(using, instance)

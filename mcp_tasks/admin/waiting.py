"""The task admin's view of who waits and for what: the Principal and Waiting-for filters,
the attempt and waiting-for columns, and the warning of queues no worker serves (fair
share, quotas, concurrency limits and retries; README "Limits and fairness")."""

from __future__ import annotations

from typing import Any, TypedDict

from django.contrib import admin, messages
from django.db.models import Case, Count, Q, QuerySet, Value, When
from django.http import HttpRequest

from ..authoring.registry import mcp
from ..authoring.retries import DEFAULT_RETRY
from ..models import ACTIVE_STATUSES, Task, TaskStatus, WaitingFor
from ..tasks.state import service

#: Queued, not running: its job has not started, or waits for a limit or a retry.
WAITING = Q(status=TaskStatus.WORKING, heartbeat_at__isnull=True)
#: The most principals the Principal filter lists.
MAX_PRINCIPALS = 20
#: The Waiting-for filter's choices: (label, the tasks it shows).
WAITING_CHOICES: dict[str, tuple[str, Q]] = {
    "any": ("Anything (queued, not running)", WAITING),
    WaitingFor.LIMIT: ("A concurrency slot", WAITING & Q(waiting_for=WaitingFor.LIMIT)),
    WaitingFor.RETRY: ("Its next attempt", WAITING & Q(waiting_for=WaitingFor.RETRY)),
    "worker": ("A worker (queued, not started)", WAITING & Q(waiting_for=WaitingFor.NOTHING)),
}
#: What a waiting task waits for: (the list's short label, the task page's).
WAITING_LABELS: dict[str, tuple[str, str]] = {
    WaitingFor.STAFF: ("staff", "Staff: an approval or a staff question"),
    WaitingFor.LIMIT: ("concurrency slot", "A concurrency slot"),
    WaitingFor.RETRY: ("next attempt", "Its next attempt"),
    WaitingFor.NOTHING: ("worker", "A worker (queued, not started)"),
}


def waiting_labels(task: Task) -> tuple[str, str] | None:
    """What ``task`` waits for, short and long; None while it runs or once it is over
    (``waiting_for`` may outlive the wait)."""
    if task.status == TaskStatus.WORKING and task.waiting_for == WaitingFor.STAFF:
        return WAITING_LABELS[WaitingFor.STAFF]
    if task.status != TaskStatus.WORKING or task.heartbeat_at is not None:
        return None
    return WAITING_LABELS.get(task.waiting_for, WAITING_LABELS[WaitingFor.NOTHING])


def attempts_of(task: Task) -> int | None:
    """How many attempts the task's tool allows: its ``Retry.attempts``, the default
    policy's once a tool without one was retried (``RetryTask``); None when unknown."""
    tool = mcp.tools.get(task.tool_name)
    if tool is None:
        return None
    if tool.task.retries is not None:
        return tool.task.retries.attempts
    return DEFAULT_RETRY.attempts if task.attempt > 1 else None


def render_attempt(task: Task) -> str:
    """The attempt as "2 of 3", or its bare number when the total is unknown."""
    total = attempts_of(task)
    return str(task.attempt) if total is None else f"{task.attempt} of {total}"


class PrincipalCounts(TypedDict):
    """A principal's counts of active tasks, and of those waiting (queued, not running)."""

    principal_scope: str
    active: int
    waiting: int


def principal_counts(first: str | None = None) -> list[PrincipalCounts]:
    """The principals with the most active tasks (``first`` ahead of them when it has
    any), each with its ``active`` and ``waiting`` counts: one aggregate query."""
    counts = (
        Task.objects.filter(status__in=ACTIVE_STATUSES)
        .values("principal_scope")
        .annotate(active=Count("pk"), waiting=Count("pk", filter=WAITING))
    )
    order: list[Any] = ["-active", "principal_scope"]
    if first:
        order.insert(0, Case(When(principal_scope=first, then=Value(0)), default=Value(1)))
    return list(counts.order_by(*order)[:MAX_PRINCIPALS])


def principal_label(principal_scope: str, active: int, waiting: int) -> str:
    return f"{principal_scope} — {active} active, {waiting} waiting"


class WaitingForFilter(admin.SimpleListFilter):
    """Queued tasks, by what they wait for."""

    title = "waiting for"
    parameter_name = "waiting_for"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), label) for value, (label, _) in WAITING_CHOICES.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        choice = WAITING_CHOICES.get(self.value() or "")
        return queryset if choice is None else queryset.filter(choice[1])


class PrincipalFilter(admin.SimpleListFilter):
    """The principals with active tasks, most active first, labelled with their counts;
    choosing one lists all its tasks, ended ones too."""

    title = "principal"
    parameter_name = "principal"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        selected = self.value()
        choices = [
            (row["principal_scope"], principal_label(**row)) for row in principal_counts(selected)
        ]
        if selected and all(value != selected for value, _ in choices):
            choices.append((selected, principal_label(selected, 0, 0)))
        return choices

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        selected = self.value()
        return queryset if selected is None else queryset.filter(principal_scope=selected)


def warn_of_unserved_queues(request: HttpRequest) -> None:
    """Tasks wait to start and no worker is alive for their queue: the list says so."""
    try:
        unserved = service.unserved_queues()
    except Exception:  # Redis unreachable: the tasks' own status messages say more
        return
    for name, reason in unserved.items():
        messages.warning(request, f"Tasks wait in queue {name!r} and do not start: {reason}.")

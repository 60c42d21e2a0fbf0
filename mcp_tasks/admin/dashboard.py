"""The admin's dashboard: how the tasks *created* in the last hour, day or week went, from
the database alone: tasks per bucket by status, p50/p95 of run time and queue wait (on
PostgreSQL ``percentile_cont``; elsewhere the rows around each rank, interpolated the same
way), questions waiting at each bucket's end, and the tools that fail most. Buckets are
aligned in UTC and labelled in the user's time zone."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import (
    Aggregate,
    Case,
    CharField,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    IntegerField,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce, Extract, Floor, Trunc
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from ..models import InputRequest, InputRequestStatus, Task, TaskStatus
from . import charts

UTC = dt.UTC
VIEW_PERMISSION = "mcp_tasks.view_task"
#: The statuses, in the order the charts stack them (ended ones at the bottom).
STATUSES: tuple[str, ...] = (
    TaskStatus.COMPLETED,
    TaskStatus.FAILED,
    TaskStatus.CANCELLED,
    TaskStatus.INPUT_REQUIRED,
    TaskStatus.WORKING,
)
#: The most tools the "fail most" list shows.
TOP_TOOLS = 10
#: Seconds between two refreshes of an open page at most (task events) and at least (the
#: window slides).
REFRESH_AT_MOST_EVERY = 5
REFRESH_AT_LEAST_EVERY = 60


@dataclasses.dataclass(frozen=True)
class Window:
    """``span`` cut into buckets of ``bucket``, grouped by ``trunc`` (a ``Trunc`` kind) and,
    for buckets several units long, ``part // step`` (``part``: the unit below ``trunc``)."""

    key: str
    label: str
    span: dt.timedelta
    bucket: dt.timedelta
    trunc: str
    part: str | None = None
    step: int = 1

    @property
    def buckets(self) -> int:
        return self.span // self.bucket

    @property
    def per(self) -> str:
        """The bucket in words: "minute", "15 minutes", "6 hours"."""
        minutes = int(self.bucket.total_seconds() // 60)
        if minutes == 1:
            return "minute"
        return f"{minutes} minutes" if minutes < 60 else f"{minutes // 60} hours"


WINDOWS: dict[str, Window] = {
    "hour": Window("hour", "Last hour", dt.timedelta(hours=1), dt.timedelta(minutes=1), "minute"),
    "day": Window(
        "day", "Last day", dt.timedelta(days=1), dt.timedelta(minutes=15), "hour", "minute", 15
    ),
    "week": Window(
        "week", "Last week", dt.timedelta(days=7), dt.timedelta(hours=6), "day", "hour", 6
    ),
}
DEFAULT_WINDOW = "hour"
_PART_UNIT = {"minute": dt.timedelta(minutes=1), "hour": dt.timedelta(hours=1)}


@dataclasses.dataclass(frozen=True)
class Bucket:
    start: dt.datetime
    end: dt.datetime
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclasses.dataclass(frozen=True)
class Percentiles:
    """p50 and p95 of ``count`` durations (None without any)."""

    count: int
    p50: dt.timedelta | None
    p95: dt.timedelta | None


@dataclasses.dataclass(frozen=True)
class ToolFailures:
    tool: str
    failed: int
    total: int

    @property
    def percent(self) -> str:
        """The share of failures in percent, for a bar's width (never localized)."""
        share = self.failed / self.total  # a listed tool failed at least once
        return f"{100 * share:.1f}"


@dataclasses.dataclass(frozen=True)
class Figures:
    window: Window
    start: dt.datetime
    end: dt.datetime
    now: dt.datetime
    buckets: list[Bucket]
    run_time: Percentiles
    queue_wait: Percentiles
    not_started: int
    waiting: list[tuple[dt.datetime, int]]
    failing_tools: list[ToolFailures]

    @property
    def totals(self) -> dict[str, int]:
        return {status: sum(b.counts[status] for b in self.buckets) for status in STATUSES}

    @property
    def total(self) -> int:
        return sum(self.totals.values())


def bounds(window: Window, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The window's start and end: it ends with the bucket ``now`` is in (aligned in UTC)."""
    size = int(window.bucket.total_seconds())
    seconds = math.floor(now.timestamp()) // size * size
    end = dt.datetime.fromtimestamp(seconds, UTC) + window.bucket
    return end - window.span, end


def _created_in(start: dt.datetime, end: dt.datetime) -> QuerySet[Task]:
    return Task.objects.filter(created_at__gte=start, created_at__lt=end)


class StrfTime(Func):
    """SQLite's ``strftime(format, value)``: SQLite stores Django's datetimes as UTC text."""

    function = "strftime"
    output_field = CharField()

    def __init__(self, fmt: str, field: str) -> None:
        super().__init__(Value(fmt), F(field))


_SQLITE_TRUNC = {"minute": "%Y-%m-%d %H:%M:00", "hour": "%Y-%m-%d %H:00:00", "day": "%Y-%m-%d"}
_SQLITE_PART = {"minute": "%M", "hour": "%H"}


def _slot(window: Window) -> tuple[Any, Any]:
    """A row's bucket: its truncated time (UTC) and the part (on SQLite its ``strftime``:
    ``Trunc`` and ``Extract`` would call Python for every row)."""
    if connection.vendor == "sqlite":
        slot: Any = StrfTime(_SQLITE_TRUNC[window.trunc], "created_at")
        if window.part is None:
            return slot, Value(0)
        part = Cast(StrfTime(_SQLITE_PART[window.part], "created_at"), IntegerField())
        return slot, part / Value(window.step)
    slot = Trunc("created_at", window.trunc, output_field=DateTimeField(), tzinfo=UTC)
    if window.part is None:
        return slot, Value(0)
    return slot, Floor(Extract("created_at", window.part, tzinfo=UTC) / Value(window.step))


def _utc(slot: dt.datetime | str) -> dt.datetime:
    """A truncated time as an aware UTC datetime (SQLite's ``strftime`` gives text)."""
    if isinstance(slot, str):
        return dt.datetime.fromisoformat(slot).replace(tzinfo=UTC)
    return slot.astimezone(UTC)


def status_buckets(window: Window, start: dt.datetime, end: dt.datetime) -> list[Bucket]:
    """Tasks created in each bucket, counted by status: one grouped query."""
    counts = [dict.fromkeys(STATUSES, 0) for _ in range(window.buckets)]
    slot, part = _slot(window)
    rows = (
        _created_in(start, end)
        .annotate(slot=slot, part=part)
        .values("slot", "part", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    unit = _PART_UNIT.get(window.part or "", dt.timedelta(0))
    for row in rows:
        at = _utc(row["slot"]) + int(row["part"]) * window.step * unit
        index = (at - start) // window.bucket
        if 0 <= index < window.buckets and row["status"] in counts[index]:
            counts[index][row["status"]] += row["n"]
    return [
        Bucket(start + i * window.bucket, start + (i + 1) * window.bucket, counts[i])
        for i in range(window.buckets)
    ]


class PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        super().__init__(
            expression, fraction=f"{float(fraction)!r}", output_field=DurationField(), **extra
        )


def _duration(later: str, earlier: str) -> ExpressionWrapper[Any]:
    return ExpressionWrapper(F(later) - F(earlier), output_field=DurationField())


#: name → (the duration, the rows that have one)
MEASURES: dict[str, tuple[tuple[str, str], Q]] = {
    "run_time": (
        ("finished_at", "started_at"),
        Q(finished_at__isnull=False, started_at__isnull=False),
    ),
    "queue_wait": (("started_at", "created_at"), Q(started_at__isnull=False)),
}
NOT_STARTED = Q(started_at__isnull=True, status=TaskStatus.WORKING)
FRACTIONS = {"p50": 0.5, "p95": 0.95}


def durations(
    start: dt.datetime, end: dt.datetime, *, in_database: bool | None = None
) -> tuple[dict[str, Percentiles], int]:
    """p50/p95 of each of :data:`MEASURES`, and how many tasks have not started yet.
    ``in_database``: use ``percentile_cont`` (PostgreSQL; the default there)."""
    if in_database is None:
        in_database = connection.vendor == "postgresql"
    tasks = _created_in(start, end)
    counts: dict[str, Any] = {
        f"{name}_n": Count("pk", filter=where) for name, (_, where) in MEASURES.items()
    }
    counts["not_started"] = Count("pk", filter=NOT_STARTED)
    if in_database:
        for name, (fields, where) in MEASURES.items():
            for label, fraction in FRACTIONS.items():
                counts[f"{name}_{label}"] = PercentileCont(
                    _duration(*fields), fraction, filter=where
                )
    row = tasks.aggregate(**counts)
    figures = {}
    for name, (fields, where) in MEASURES.items():
        count = row[f"{name}_n"]
        if in_database:
            values = [row[f"{name}_{label}"] for label in FRACTIONS]
        else:
            ordered = tasks.filter(where).order_by(_order_key(*fields))
            values = [
                _percentile(ordered, fields, count, fraction) for fraction in FRACTIONS.values()
            ]
        figures[name] = Percentiles(count, *(v if count else None for v in values))
    return figures, int(row["not_started"])


class JulianDay(Func):
    """SQLite's ``julianday()``: days as a float, computed by SQLite itself."""

    function = "julianday"
    output_field = FloatField()


def _order_key(later: str, earlier: str) -> Any:
    """What orders the durations ``later - earlier``: on SQLite their ``julianday()``
    difference (Django's subtraction calls Python for every row; it may swap durations less
    than ~50 µs apart), elsewhere the interval."""
    if connection.vendor == "sqlite":
        return JulianDay(later) - JulianDay(earlier)
    return _duration(later, earlier)


def _percentile(
    ordered: QuerySet[Any], fields: tuple[str, str], count: int, fraction: float
) -> dt.timedelta | None:
    """``percentile_cont`` of ``count`` sorted durations: two rows around the rank, interpolated."""
    if not count:
        return None
    rank = fraction * (count - 1)
    low = math.floor(rank)
    rows = ordered.values_list(*fields)[low : low + 2]
    values: list[dt.timedelta] = [later - earlier for later, earlier in rows]
    if not values:  # the rows counted are gone (purged meanwhile)
        return None
    if len(values) < 2 or rank == low:
        return values[0]
    return values[0] + (values[1] - values[0]) * (rank - low)


def waiting_questions(
    times: Sequence[dt.datetime], start: dt.datetime
) -> list[tuple[dt.datetime, int]]:
    """How many questions waited at each of ``times``: one query, one count per time."""
    # When a question stopped waiting: answered or timed out, else with its task's end.
    ended = Case(
        When(status=InputRequestStatus.PENDING, then=Value(None)),
        default=Coalesce("answered_at", "task__finished_at"),
        output_field=DateTimeField(),
    )
    questions = InputRequest.objects.annotate(ended=ended).filter(
        Q(status=InputRequestStatus.PENDING) | Q(ended__gt=start), created_at__lte=max(times)
    )
    waiting = {
        f"at_{i}": Count(
            "pk",
            filter=Q(created_at__lte=at) & (Q(status=InputRequestStatus.PENDING) | Q(ended__gt=at)),
        )
        for i, at in enumerate(times)
    }
    row = questions.aggregate(**waiting)
    return [(at, int(row[f"at_{i}"])) for i, at in enumerate(times)]


#: A failure: ``failed``, or ``completed`` with a tool error (``isError``).
FAILING = Q(status=TaskStatus.FAILED) | Q(status=TaskStatus.COMPLETED, result__isError=True)


def failing_tools(start: dt.datetime, end: dt.datetime) -> list[ToolFailures]:
    """The tools with the most failures among the window's tasks: one grouped query."""
    rows = (
        _created_in(start, end)
        .values("tool_name")
        .annotate(failed=Count("pk", filter=FAILING), total=Count("pk"))
        .filter(failed__gt=0)
        .order_by("-failed", "tool_name")[:TOP_TOOLS]
    )
    return [ToolFailures(row["tool_name"], row["failed"], row["total"]) for row in rows]


def figures(window: Window, now: dt.datetime | None = None) -> Figures:
    """Every figure of the dashboard for ``window`` ending at ``now``."""
    now = timezone.now() if now is None else now
    start, end = bounds(window, now)
    buckets = status_buckets(window, start, end)
    measured, not_started = durations(start, end)
    return Figures(
        window=window,
        start=start,
        end=end,
        now=now,
        buckets=buckets,
        run_time=measured["run_time"],
        queue_wait=measured["queue_wait"],
        not_started=not_started,
        waiting=waiting_questions([min(b.end, now) for b in buckets], start),
        failing_tools=failing_tools(start, end),
    )


#: Buckets between two labels of a chart's time axis.
LABEL_EVERY = {"hour": 10, "day": 12, "week": 4}
#: How the time axis labels a bucket's start (the user's time zone).
LABEL_FORMAT = {"hour": "%H:%M", "day": "%H:%M", "week": "%a %H:%M"}


def human_duration(value: dt.timedelta | None) -> str:
    """``value`` for people: "—", "350 ms", "4.2 s", "3 min 5 s", "2 h 10 min"."""
    if value is None:
        return "—"
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _local(at: dt.datetime, fmt: str) -> str:
    return timezone.localtime(at).strftime(fmt)


def _labels(shown: Figures) -> list[str | None]:
    """The time axis: a label every :data:`LABEL_EVERY` buckets, counted from the end."""
    every, fmt = LABEL_EVERY[shown.window.key], LABEL_FORMAT[shown.window.key]
    count = len(shown.buckets)
    return [
        _local(b.start, fmt) if (count - i) % every == 0 else None
        for i, b in enumerate(shown.buckets)
    ]


def status_chart(shown: Figures) -> charts.Chart:
    """Tasks per bucket, stacked by status."""
    labels = dict(TaskStatus.choices)
    titles = []
    for bucket in shown.buckets:
        parts = [f"{bucket.counts[s]} {labels[s].lower()}" for s in STATUSES if bucket.counts[s]]
        span = f"{_local(bucket.start, '%a %H:%M')} to {_local(bucket.end, '%H:%M')}"
        titles.append(f"{span}: {', '.join(parts) or 'no tasks'}")
    stacks = [[(f"mcp-s-{s}", b.counts[s]) for s in STATUSES] for b in shown.buckets]
    return charts.stacked_bars(stacks, titles, _labels(shown))


def waiting_chart(shown: Figures) -> charts.Chart:
    """Questions waiting at the end of each bucket."""
    titles = [f"{_local(at, '%a %H:%M')}: {count} waiting" for at, count in shown.waiting]
    return charts.step_line([count for _, count in shown.waiting], titles, _labels(shown))


def summary(shown: Figures) -> list[dict[str, Any]]:
    """The legend with each status's total."""
    labels = dict(TaskStatus.choices)
    totals = shown.totals
    return [{"status": s, "label": labels[s], "total": totals[s]} for s in STATUSES]


def dashboard_view(
    model_admin: admin.ModelAdmin[Task], request: HttpRequest, extra_context: dict[str, Any]
) -> HttpResponse:
    """The dashboard page (``?window=hour|day|week``); 403 without ``view_task``."""
    if not request.user.has_perm(VIEW_PERMISSION):
        raise PermissionDenied
    window = WINDOWS.get(request.GET.get("window", ""), WINDOWS[DEFAULT_WINDOW])
    shown = figures(window)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Task dashboard",
        "opts": model_admin.opts,
        "figures": shown,
        "summary": summary(shown),
        "status_chart": status_chart(shown),
        "waiting_chart": waiting_chart(shown),
        "waiting_now": shown.waiting[-1][1],
        "run_time": [human_duration(shown.run_time.p50), human_duration(shown.run_time.p95)],
        "queue_wait": [human_duration(shown.queue_wait.p50), human_duration(shown.queue_wait.p95)],
        "windows": list(WINDOWS.values()),
        "refresh_at_most_every": REFRESH_AT_MOST_EVERY,
        "refresh_at_least_every": REFRESH_AT_LEAST_EVERY,
        **extra_context,
    }
    return TemplateResponse(request, "admin/mcp_tasks/task/dashboard.html", context)

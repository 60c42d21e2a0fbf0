"""The admin's task dashboard (``mcp_tasks.admin.dashboard``): its figures from rows with
fixed timestamps (tasks per bucket by status, p50/p95 of run time and queue wait, questions
waiting over time, the tools that fail most), on SQLite and PostgreSQL alike; the page, who
may see it, and how many queries it costs."""

from __future__ import annotations

import datetime as dt
import itertools
import random
import re
import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from mcp_tasks.admin import dashboard
from mcp_tasks.models import InputRequest, InputRequestStatus, Task, TaskStatus

pytestmark = pytest.mark.django_db

UTC = dt.UTC
#: "Now" for the figures: 12:30:20 UTC.
NOW = dt.datetime(2025, 3, 4, 12, 30, 20, tzinfo=UTC)
HOUR, DAY, WEEK = (dashboard.WINDOWS[key] for key in ("hour", "day", "week"))
#: Each window ends with the bucket ``NOW`` is in, and spans its length before that.
BOUNDS = {
    "hour": (
        dt.datetime(2025, 3, 4, 11, 31, tzinfo=UTC),
        dt.datetime(2025, 3, 4, 12, 31, tzinfo=UTC),
    ),
    "day": (
        dt.datetime(2025, 3, 3, 12, 45, tzinfo=UTC),
        dt.datetime(2025, 3, 4, 12, 45, tzinfo=UTC),
    ),
    "week": (dt.datetime(2025, 2, 25, 18, tzinfo=UTC), dt.datetime(2025, 3, 4, 18, tzinfo=UTC)),
}
DASHBOARD = "/admin/mcp_tasks/task/dashboard/"
_ids = itertools.count(1)


def make_task(
    created: dt.datetime,
    status: str = TaskStatus.COMPLETED,
    tool: str = "report",
    *,
    started: dt.datetime | None = None,
    finished: dt.datetime | None = None,
    result: dict[str, Any] | None = None,
) -> Task:
    return Task.objects.create(
        id=f"dash-{next(_ids):06d}",
        principal_scope="anonymous",
        tool_name=tool,
        status=status,
        created_at=created,
        started_at=started,
        finished_at=finished,
        result=result,
    )


def staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="mcp_tasks", codename__in=codenames)
    )
    return user


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(staff("vera", "view_task"))
    return client


# -- tasks per bucket, by status --------------------------------------------------------------

#: Where a task created at a time lands: the start of its bucket, computed without the code's
#: arithmetic (calendar fields of the UTC time).
FLOORS: dict[str, Callable[[dt.datetime], dt.datetime]] = {
    "hour": lambda at: at.replace(second=0, microsecond=0),
    "day": lambda at: at.replace(minute=at.minute - at.minute % 15, second=0, microsecond=0),
    "week": lambda at: at.replace(hour=at.hour - at.hour % 6, minute=0, second=0, microsecond=0),
}


def spread_tasks(count: int) -> list[Task]:
    """``count`` tasks created at random times from eight days before ``NOW`` to an hour
    after it, with random statuses, and one exactly at each window's start and end."""
    chance = random.Random(30)
    times = [NOW - dt.timedelta(seconds=chance.uniform(-3600, 8 * 86400)) for _ in range(count)]
    times += [edge for pair in BOUNDS.values() for edge in pair]
    statuses = list(dashboard.STATUSES)
    return [make_task(at, chance.choice(statuses)) for at in times]


@pytest.mark.parametrize("key", ["hour", "day", "week"])
def test_tasks_are_counted_per_bucket_and_status(key: str) -> None:
    window = dashboard.WINDOWS[key]
    tasks = spread_tasks(400)
    start, end = BOUNDS[key]
    expected = Counter(
        (FLOORS[key](task.created_at), task.status)
        for task in tasks
        if start <= task.created_at < end
    )

    shown = dashboard.figures(window, NOW)

    assert (shown.start, shown.end) == (start, end)
    assert len(shown.buckets) == window.buckets == {"hour": 60, "day": 96, "week": 28}[key]
    assert [b.start for b in shown.buckets] == [
        start + i * window.bucket for i in range(window.buckets)
    ]
    counted = Counter(
        {(b.start, status): n for b in shown.buckets for status, n in b.counts.items() if n}
    )
    assert counted == expected
    assert shown.total == sum(expected.values()) > 0


def test_buckets_are_aligned_in_utc_whatever_the_time_zone() -> None:
    at = dt.datetime(2025, 3, 4, 7, 10, tzinfo=UTC)
    make_task(at, TaskStatus.FAILED)
    with override_settings(TIME_ZONE="Asia/Kolkata"):  # UTC+05:30
        shown = dashboard.figures(WEEK, NOW)
    (bucket,) = [b for b in shown.buckets if b.total]
    assert bucket.start == dt.datetime(2025, 3, 4, 6, tzinfo=UTC)
    assert bucket.counts[TaskStatus.FAILED] == 1


# -- run time and queue wait ------------------------------------------------------------------

IN_DATABASE = [
    pytest.param(False, id="portable"),
    pytest.param(
        True,
        id="percentile_cont",
        marks=pytest.mark.skipif(
            connection.vendor != "postgresql", reason="percentile_cont is PostgreSQL's"
        ),
    ),
]


def expected_percentiles(seconds: list[float]) -> tuple[float, float]:
    """p50 and p95 the way ``percentile_cont`` interpolates (``statistics``' inclusive)."""
    if len(seconds) == 1:
        return seconds[0], seconds[0]
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return cuts[49], cuts[94]


def seconds(value: dt.timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


@pytest.mark.parametrize("in_database", IN_DATABASE)
def test_run_time_and_queue_wait_percentiles(in_database: bool) -> None:
    start, _ = BOUNDS["hour"]
    chance = random.Random(95)
    runs, waits = [], []
    for i in range(37):
        created = start + dt.timedelta(seconds=60 * i + chance.uniform(0, 50))
        wait = round(chance.expovariate(1 / 4), 3)
        began = created + dt.timedelta(seconds=wait)
        waits.append(wait)
        if i % 4 == 3:  # still running: a queue wait, no run time yet
            make_task(created, TaskStatus.WORKING, started=began)
            continue
        run = round(chance.lognormvariate(2, 1), 3)
        runs.append(run)
        make_task(created, started=began, finished=began + dt.timedelta(seconds=run))
    make_task(start + dt.timedelta(minutes=5), TaskStatus.WORKING)  # queued, not started
    never = start + dt.timedelta(minutes=6)
    make_task(never, TaskStatus.CANCELLED, finished=never + dt.timedelta(seconds=9))
    before = start - dt.timedelta(minutes=1)  # outside the window: not measured
    make_task(before, started=before, finished=before + dt.timedelta(hours=5))

    measured, not_started = dashboard.durations(*BOUNDS["hour"], in_database=in_database)

    run_time, queue_wait = measured["run_time"], measured["queue_wait"]
    assert (run_time.count, queue_wait.count, not_started) == (len(runs), len(waits), 1)
    for shown, values in ((run_time, runs), (queue_wait, waits)):
        p50, p95 = expected_percentiles(values)
        assert seconds(shown.p50) == pytest.approx(p50, abs=1e-5)
        assert seconds(shown.p95) == pytest.approx(p95, abs=1e-5)


@pytest.mark.parametrize("in_database", IN_DATABASE)
def test_percentiles_of_one_task_and_of_none(in_database: bool) -> None:
    start, end = BOUNDS["hour"]
    measured, _ = dashboard.durations(start, end, in_database=in_database)
    assert measured["run_time"] == dashboard.Percentiles(0, None, None)

    began = start + dt.timedelta(seconds=12.5)
    make_task(start, started=began, finished=began + dt.timedelta(seconds=3.25))
    measured, _ = dashboard.durations(start, end, in_database=in_database)
    assert seconds(measured["run_time"].p50) == seconds(measured["run_time"].p95) == 3.25
    assert seconds(measured["queue_wait"].p95) == 12.5


def test_a_percentile_of_rows_purged_since_they_were_counted_is_none() -> None:
    # Outside PostgreSQL the count and the rows around the rank are two queries.
    fields, where = dashboard.MEASURES["run_time"]
    gone = Task.objects.filter(where).order_by(*fields)  # counted 4, none left
    assert dashboard._percentile(gone, fields, 4, 0.5) is None


# -- the tools that fail most -----------------------------------------------------------------

TOOL_ERROR: dict[str, Any] = {"content": [{"type": "text", "text": "boom"}], "isError": True}
FINE: dict[str, Any] = {"content": [{"type": "text", "text": "ok"}], "isError": False}


def test_the_tools_that_fail_most_come_first() -> None:
    start, _ = BOUNDS["day"]
    outcomes: dict[str, list[tuple[str, dict[str, Any] | None]]] = {  # tool → its tasks
        "export": [(TaskStatus.FAILED, None)] * 3 + [(TaskStatus.COMPLETED, FINE)],
        "import": [(TaskStatus.COMPLETED, TOOL_ERROR)] * 2 + [(TaskStatus.FAILED, None)] * 2,
        "mail": [(TaskStatus.COMPLETED, TOOL_ERROR)] + [(TaskStatus.COMPLETED, FINE)] * 5,
        "billing": [(TaskStatus.FAILED, None)],
        "calm": [(TaskStatus.COMPLETED, FINE), (TaskStatus.CANCELLED, None)],
    }
    rows = []
    for minute, (tool, status, result) in enumerate(
        (tool, status, result) for tool, runs in outcomes.items() for status, result in runs
    ):
        rows.append(make_task(start + dt.timedelta(minutes=minute), status, tool, result=result))
    make_task(start - dt.timedelta(seconds=1), TaskStatus.FAILED, "calm")  # before the window

    failing = dashboard.failing_tools(*BOUNDS["day"])

    def failed(task: Task) -> bool:
        return task.status == TaskStatus.FAILED or bool((task.result or {}).get("isError"))

    totals = Counter(task.tool_name for task in rows)
    failures = Counter(task.tool_name for task in rows if failed(task))
    expected = sorted(failures.items(), key=lambda item: (-item[1], item[0]))
    assert [(t.tool, t.failed, t.total) for t in failing] == [
        (tool, count, totals[tool]) for tool, count in expected
    ]
    assert [t.tool for t in failing] == ["import", "export", "billing", "mail"]


# -- questions waiting over time --------------------------------------------------------------


def ask(task: Task, created: dt.datetime, status: str, answered: dt.datetime | None) -> None:
    number = task.input_requests.count() + 1
    InputRequest.objects.create(
        task=task,
        key=f"q{number}",
        sequence=number,
        method="elicitation/create",
        status=status,
        created_at=created,
        answered_at=answered,
    )


def test_questions_waiting_at_each_bucket_end() -> None:
    start, _ = BOUNDS["hour"]

    def at(minutes: float) -> dt.datetime:
        return start + dt.timedelta(minutes=minutes)

    running = make_task(at(0), TaskStatus.INPUT_REQUIRED)
    ended = make_task(at(0), TaskStatus.CANCELLED, finished=at(40.5))
    # (task, asked, status, answered_at, when it stopped waiting: None while it waits)
    questions = [
        (running, at(-30), InputRequestStatus.ANSWERED, at(-10), at(-10)),  # before the window
        (running, at(-30), InputRequestStatus.ANSWERED, at(12.5), at(12.5)),
        (running, at(3), InputRequestStatus.EXPIRED, at(20), at(20)),
        (running, at(5.2), InputRequestStatus.PENDING, None, None),
        (running, at(50), InputRequestStatus.PENDING, None, None),
        (ended, at(10), InputRequestStatus.CLOSED, None, at(40.5)),  # closed with its task
        (running, at(15), InputRequestStatus.CLOSED, None, at(15)),  # withdrawn at once
        (running, NOW + dt.timedelta(seconds=5), InputRequestStatus.PENDING, None, None),
    ]
    for task, asked, status, answered, _ in questions:
        ask(task, asked, status, answered)

    shown = dashboard.figures(HOUR, NOW)

    times = [t for t, _ in shown.waiting]
    assert times == [b.end for b in shown.buckets[:-1]] + [NOW]
    expected = [
        sum(
            asked <= t and (stopped is None or stopped > t) and asked != stopped
            for _, asked, _, _, stopped in questions
        )
        for t in times
    ]
    assert [count for _, count in shown.waiting] == expected
    assert max(expected) == 4 and expected[-1] == 2  # the rows make a series worth testing


# -- the page ---------------------------------------------------------------------------------


def page(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def test_staff_without_view_task_get_403(client: Client) -> None:
    client.force_login(staff("olaf", "answer_inputrequest", "view_inputrequest"))
    assert client.get(DASHBOARD).status_code == 403


def test_visitors_are_sent_to_the_login_page(client: Client) -> None:
    response = client.get(DASHBOARD)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_the_url_is_the_task_admins() -> None:
    assert reverse("admin:mcp_tasks_task_dashboard") == DASHBOARD


@pytest.mark.parametrize("key", ["hour", "day", "week"])
def test_the_page_renders_with_an_empty_database(viewer: Client, key: str) -> None:
    body = page(viewer.get(DASHBOARD, {"window": key}))
    assert "Task dashboard" in body
    assert body.count('class="mcp-slot"') == 2 * dashboard.WINDOWS[key].buckets
    assert 'class="mcp-bar' not in body
    assert "No failures in this window." in body
    assert re.findall(r'data-status="(\w+)">(\d+)<', body) == [
        (status, "0") for status in dashboard.STATUSES
    ]


def test_the_page_shows_one_task(viewer: Client) -> None:
    began = timezone.now() - dt.timedelta(seconds=30)
    make_task(
        began - dt.timedelta(seconds=2),
        TaskStatus.FAILED,
        "export",
        started=began,
        finished=began + dt.timedelta(seconds=4),
    )
    body = page(viewer.get(DASHBOARD))
    assert body.count('class="mcp-bar mcp-s-failed"') == 1
    assert 'data-status="failed">1<' in body
    assert "4.0 s / 4.0 s" in body  # run time p50 / p95
    assert "2.0 s / 2.0 s" in body  # queue wait
    assert 'data-tool="export"' in body


def test_an_unknown_window_shows_the_last_hour(viewer: Client) -> None:
    body = page(viewer.get(DASHBOARD, {"window": "year"}))
    assert body.count('class="mcp-slot"') == 2 * HOUR.buckets
    assert 'data-window="hour" class="mcp-selected"' in body


def test_each_bar_is_one_status_of_one_bucket(viewer: Client) -> None:
    shown_at = timezone.now()
    for minutes, status in [
        (1, "completed"),
        (1, "failed"),
        (1, "failed"),
        (7, "failed"),
        (30, "working"),
    ]:
        make_task(shown_at - dt.timedelta(minutes=minutes), status)
    body = page(viewer.get(DASHBOARD))
    bars = Counter(re.findall(r'class="mcp-bar mcp-s-(\w+)"', body))
    assert bars == {"completed": 1, "failed": 2, "working": 1}


def test_the_task_list_links_to_the_dashboard_for_those_who_may_see_it(client: Client) -> None:
    client.force_login(staff("vera", "view_task"))
    assert 'class="mcp-dashboard-link"' in page(client.get("/admin/mcp_tasks/task/"))
    client.force_login(staff("olaf", "answer_inputrequest"))
    assert 'class="mcp-dashboard-link"' not in page(client.get("/admin/mcp_tasks/task/"))


def test_the_page_listens_on_the_live_admins_socket_when_it_is_routed(viewer: Client) -> None:
    live = re.compile(r'id="mcp-dashboard-live" hidden data-ws-path="([^"]*)"')
    with override_settings(MCP_TASKS={"ADMIN_LIVE_PATH": "/live/"}):
        assert live.findall(page(viewer.get(DASHBOARD))) == ["/live/"]
    with override_settings(MCP_TASKS={"ADMIN_LIVE_PATH": None}):
        assert live.findall(page(viewer.get(DASHBOARD))) == [""]


# -- queries ----------------------------------------------------------------------------------

#: The figures' queries: one per figure, and four more for the percentiles where the
#: database has no ``percentile_cont``.
FIGURE_QUERIES = 4 if connection.vendor == "postgresql" else 8


@pytest.mark.parametrize("key", ["hour", "week"])
def test_the_figures_take_a_fixed_number_of_queries(
    key: str, django_assert_max_num_queries: Any
) -> None:
    spread_tasks(300)
    for task in Task.objects.filter(status=TaskStatus.INPUT_REQUIRED)[:40]:
        ask(task, task.created_at, InputRequestStatus.PENDING, None)
    for task in Task.objects.filter(status=TaskStatus.COMPLETED):
        task.started_at = task.created_at + dt.timedelta(seconds=2)
        task.finished_at = task.created_at + dt.timedelta(seconds=9)
        task.save(update_fields=["started_at", "finished_at"])
    with django_assert_max_num_queries(FIGURE_QUERIES):
        shown = dashboard.figures(dashboard.WINDOWS[key], NOW)
    assert shown.run_time.count > 0


def test_the_page_takes_a_few_queries_more(
    client: Client, django_assert_max_num_queries: Any
) -> None:
    client.force_login(staff("vera", "view_task"))
    spread_tasks(100)
    # The session, the user, their permissions (user's, groups'), the figures, and the
    # header's count of waiting questions (the example project's base_site.html).
    with django_assert_max_num_queries(FIGURE_QUERIES + 5):
        page(client.get(DASHBOARD, {"window": "week"}))

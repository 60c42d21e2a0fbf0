"""The task admin's view of fair share, limits and retries: who has active and waiting
tasks (the Principal filter), what a queued task waits for, and which attempt it is. Rows
are made with the ORM; no worker runs."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from mcp_tasks import Retry, TaskConfig
from mcp_tasks.authoring.registry import mcp
from mcp_tasks.models import Task, TaskStatus, WaitingFor

pytestmark = pytest.mark.django_db

TASKS = "/admin/mcp_tasks/task/"
LIMIT_NOTE = 'Waiting for a free slot: at most 2 export task(s) run at once for customer_id="acme"'
RETRY_NOTE = "Attempt 2 of 3 in 8 s (ConnectionError: upstream down)"
_ids = itertools.count(1)


def make_task(
    principal: str = "user:7",
    status: str = TaskStatus.WORKING,
    *,
    running: bool = False,
    **fields: Any,
) -> Task:
    """A task row; ``running``: a worker has started it (it has a heartbeat)."""
    return Task.objects.create(**task_fields(principal, status, running=running, **fields))


def task_fields(
    principal: str, status: str, *, running: bool = False, **fields: Any
) -> dict[str, Any]:
    return {
        "id": f"t_{next(_ids):05d}-" + "y" * 30,
        "principal_scope": principal,
        "tool_name": fields.pop("tool_name", "long_report"),
        "status": status,
        "heartbeat_at": timezone.now() if running else None,
        **fields,
    }


@pytest.fixture
def viewer(client: Client) -> Client:
    """Staff who may only look at tasks: the filters and columns need no more."""
    user = User.objects.create_user("victor", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="mcp_tasks", codename="view_task")
    )
    client.force_login(user)
    return client


@pytest.fixture
def export_with_retries() -> Iterator[None]:
    """An ``export`` tool registered with ``TaskConfig(retries=Retry(attempts=3))``."""
    tool = SimpleNamespace(task=TaskConfig(retries=Retry(attempts=3)))
    with mock.patch.dict(mcp.tools, {"export": tool}):
        yield


def page(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def text(response: Any) -> str:
    """The page without tags, whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page(response)))


def filter_choices(response: Any, title: str) -> list[str]:
    """The choices of the list filter ``title``, in order, as shown."""
    body = page(response)
    start = body.index(f"By {title}")
    block = body[start : body.index("</ul>", start)]
    return [
        re.sub(r"\s+", " ", choice).strip()
        for choice in re.findall(r"<a [^>]*>(.*?)</a>", block, re.S)
    ]


def cell(response: Any, task: Task, column: str) -> str:
    """The inner HTML of ``task``'s cell in ``column`` of the task list."""
    body = page(response)
    row = next(r for r in body.split("<tr")[1:] if f'data-task-id="{task.id}"' in r)
    match = re.search(rf'<td class="field-{column}[^"]*">(.*?)</td>', row, re.S)
    assert match, f"no {column} cell in the row of {task.id}"
    return match.group(1).strip()


def shown(response: Any) -> set[str]:
    """The ids of the tasks the list shows."""
    return set(re.findall(r'data-task-id="([^"]+)"', page(response)))


# -- the Principal filter ---------------------------------------------------------------------


def test_principal_filter_labels_each_principal_with_its_active_and_waiting_tasks(
    viewer: Client,
) -> None:
    for _ in range(3):
        make_task("user:7")  # queued
    make_task("user:7", running=True)
    make_task("user:7", TaskStatus.INPUT_REQUIRED)
    make_task("user:7", TaskStatus.COMPLETED)
    make_task("user:9", waiting_for=WaitingFor.LIMIT, status_message=LIMIT_NOTE)
    make_task("user:5", TaskStatus.FAILED)  # nothing active: not listed
    choices = filter_choices(viewer.get(TASKS), "principal")
    assert choices == ["All", "user:7 — 5 active, 3 waiting", "user:9 — 1 active, 1 waiting"]


def test_principal_filter_lists_the_twenty_most_active_principals(viewer: Client) -> None:
    rows = [
        Task(**task_fields(f"user:{number:02d}", TaskStatus.WORKING))
        for number in range(25)
        for _ in range(1 + number % 3)
    ]
    Task.objects.bulk_create(rows)
    choices = filter_choices(viewer.get(TASKS), "principal")[1:]
    assert len(choices) == 20
    assert [label.split(" — ")[1] for label in choices] == (
        ["3 active, 3 waiting"] * 8 + ["2 active, 2 waiting"] * 8 + ["1 active, 1 waiting"] * 4
    )
    assert choices[0] == "user:02 — 3 active, 3 waiting"


def test_filtering_by_principal_lists_all_its_tasks(viewer: Client) -> None:
    mine = {make_task("user:7").id, make_task("user:7", TaskStatus.COMPLETED).id}
    make_task("user:9")
    response = viewer.get(TASKS, {"principal": "user:7"})
    assert shown(response) == mine
    assert 'class="selected"' in page(response).split("By principal")[1].split("</ul>")[0]


def test_a_chosen_principal_without_active_tasks_stays_in_the_filter(viewer: Client) -> None:
    done = make_task("user:5", TaskStatus.COMPLETED)
    make_task("user:7")
    response = viewer.get(TASKS, {"principal": "user:5"})
    assert shown(response) == {done.id}
    assert filter_choices(response, "principal") == [
        "All",
        "user:7 — 1 active, 1 waiting",
        "user:5 — 0 active, 0 waiting",
    ]


def principal_page_queries(client: Client) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        page(client.get(TASKS))
    return [query["sql"] for query in queries.captured_queries]


def test_principal_filter_costs_one_query_whatever_the_number_of_tasks(
    viewer: Client, django_assert_max_num_queries: Any
) -> None:
    make_task("user:1")
    few = principal_page_queries(viewer)
    Task.objects.bulk_create(
        Task(**task_fields(f"user:{n % 40}", TaskStatus.WORKING, running=n % 2 == 0))
        for n in range(2000)
    )
    with django_assert_max_num_queries(len(few)):
        many = principal_page_queries(viewer)
    assert len(many) == len(few)
    grouped = [sql for sql in many if "GROUP BY" in sql and "principal_scope" in sql]
    assert len(grouped) == 1


# -- waiting for ------------------------------------------------------------------------------


@pytest.fixture
def waiting_tasks() -> dict[str, Task]:
    return {
        "limit": make_task(waiting_for=WaitingFor.LIMIT, status_message=LIMIT_NOTE),
        "retry": make_task(waiting_for=WaitingFor.RETRY, status_message=RETRY_NOTE, attempt=2),
        "worker": make_task(status_message="Answered; resuming"),
        "running": make_task(running=True),
        "asking": make_task(status=TaskStatus.INPUT_REQUIRED),
        # Cancelled while it waited for a retry: over, it waits for nothing.
        "cancelled": make_task(status=TaskStatus.CANCELLED, waiting_for=WaitingFor.RETRY),
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("limit", {"limit"}),
        ("retry", {"retry"}),
        ("worker", {"worker"}),
        ("any", {"limit", "retry", "worker"}),
    ],
)
def test_waiting_for_filter_lists_the_queued_tasks_that_wait_for_it(
    viewer: Client, waiting_tasks: dict[str, Task], choice: str, expected: set[str]
) -> None:
    response = viewer.get(TASKS, {"waiting_for": choice})
    assert shown(response) == {waiting_tasks[name].id for name in expected}


def test_waiting_for_filter_offers_each_reason(viewer: Client) -> None:
    assert filter_choices(viewer.get(TASKS), "waiting for") == [
        "All",
        "Anything (queued, not running)",
        "A concurrency slot",
        "Its next attempt",
        "A worker (queued, not started)",
    ]


def test_waiting_column_says_what_a_queued_task_waits_for_and_why(
    viewer: Client, waiting_tasks: dict[str, Task]
) -> None:
    response = viewer.get(TASKS)
    limit = cell(response, waiting_tasks["limit"], "waiting")
    assert limit == (
        '<span class="mcp-waiting" title="Waiting for a free slot: at most 2 export task(s) run '
        'at once for customer_id=&quot;acme&quot;">concurrency slot</span>'
    )
    assert f'title="{RETRY_NOTE}">next attempt</span>' in cell(
        response, waiting_tasks["retry"], "waiting"
    )
    assert 'title="Answered; resuming">worker</span>' in cell(
        response, waiting_tasks["worker"], "waiting"
    )


@pytest.mark.parametrize(
    "name", ["running", "asking", pytest.param("cancelled", marks=pytest.mark.cancel)]
)
def test_waiting_column_is_blank_for_running_and_ended_tasks(
    viewer: Client, waiting_tasks: dict[str, Task], name: str
) -> None:
    assert cell(viewer.get(TASKS), waiting_tasks[name], "waiting") == ""


# -- attempts ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("export_with_retries")
@pytest.mark.parametrize(
    ("tool", "attempt", "shows"),
    [
        ("export", 2, "2 of 3"),  # TaskConfig(retries=Retry(attempts=3))
        ("export", 1, "1 of 3"),
        ("slow_compute", 2, "2 of 3"),  # no retries declared: RetryTask's default policy
        ("slow_compute", 1, ""),
        ("no_longer_registered", 2, "2"),
    ],
)
def test_attempt_column_shows_the_attempt_of_the_total(
    viewer: Client, tool: str, attempt: int, shows: str
) -> None:
    task = make_task(tool_name=tool, attempt=attempt)
    assert cell(viewer.get(TASKS), task, "attempt_column") == shows


# -- the task page ----------------------------------------------------------------------------


@pytest.mark.usefixtures("export_with_retries")
def test_task_page_shows_attempt_and_waiting_for_after_the_status_message(viewer: Client) -> None:
    task = make_task(
        tool_name="export", attempt=2, waiting_for=WaitingFor.RETRY, status_message=RETRY_NOTE
    )
    body = text(viewer.get(reverse("admin:mcp_tasks_task_change", args=[quote(task.pk)])))
    first_fieldset = body[: body.index("Arguments")]
    assert (
        f"Status message: {RETRY_NOTE} Waiting for: Its next attempt Attempt: 2 of 3"
        in first_fieldset
    )


def test_task_page_shows_no_wait_for_a_running_task(viewer: Client) -> None:
    task = make_task(running=True)
    body = text(viewer.get(reverse("admin:mcp_tasks_task_change", args=[quote(task.pk)])))
    assert "Waiting for: — Attempt: 1 " in body


# -- a queue no worker serves ------------------------------------------------------------------


@pytest.fixture
def fresh_worker_count(embedded_queue: Any) -> Iterator[Any]:
    """Queues on the embedded fake Redis, with nothing remembered of their workers."""
    from mcp_tasks.tasks.queues import queue

    queue._live_workers.clear()
    yield embedded_queue
    queue._live_workers.clear()


def test_the_task_list_warns_when_tasks_wait_and_no_worker_serves_their_queue(
    viewer: Client, fresh_worker_count: Any
) -> None:
    make_task(queue="reports")
    make_task(queue="mcp_tasks", running=True)  # running: its queue needs no warning
    text = viewer.get(TASKS).content.decode()
    assert (
        "Tasks wait in queue &#x27;reports&#x27; and do not start: no task worker is running"
        in text
    )
    assert "rqworker reports" in text
    assert "queue &#x27;mcp_tasks&#x27;" not in text


def test_the_task_list_does_not_warn_while_a_worker_serves_the_queue(
    viewer: Client, fresh_worker_count: Any
) -> None:
    from mcp_tasks.tasks.queues import queue
    from mcp_tasks.tasks.worker.task_worker import EmbeddedTaskWorker

    worker = EmbeddedTaskWorker([queue.get_queue("reports")], connection=fresh_worker_count)
    worker.register_birth()  # type: ignore[no-untyped-call]
    make_task(queue="reports")
    assert "no task worker is running" not in viewer.get(TASKS).content.decode()


def test_the_task_list_says_when_only_rq_workers_serve_the_queue(
    viewer: Client, fresh_worker_count: Any
) -> None:
    from rq import Worker

    from mcp_tasks.tasks.queues import queue

    Worker([queue.get_queue("reports")], connection=fresh_worker_count).register_birth()  # type: ignore[no-untyped-call]
    make_task(queue="reports")
    text = viewer.get(TASKS).content.decode()
    assert "the rq workers of queue &#x27;reports&#x27; are not task workers" in text
    assert "--worker-class mcp_tasks.tasks.worker.TaskWorker" in text

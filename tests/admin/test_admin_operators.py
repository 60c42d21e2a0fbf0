"""Operator actions in the admin: retry a failed task, answer a task's only open question
from its page, and the count of waiting questions in the header. Jobs go to the embedded
fake Redis; no worker runs them."""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings
from django.urls import reverse

from mcp_tasks.models import InputRequestStatus, Task, TaskStatus
from mcp_tasks.tasks.queues import fair_queue, queue
from mcp_tasks.tasks.state import service
from tests.support import rows

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("embedded_queue")]

SCHEMA = {"type": "object", "properties": {"value": {"type": "boolean"}}, "required": ["value"]}
OPERATOR = ("view_task", "change_task", "answer_inputrequest", "retry_task")


def staff(name: str, *perms: str) -> User:
    user = User.objects.create_user(name, is_staff=True)
    for codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="mcp_tasks", codename=codename)
        )
    return user


@pytest.fixture
def operator(client: Client) -> Client:
    client.force_login(staff("olga", *OPERATOR))
    return client


#: A task of client-alice's token, as the admin's operator actions meet them.
new_task = functools.partial(
    rows.new_task,
    "long_report",
    arguments={"quarter": "Q3"},
    principal_scope="client:client-alice:alice",
    client_info={"name": "claude-code", "version": "2.1"},
    client_capabilities={"extensions": {"io.modelcontextprotocol/tasks": {}}},
    access_token={"token": "valid-alice", "client_id": "client-alice"},
    headers={"x-request-id": "rid-1"},
    progress_token="p-1",
    origin_request_id="call-1",
    timeout=120,
)


def failed_task() -> Task:
    task = new_task()
    service.fail(task.id, {"code": -32603, "message": "upstream down"})
    return Task.objects.get(pk=task.pk)


def task_page(task: Task) -> str:
    return reverse("admin:mcp_tasks_task_change", args=[quote(task.pk)])


def retry_page(task: Task) -> str:
    return reverse("admin:mcp_tasks_task_retry", args=[quote(task.pk)])


ask = functools.partial(rows.ask, schema=SCHEMA)


def body(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


# -- retry ------------------------------------------------------------------------------------


def test_a_failed_task_page_offers_retry(operator: Client) -> None:
    task = failed_task()
    page = body(operator.get(task_page(task)))
    assert f'action="{retry_page(task)}"' in page
    assert 'name="_retry"' in page


def test_a_task_that_did_not_fail_offers_no_retry(operator: Client) -> None:
    task = new_task()
    service.complete(task.id, {"content": []})
    assert 'name="_retry"' not in body(operator.get(task_page(task)))


def test_retry_needs_its_permission_to_be_offered(client: Client) -> None:
    client.force_login(staff("victor", "view_task", "change_task"))
    assert 'name="_retry"' not in body(client.get(task_page(failed_task())))


def test_retry_runs_the_task_again_as_a_new_linked_task(operator: Client) -> None:
    old = failed_task()
    response = operator.post(retry_page(old))
    new = Task.objects.exclude(pk=old.pk).get()
    assert response.status_code == 302 and response["Location"] == task_page(new)
    assert new.retry_of_id == old.id and new.status == TaskStatus.WORKING
    same = ("tool_name", "arguments", "principal_scope", "era", "queue", "job_timeout", "ttl_ms")
    assert [getattr(new, f) for f in same] == [getattr(old, f) for f in same]
    assert new.snapshot.client_info == old.snapshot.client_info
    assert new.snapshot.client_capabilities == old.snapshot.client_capabilities
    assert service.snapshot_secrets(new) == service.snapshot_secrets(old)
    assert new.snapshot.progress_token is None and new.origin_request_id is None
    assert new.session_id != old.session_id
    assert new.job_id in fair_queue.job_ids(queue.get_queue("mcp_tasks").connection, "mcp_tasks")
    assert Task.objects.get(pk=old.pk).status == TaskStatus.FAILED  # the old one stays as it was


def test_retried_tasks_link_to_each_other(operator: Client) -> None:
    old = failed_task()
    operator.post(retry_page(old))
    new = Task.objects.exclude(pk=old.pk).get()
    assert f'href="{task_page(old)}"' in body(operator.get(task_page(new)))
    assert f'href="{task_page(new)}"' in body(operator.get(task_page(old)))


def test_retry_without_the_permission_is_refused(client: Client) -> None:
    client.force_login(staff("victor", "view_task", "change_task"))
    old = failed_task()
    assert client.post(retry_page(old)).status_code == 403
    assert Task.objects.count() == 1


def test_retry_is_a_post(operator: Client) -> None:
    old = failed_task()
    assert operator.get(retry_page(old)).status_code == 405
    assert Task.objects.count() == 1


def test_retry_needs_a_csrf_token() -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff("olga", *OPERATOR))
    old = failed_task()
    assert client.post(retry_page(old)).status_code == 403
    token = re.search(
        r'name="csrfmiddlewaretoken" value="([^"]+)"', body(client.get(task_page(old)))
    )
    assert token is not None
    assert client.post(retry_page(old), {"csrfmiddlewaretoken": token[1]}).status_code == 302
    assert Task.objects.count() == 2


def test_a_retry_past_its_callers_limit_of_active_tasks_says_so(operator: Client) -> None:
    old = failed_task()
    new_task()  # alice's one active task
    with override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "MAX_ACTIVE_TASKS": 1}):
        response = operator.post(retry_page(old), follow=True)
    page = body(response)
    assert "was not retried: this caller already has 1 active tasks" in page
    assert "MAX_ACTIVE_TASKS = 1" in page
    assert Task.objects.count() == 2


def test_a_task_that_did_not_fail_is_not_retried(operator: Client) -> None:
    task = new_task()
    service.cancel(task.id, None)
    response = operator.post(retry_page(task), follow=True)
    assert "was not retried: the task is cancelled, not failed" in body(response)
    assert Task.objects.count() == 1


def test_the_retry_action_retries_the_failed_tasks_selected(operator: Client) -> None:
    failed, done = failed_task(), new_task()
    service.complete(done.id, {"content": []})
    response = operator.post(
        reverse("admin:mcp_tasks_task_changelist"),
        {"action": "retry_tasks", "_selected_action": [failed.pk, done.pk]},
        follow=True,
    )
    page = body(response)
    assert "Retried 1 task:" in page
    assert "Left 1 task(s) alone: only failed tasks are retried." in page
    assert list(Task.objects.filter(retry_of=failed).values_list("tool_name", flat=True)) == [
        "long_report"
    ]
    assert not Task.objects.filter(retry_of=done).exists()


def test_the_retry_action_is_offered_only_with_the_permission(client: Client) -> None:
    tasks = reverse("admin:mcp_tasks_task_changelist")
    client.force_login(staff("victor", "view_task", "change_task"))
    failed_task()
    assert 'value="retry_tasks"' not in body(client.get(tasks))
    client.force_login(staff("olga", *OPERATOR))
    assert 'value="retry_tasks"' in body(client.get(tasks))


# -- answering from the task page -------------------------------------------------------------


def answer_url(question: Any) -> str:
    return reverse("admin:mcp_tasks_inputrequest_answer", args=[question.pk])


def test_a_task_with_one_open_question_can_be_answered_on_its_page(operator: Client) -> None:
    task = new_task()
    question = ask(task)
    page = body(operator.get(task_page(task)))
    assert f'id="answer_form" action="{answer_url(question)}"' in page
    assert 'name="_return_to_task"' in page
    assert "Include draft figures?" in page
    response = operator.post(
        answer_url(question), {"answer-value": "on", "_accept": "Accept", "_return_to_task": "1"}
    )
    assert response.status_code == 302 and response["Location"] == task_page(task)
    question.refresh_from_db()
    assert question.status == InputRequestStatus.ANSWERED
    assert question.response == {"action": "accept", "content": {"value": True}}


def test_a_task_with_two_open_questions_sends_the_operator_to_the_answer_pages(
    operator: Client,
) -> None:
    task = new_task()
    service.ask_all(
        task.id,
        1,
        [
            ("elicitation/create", {"message": "First?", "requestedSchema": SCHEMA}, None),
            ("elicitation/create", {"message": "Second?", "requestedSchema": SCHEMA}, None),
        ],
        "w",
    )
    assert 'id="answer_form"' not in body(operator.get(task_page(task)))


def test_a_task_with_no_open_question_has_no_answer_form(operator: Client) -> None:
    assert 'id="answer_form"' not in body(operator.get(task_page(new_task())))


def test_no_answer_form_without_the_answer_permission(client: Client) -> None:
    client.force_login(staff("victor", "view_task", "change_task"))
    task = new_task()
    ask(task)
    assert 'id="answer_form"' not in body(client.get(task_page(task)))


# -- the count of waiting questions -----------------------------------------------------------


def test_the_admin_header_counts_the_waiting_questions(operator: Client) -> None:
    ask(new_task())
    ask(new_task())
    page = body(operator.get(reverse("admin:index")))
    assert (
        f'<a href="{reverse("admin:mcp_tasks_inputrequest_changelist")}" '
        'class="mcp-waiting-count">Waiting questions (2)</a>' in page
    )


def test_staff_who_may_not_see_tasks_get_no_count(client: Client) -> None:
    client.force_login(staff("nobody"))
    ask(new_task())
    assert "Waiting questions" not in body(client.get(reverse("admin:index")))

"""The admin for tasks and waiting questions, through Django's test client."""

from __future__ import annotations

import functools
import itertools
import re
from typing import Any
from unittest import mock

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from mcp_tasks.core import task_contract
from mcp_tasks.models import (
    InputRequest,
    InputRequestStatus,
    Task,
    TaskLogEntry,
    TaskSnapshot,
    TaskStatus,
)
from mcp_tasks.tasks.state import crypto, service
from tests.support import rows

pytestmark = pytest.mark.django_db

SECRET_TOKEN = "sk-live-never-show-me-0123456789"
_ids = itertools.count(1)

BOOL_SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "boolean"}},
    "required": ["value"],
}
NAME_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2},
        "age": {"type": "integer", "minimum": 0},
    },
    "required": ["name"],
}


# -- fixtures ---------------------------------------------------------------------------------


def make_task(tool: str = "long_report", status: str = TaskStatus.WORKING, **fields: Any) -> Task:
    number = next(_ids)
    task = Task.objects.create(
        id=f"t_{number:04d}-" + "x" * 36,  # "_": admin URLs must quote ids
        principal_scope=fields.pop("principal_scope", "anonymous"),
        tool_name=tool,
        status=status,
        arguments=fields.pop("arguments", {"quarter": "Q3"}),
        **fields,
    )
    TaskSnapshot.objects.create(
        task=task,
        era="modern",
        protocol_version="2026-07-28",
        client_info={"name": "test-client", "version": "1.0"},
        sealed=crypto.seal(
            {"access_token": {"token": SECRET_TOKEN}, "headers": {"x-request-id": "r1"}}
        ),
    )
    return task


#: A question of a task, recorded the way the worker does (through the service).
ask = functools.partial(rows.ask, schema=BOOL_SCHEMA)


def make_user(username: str, *perms: str, superuser: bool = False) -> User:
    user = User.objects.create_user(
        username, is_staff=True, is_superuser=superuser
    )  # force_login: no password
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


OPERATOR_PERMS = ("mcp_tasks.view_task", "mcp_tasks.change_task", "mcp_tasks.answer_inputrequest")
VIEWER_PERMS = ("mcp_tasks.view_task", "mcp_tasks.view_inputrequest")


@pytest.fixture
def operator() -> User:
    return make_user("olga", *OPERATOR_PERMS)


@pytest.fixture
def viewer() -> User:
    return make_user("victor", *VIEWER_PERMS)


@pytest.fixture
def as_operator(client: Client, operator: User) -> Client:
    client.force_login(operator)
    return client


@pytest.fixture
def as_viewer(client: Client, viewer: User) -> Client:
    client.force_login(viewer)
    return client


def answer_url(question: InputRequest) -> str:
    return reverse("admin:mcp_tasks_inputrequest_answer", args=[question.pk])


def task_url(task: Task) -> str:
    return reverse("admin:mcp_tasks_task_change", args=[quote(task.pk)])


TASKS = "/admin/mcp_tasks/task/"
QUESTIONS = "/admin/mcp_tasks/inputrequest/"


def page(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return str(response.content.decode())


def text(response: Any) -> str:
    """The page without tags, whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page(response)))


# -- the task list ----------------------------------------------------------------------------


def test_task_list_shows_short_id_tool_status_and_principal(as_operator: Client) -> None:
    task = make_task("long_report", TaskStatus.INPUT_REQUIRED, principal_scope="user:7")
    body = page(as_operator.get(TASKS))
    assert f"{task.id[:8]}…" in body
    assert "long_report" in body
    assert "Input required" in body
    assert "user:7" in body


def test_task_list_and_page_show_the_client_that_created_the_task(as_operator: Client) -> None:
    task = make_task(principal_scope="user:7", client_id="desk-assistant")
    assert "desk-assistant" in page(as_operator.get(TASKS))
    assert "desk-assistant" in page(as_operator.get(task_url(task)))


def test_task_list_shows_a_progress_bar_when_progress_is_known(as_operator: Client) -> None:
    make_task(progress=1, progress_total=4)
    body = page(as_operator.get(TASKS))
    assert 'class="mcp-progress"' in body
    assert 'style="width: 25.0%"' in body
    assert "1/4" in body


def test_task_list_shows_no_bar_without_a_total(as_operator: Client) -> None:
    make_task(progress=7)
    body = page(as_operator.get(TASKS))
    assert 'class="mcp-progress"' not in body
    assert ">7<" in body


def test_task_list_filters_by_status(as_operator: Client) -> None:
    done = make_task("add_numbers", TaskStatus.COMPLETED)
    waiting = make_task("ask_name", TaskStatus.INPUT_REQUIRED)
    body = page(as_operator.get(TASKS, {"status__exact": "completed"}))
    assert done.id[:8] in body
    assert waiting.id[:8] not in body


def test_task_list_filters_by_tool(as_operator: Client) -> None:
    report = make_task("long_report")
    other = make_task("slow_compute")
    body = page(as_operator.get(TASKS, {"tool_name": "slow_compute"}))
    assert other.id[:8] in body
    assert report.id[:8] not in body


def test_task_list_searches_by_id_prefix(as_operator: Client) -> None:
    wanted, other = make_task(), make_task()
    body = page(as_operator.get(TASKS, {"q": wanted.id[:8]}))
    assert wanted.id[:8] in body
    assert other.id[:8] not in body


def test_task_list_searches_by_tool_name(as_operator: Client) -> None:
    wanted, other = make_task("long_report"), make_task("slow_compute")
    body = page(as_operator.get(TASKS, {"q": "slow"}))
    assert wanted.id[:8] not in body
    assert other.id[:8] in body


def test_task_list_links_to_waiting_questions_and_the_queue_dashboard(as_operator: Client) -> None:
    ask(make_task())
    body = page(as_operator.get(TASKS))
    assert f'href="{QUESTIONS}"' in body
    assert "Waiting questions (1)" in body
    assert f'href="{reverse("django_rq:home")}"' in body
    assert "Queue dashboard" in body


# -- the task page ----------------------------------------------------------------------------


def test_task_page_shows_arguments_result_and_status_message(as_operator: Client) -> None:
    result = {"content": [{"type": "text", "text": "Report for Q3: 3 sections."}], "isError": False}
    task = make_task(
        status=TaskStatus.COMPLETED,
        arguments={"quarter": "Q3", "steps": 3},
        result=result,
        status_message="Completed",
        progress=3,
        progress_total=3,
    )
    body = page(as_operator.get(task_url(task)))
    assert "&quot;quarter&quot;: &quot;Q3&quot;" in body  # indented JSON
    assert "&quot;steps&quot;: 3" in body
    assert "Report for Q3: 3 sections." in body
    assert "&quot;isError&quot;: false" in body
    assert "Completed" in body
    assert 'style="width: 100.0%"' in body
    assert "test-client 1.0, protocol 2026-07-28 (modern)" in body


def test_task_page_shows_the_error_of_a_failed_task(as_operator: Client) -> None:
    task = make_task(status=TaskStatus.FAILED, error={"code": -32603, "message": "worker vanished"})
    body = page(as_operator.get(task_url(task)))
    assert "&quot;code&quot;: -32603" in body
    assert "worker vanished" in body


def test_task_page_shows_log_lines(as_operator: Client) -> None:
    task = make_task()
    TaskLogEntry.objects.create(
        task=task, level="warning", logger_name="report", data="disk almost full"
    )
    TaskLogEntry.objects.create(task=task, level="info", data={"rows": 12})
    body = page(as_operator.get(task_url(task)))
    assert "disk almost full" in body
    assert "warning" in body
    assert "&quot;rows&quot;: 12" in body


def test_task_page_shows_its_questions_with_a_link_to_answer(as_operator: Client) -> None:
    task = make_task()
    question = ask(task)
    body = page(as_operator.get(task_url(task)))
    assert "Include draft figures?" in body
    assert f'href="{answer_url(question)}"' in body


def test_snapshot_secrets_are_never_shown(as_operator: Client) -> None:
    task = make_task()
    question = ask(task)
    sealed = task.snapshot.sealed
    for url in (task_url(task), TASKS, QUESTIONS, answer_url(question)):
        body = page(as_operator.get(url))
        assert SECRET_TOKEN not in body
        assert sealed[:24] not in body


def test_task_rows_cannot_be_added_changed_or_deleted(client: Client) -> None:
    client.force_login(make_user("root", superuser=True))
    task = make_task()
    assert client.get(f"{TASKS}add/").status_code == 403
    assert client.get(f"{task_url(task)}../delete/").status_code == 403
    response = client.post(task_url(task), {"status": "completed", "tool_name": "evil"})
    assert response.status_code == 403
    task.refresh_from_db()
    assert (task.status, task.tool_name) == (TaskStatus.WORKING, "long_report")
    assert "delete_selected" not in page(client.get(TASKS))


def test_question_rows_cannot_be_changed_through_the_admin_form(client: Client) -> None:
    client.force_login(make_user("root", superuser=True))
    question = ask(make_task())
    assert client.get(f"{QUESTIONS}add/").status_code == 403
    response = client.get(reverse("admin:mcp_tasks_inputrequest_change", args=[question.pk]))
    assert response.status_code == 302
    assert response["Location"] == answer_url(question)


# -- cancelling -------------------------------------------------------------------------------


def cancel_action(client: Client, *tasks: Task) -> Any:
    data = {"action": "cancel_tasks", "_selected_action": [task.pk for task in tasks]}
    return client.post(TASKS, data, follow=True)


@pytest.mark.cancel
def test_cancel_action_cancels_through_the_task_service(as_operator: Client) -> None:
    task = make_task(status=TaskStatus.INPUT_REQUIRED)
    question = ask(task)
    with mock.patch("mcp_tasks.admin.model_admins.service.cancel", wraps=service.cancel) as cancel:
        response = cancel_action(as_operator, task)
    cancel.assert_called_once_with(task.id, None)
    assert "Cancelled 1 task." in text(response)
    task.refresh_from_db()
    question.refresh_from_db()
    assert task.status == TaskStatus.CANCELLED
    assert question.status == InputRequestStatus.CLOSED


@pytest.mark.cancel
def test_cancel_action_leaves_finished_tasks_as_they_are(as_operator: Client) -> None:
    done = make_task(status=TaskStatus.COMPLETED)
    running = make_task()
    response = cancel_action(as_operator, done, running)
    body = text(response)
    assert "Cancelled 1 task." in body
    assert "Left 1 task alone: already finished." in body
    done.refresh_from_db()
    assert done.status == TaskStatus.COMPLETED


@pytest.mark.cancel
def test_cancel_action_needs_the_change_permission(as_viewer: Client) -> None:
    task = make_task()
    assert "cancel_tasks" not in page(as_viewer.get(TASKS))
    with mock.patch("mcp_tasks.admin.model_admins.service.cancel") as cancel:
        cancel_action(as_viewer, task)
    cancel.assert_not_called()
    task.refresh_from_db()
    assert task.status == TaskStatus.WORKING


@pytest.mark.cancel
def test_cancel_action_is_offered_to_operators(as_operator: Client) -> None:
    make_task()
    body = page(as_operator.get(TASKS))
    assert '<option value="cancel_tasks">Cancel selected tasks</option>' in body


# -- waiting questions ------------------------------------------------------------------------


def test_waiting_questions_lists_pending_questions_oldest_first_with_task_and_age(
    as_operator: Client,
) -> None:
    first_task, second_task = make_task("long_report"), make_task("ask_name")
    first = ask(first_task, params={"message": "First question?", "requestedSchema": BOOL_SCHEMA})
    second = ask(
        second_task, params={"message": "Second question?", "requestedSchema": BOOL_SCHEMA}
    )
    answered = ask(
        make_task(), params={"message": "Already answered?", "requestedSchema": BOOL_SCHEMA}
    )
    service.answer(
        answered.task_id,
        answered.key,
        {"action": "decline"},
        principal_scope=None,
        answered_by="client",
    )
    body = page(as_operator.get(QUESTIONS))
    assert "<h1>Waiting questions</h1>" in body
    assert body.index("First question?") < body.index("Second question?")
    assert "Already answered?" not in body
    assert f'href="{task_url(first_task)}"' in body
    assert "ask_name" in body
    assert "0\xa0minutes" in body  # the age
    assert f'href="{answer_url(first)}"' in body and f'href="{answer_url(second)}"' in body


def test_question_list_can_show_every_question(as_operator: Client) -> None:
    answered = ask(
        make_task(), params={"message": "Already answered?", "requestedSchema": BOOL_SCHEMA}
    )
    service.answer(
        answered.task_id,
        answered.key,
        {"action": "decline"},
        principal_scope=None,
        answered_by="client",
    )
    body = page(as_operator.get(QUESTIONS, {"status": "all"}))
    assert "Already answered?" in body
    assert "the MCP client" in body
    assert "<h1>Questions asked by tasks</h1>" in body


def test_question_list_links_to_the_queue_dashboard(as_operator: Client) -> None:
    assert f'href="{reverse("django_rq:home")}"' in page(as_operator.get(QUESTIONS))


# -- django-rq's dashboard in embedded mode ----------------------------------------------------

RQ_DASHBOARD = "/admin/django_rq/dashboard/"


@pytest.fixture
def embedded_quick_start(settings: Any) -> None:
    """The quick start's settings: embedded mode, no RQ_QUEUES."""
    settings.MCP_TASKS = {"EMBEDDED_WORKER": True}
    del settings.RQ_QUEUES


@pytest.fixture
def as_superuser(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("sam", "sam@example.com", "pw"))
    return client


@pytest.mark.usefixtures("embedded_quick_start")
def test_in_embedded_mode_no_page_links_to_the_queue_dashboard(as_operator: Client) -> None:
    ask(make_task())
    for url in (TASKS, QUESTIONS):
        body = page(as_operator.get(url))
        assert "Queue dashboard" not in body
        assert "django-rq" not in body and "django_rq" not in body


@pytest.mark.usefixtures("embedded_quick_start")
def test_in_embedded_mode_the_admin_does_not_list_django_rq(as_superuser: Client) -> None:
    body = page(as_superuser.get("/admin/"))
    assert "MCP tasks" in body
    assert "Django-RQ" not in body and RQ_DASHBOARD not in body


def test_outside_embedded_mode_the_admin_lists_django_rq(as_superuser: Client) -> None:
    assert RQ_DASHBOARD in page(as_superuser.get("/admin/"))


@pytest.mark.usefixtures("embedded_quick_start")
def test_in_embedded_mode_django_rqs_pages_send_staff_to_the_task_list(
    as_superuser: Client,
) -> None:
    for url in (RQ_DASHBOARD, reverse("admin:django_rq_home")):
        response = as_superuser.get(url, follow=True)
        assert response.status_code == 200
        assert response.redirect_chain[-1][0] == TASKS
        assert "django-rq&#x27;s dashboard cannot see it" in page(response)


# -- the Answer page --------------------------------------------------------------------------


def test_answer_page_renders_the_schema_form_with_accept_decline_and_cancel(
    as_operator: Client,
) -> None:
    question = ask(make_task(), params={"message": "Who are you?", "requestedSchema": NAME_SCHEMA})
    body = page(as_operator.get(answer_url(question)))
    assert "Who are you?" in body
    assert 'name="answer-name"' in body
    assert 'name="answer-age"' in body
    assert 'type="number"' in body
    for button in ("_accept", "_decline", "_cancel"):
        assert f'name="{button}"' in body
    assert "csrfmiddlewaretoken" in body


def test_accepted_answer_goes_through_the_service_and_resumes_the_task(
    as_operator: Client, operator: User
) -> None:
    task = make_task(status=TaskStatus.INPUT_REQUIRED)
    question = ask(task)
    with mock.patch("mcp_tasks.admin.model_admins.service.answer", wraps=service.answer) as answer:
        response = as_operator.post(
            answer_url(question), {"answer-value": "on", "_accept": "Accept"}, follow=True
        )
    answer.assert_called_once_with(
        task.id,
        question.key,
        {"action": "accept", "content": {"value": True}},
        principal_scope=None,
        answered_by="admin:olga",
        user=operator,
    )
    body = text(response)
    assert "Answer sent: the task resumes." in body
    assert "Answered by olga (admin) on" in body
    question.refresh_from_db()
    task.refresh_from_db()
    assert question.status == InputRequestStatus.ANSWERED
    assert question.response == {"action": "accept", "content": {"value": True}}
    assert (question.answered_by, question.answered_by_user) == ("admin:olga", operator)
    assert question.answered_at is not None
    assert task.status == TaskStatus.WORKING


def test_unchecked_boolean_is_answered_false(as_operator: Client) -> None:
    question = ask(make_task())
    as_operator.post(answer_url(question), {"_accept": "Accept"})
    question.refresh_from_db()
    assert question.response == {"action": "accept", "content": {"value": False}}


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_need_no_valid_form(as_operator: Client, action: str) -> None:
    question = ask(make_task(), params={"message": "Who are you?", "requestedSchema": NAME_SCHEMA})
    response = as_operator.post(
        answer_url(question), {"answer-name": "", f"_{action}": action.title()}
    )
    assert response.status_code == 302
    question.refresh_from_db()
    assert question.response == {"action": action}


def test_invalid_answer_is_shown_inline_and_not_stored(as_operator: Client) -> None:
    question = ask(make_task(), params={"message": "Who are you?", "requestedSchema": NAME_SCHEMA})
    response = as_operator.post(
        answer_url(question), {"answer-name": "A", "answer-age": "-3", "_accept": "Accept"}
    )
    body = page(response)
    assert "Please correct the errors below." in body
    assert "Ensure this value has at least 2 characters (it has 1)." in body
    assert "Ensure this value is greater than or equal to 0." in body
    assert 'value="A"' in body  # what was typed stays
    question.refresh_from_db()
    assert question.status == InputRequestStatus.PENDING


@pytest.mark.parametrize(
    "typed",
    ['{"a": NaN}', '{"a": [-Infinity]}', '{"a": "x\\u0000y"}', '{"\\ud800": 1}'],
    ids=["nan", "infinity", "nul", "surrogate"],
)
def test_json_that_cannot_be_stored_is_shown_inline_and_not_stored(
    as_operator: Client, typed: str
) -> None:
    schema = {"type": "object", "properties": {"extra": {"type": "object"}}}
    question = ask(make_task(), params={"message": "Anything else?", "requestedSchema": schema})
    response = as_operator.post(answer_url(question), {"answer-extra": typed, "_accept": "Accept"})
    body = page(response)
    assert "Please correct the error below." in body
    assert "Enter JSON without NaN or Infinity" in body
    assert escape(typed) in body  # shown again as typed
    question.refresh_from_db()
    assert question.status == InputRequestStatus.PENDING and question.response is None


def test_answer_the_service_rejects_is_shown_as_an_error(as_operator: Client) -> None:
    question = ask(make_task())
    with mock.patch(
        "mcp_tasks.admin.model_admins.service.answer",
        side_effect=task_contract.InvalidAnswer("value: not allowed today"),
    ):
        response = as_operator.post(
            answer_url(question), {"answer-value": "on", "_accept": "Accept"}
        )
    body = page(response)
    assert "value: not allowed today" in body
    assert 'class="errornote"' in body


def test_answered_question_says_by_whom_and_when_and_accepts_nothing(as_operator: Client) -> None:
    question = ask(make_task())
    service.answer(
        question.task_id,
        question.key,
        {"action": "decline"},
        principal_scope=None,
        answered_by="client",
    )
    question.refresh_from_db()
    body = text(as_operator.get(answer_url(question)))
    assert "Answered by the MCP client on" in body
    assert "accepts no other answer" in body
    assert 'name="_accept"' not in page(as_operator.get(answer_url(question)))
    with mock.patch("mcp_tasks.admin.model_admins.service.answer") as answer:
        response = as_operator.post(
            answer_url(question), {"answer-value": "on", "_accept": "Accept"}, follow=True
        )
    answer.assert_not_called()
    assert "This question is no longer waiting; your answer was not used." in text(response)
    question.refresh_from_db()
    assert question.response == {"action": "decline"}


def test_first_answer_wins_between_two_admins(client: Client, operator: User) -> None:
    second_client = Client()
    second_client.force_login(make_user("sam", *OPERATOR_PERMS))
    client.force_login(operator)
    question = ask(make_task())
    assert 'name="_accept"' in page(client.get(answer_url(question)))
    assert 'name="_accept"' in page(second_client.get(answer_url(question)))
    client.post(answer_url(question), {"answer-value": "on", "_accept": "Accept"})
    response = second_client.post(answer_url(question), {"_decline": "Decline"}, follow=True)
    body = text(response)
    assert "no longer waiting" in body
    assert "Answered by olga (admin) on" in body
    question.refresh_from_db()
    assert question.response == {"action": "accept", "content": {"value": True}}


def test_answer_lost_to_a_concurrent_one_says_so(as_operator: Client) -> None:
    question = ask(make_task())
    with mock.patch("mcp_tasks.admin.model_admins.service.answer", return_value=False):
        response = as_operator.post(answer_url(question), {"_decline": "Decline"}, follow=True)
    assert "This question was answered meanwhile; your answer was not used." in text(response)


def test_timed_out_question_says_so_and_accepts_nothing(as_operator: Client) -> None:
    question = ask(make_task())
    InputRequest.objects.filter(pk=question.pk).update(expires_at=timezone.now())
    assert service.expire_questions() == 1
    body = text(as_operator.get(answer_url(question)))
    assert "Nobody answered in time: the question timed out on" in body
    assert "accepts no answer" in body


@pytest.mark.cancel
def test_question_closed_with_its_task_says_so(as_operator: Client) -> None:
    task = make_task()
    question = ask(task)
    service.cancel(task.id, None)
    body = text(as_operator.get(answer_url(question)))
    assert "The task ended before this question was answered." in body
    assert 'name="_accept"' not in page(as_operator.get(answer_url(question)))


def test_question_of_an_ended_task_accepts_nothing(as_operator: Client) -> None:
    task = make_task()
    question = ask(task)
    Task.objects.filter(pk=task.pk).update(status=TaskStatus.FAILED)  # ended without closing it
    body = page(as_operator.get(answer_url(question)))
    assert "The task has ended (failed); this question accepts no answer." in body
    assert 'name="_accept"' not in body


def test_sampling_question_is_answered_with_the_assistant_s_text(as_operator: Client) -> None:
    params = {
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Write a haiku about queues"}}
        ],
        "systemPrompt": "You are terse.",
        "maxTokens": 50,
    }
    question = ask(make_task(), method="sampling/createMessage", params=params)
    body = page(as_operator.get(answer_url(question)))
    assert "Write a haiku about queues" in body
    assert "You are terse." in body
    assert 'name="_decline"' not in body
    as_operator.post(answer_url(question), {"text": "Jobs wait in a line", "_accept": "Send"})
    question.refresh_from_db()
    assert question.response == {
        "role": "assistant",
        "content": {"type": "text", "text": "Jobs wait in a line"},
        "model": "human-via-admin",
        "stopReason": "endTurn",
    }


def test_roots_question_is_answered_with_uris(as_operator: Client) -> None:
    question = ask(make_task(), method="roots/list", params={})
    as_operator.post(
        answer_url(question), {"roots": "file:///srv/app App\nfile:///tmp", "_accept": "Send"}
    )
    question.refresh_from_db()
    assert question.response == {
        "roots": [{"uri": "file:///srv/app", "name": "App"}, {"uri": "file:///tmp"}]
    }


def test_url_mode_elicitation_shows_the_link_and_can_be_accepted(as_operator: Client) -> None:
    params = {
        "mode": "url",
        "message": "Sign in to the bank",
        "url": "https://bank.example/auth",
        "elicitationId": "e1",
    }
    question = ask(make_task(), params=params)
    assert 'href="https://bank.example/auth"' in page(as_operator.get(answer_url(question)))
    as_operator.post(answer_url(question), {"_accept": "Accept"})
    question.refresh_from_db()
    assert question.response == {"action": "accept", "content": {}}


def test_unknown_question_is_not_found(as_operator: Client) -> None:
    assert (
        as_operator.get(reverse("admin:mcp_tasks_inputrequest_answer", args=[999999])).status_code
        == 404
    )
    assert (
        as_operator.get(reverse("admin:mcp_tasks_inputrequest_answer", args=["nope"])).status_code
        == 404
    )


# -- permissions and CSRF ---------------------------------------------------------------------


def test_staff_without_the_permission_sees_the_question_read_only(as_viewer: Client) -> None:
    question = ask(make_task())
    body = page(as_viewer.get(answer_url(question)))
    assert "Include draft figures?" in body
    assert "You can see this question but not answer it" in body
    assert "<form" not in body.split('id="content-main"')[1]


def test_staff_without_the_permission_cannot_post_an_answer(as_viewer: Client) -> None:
    question = ask(make_task())
    with mock.patch("mcp_tasks.admin.model_admins.service.answer") as answer:
        response = as_viewer.post(answer_url(question), {"answer-value": "on", "_accept": "Accept"})
    assert response.status_code == 403
    answer.assert_not_called()
    question.refresh_from_db()
    assert question.status == InputRequestStatus.PENDING


def test_staff_without_the_permission_sees_tasks_read_only(as_viewer: Client) -> None:
    task = make_task()
    body = page(as_viewer.get(task_url(task)))
    assert "Close" in body
    assert 'name="_save"' not in body


def test_staff_without_any_task_permission_sees_nothing(client: Client) -> None:
    client.force_login(make_user("nobody"))
    question = ask(make_task())
    assert client.get(TASKS).status_code == 403
    assert client.get(answer_url(question)).status_code == 403


def test_anonymous_users_are_sent_to_the_login_page(client: Client) -> None:
    question = ask(make_task())
    response = client.get(answer_url(question))
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_answer_needs_a_csrf_token(operator: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    question = ask(make_task())
    refused = client.post(answer_url(question), {"answer-value": "on", "_accept": "Accept"})
    assert refused.status_code == 403
    question.refresh_from_db()
    assert question.status == InputRequestStatus.PENDING
    token = re.search(
        r'name="csrfmiddlewaretoken" value="([^"]+)"', page(client.get(answer_url(question)))
    )
    assert token is not None
    accepted = client.post(
        answer_url(question),
        {"answer-value": "on", "_accept": "Accept", "csrfmiddlewaretoken": token[1]},
    )
    assert accepted.status_code == 302
    question.refresh_from_db()
    assert question.status == InputRequestStatus.ANSWERED

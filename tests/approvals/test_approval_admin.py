"""The admin's side of staff sign-off, through Django's test client: the Approvals list,
the decision panel on the task page, edits, four eyes, the audit trail and LogEntry, and
403 for operators without the approval's permission."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from mcp_tasks.admin import approvals as admin_approvals
from mcp_tasks.authoring.approval import StaffAudience
from mcp_tasks.models import InputRequest, InputRequestStatus, Task, TaskStatus

from .conftest import BROWSE, ask_staff, make_task, make_user, wait_for_approval

pytestmark = pytest.mark.django_db

APPROVALS = "/admin/mcp_tasks/inputrequest/approvals/"


def decide_url(question: InputRequest) -> str:
    return reverse("admin:mcp_tasks_inputrequest_decide", args=[question.pk])


def task_url(task: Task) -> str:
    return reverse("admin:mcp_tasks_task_change", args=[quote(task.pk)])


def text(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def signed_in(client: Client, user: User) -> Client:
    client.force_login(user)
    return client


def test_the_approvals_list_shows_waiting_ones_first_oldest_first(
    client: Client, approver: User
) -> None:
    first = make_task("refund", {"customer": "first", "amount": 1.0})
    decided = make_task("refund", {"customer": "decided", "amount": 2.0})
    second = make_task("refund", {"customer": "second", "amount": 3.0})
    for task in (first, decided, second):
        wait_for_approval(task)
    signed_in(client, approver).post(
        decide_url(decided.input_requests.get()),
        {"_reject": "1", "approval-reason": "no", "approval-amount": "2.0"},
    )
    page = text(client.get(APPROVALS))
    order = [page.index(f"to {name}") for name in ("first", "second", "decided")]
    assert order == sorted(order)
    assert "2 waiting for a decision" in page
    assert "Rejected by ann" in page


def test_the_task_page_shows_summary_arguments_and_the_buttons(
    client: Client, approver: User, refund_task: Task
) -> None:
    wait_for_approval(refund_task)
    response = signed_in(client, approver).get(task_url(refund_task))
    page = text(response)
    assert "Waiting for approval" in page
    assert "Refund 120.0 EUR to acme" in page
    html = response.content.decode()
    assert 'name="_approve"' in html and 'name="_reject"' in html
    assert 'name="approval-amount"' in html and 'name="approval-customer"' not in html
    assert "Approvals (1)" in page


def test_an_operator_without_the_permission_sees_no_buttons_and_gets_403(
    client: Client, onlooker: User, refund_task: Task
) -> None:
    question = wait_for_approval(refund_task)
    signed_in(client, onlooker)
    page = client.get(task_url(refund_task)).content.decode()
    assert "Refund 120.0 EUR to acme" in page
    assert 'name="_approve"' not in page and "not decide it" in page
    forged = client.post(decide_url(question), {"_approve": "1", "approval-amount": "1"})
    assert forged.status_code == 403
    question.refresh_from_db()
    assert question.status == InputRequestStatus.PENDING and question.decisions == []


def test_approving_with_an_edit_writes_the_trail_and_one_log_entry(
    client: Client, approver: User, refund_task: Task
) -> None:
    question = wait_for_approval(refund_task)
    response = signed_in(client, approver).post(
        decide_url(question),
        {"_approve": "1", "approval-amount": "80", "approval-note": "", "_return_to_task": "1"},
    )
    assert response.status_code == 302 and response["Location"] == task_url(refund_task)
    refund_task.refresh_from_db()
    assert refund_task.arguments["amount"] == 80.0
    (log,) = LogEntry.objects.filter(object_id=refund_task.pk)
    assert log.user == approver
    assert "Approved" in log.change_message and "amount 120.0 → 80.0" in log.change_message
    page = text(client.get(task_url(refund_task)))
    assert "Approved by ann" in page
    assert "amount: 120.0 → 80.0" in page  # the trail on the task page


def test_approving_as_shown_changes_no_argument_left_out_by_the_client(
    client: Client, approver: User, refund_task: Task
) -> None:
    question = wait_for_approval(refund_task)  # no "note": the tool's default applies
    signed_in(client, approver).post(
        decide_url(question), {"_approve": "1", "approval-amount": "120.0", "approval-note": ""}
    )
    question.refresh_from_db()
    refund_task.refresh_from_db()
    assert question.status == InputRequestStatus.ANSWERED
    assert question.decisions[0]["changes"] == {}
    assert refund_task.arguments == {"customer": "acme", "amount": 120.0}
    (log,) = LogEntry.objects.filter(object_id=refund_task.pk)
    assert log.change_message == "Approved"


def test_an_edit_the_schema_refuses_is_not_recorded(
    client: Client, approver: User, refund_task: Task
) -> None:
    question = wait_for_approval(refund_task)
    signed_in(client, approver).post(
        decide_url(question), {"_approve": "1", "approval-amount": "5000"}
    )
    question.refresh_from_db()
    assert question.status == InputRequestStatus.PENDING and question.decisions == []
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("action", ["_reject", "_approve"])
def test_a_reason_with_a_nul_character_is_refused_not_recorded(
    client: Client, approver: User, refund_task: Task, action: str
) -> None:
    question = wait_for_approval(refund_task)
    response = signed_in(client, approver).post(
        decide_url(question), {action: "1", "approval-reason": "dup\x00licate"}, follow=True
    )
    assert "Null characters are not allowed." in text(response)
    question.refresh_from_db()
    refund_task.refresh_from_db()
    assert question.status == InputRequestStatus.PENDING and question.decisions == []
    assert refund_task.status == TaskStatus.WORKING


def test_rejecting_with_a_reason_ends_the_task(
    client: Client, approver: User, refund_task: Task
) -> None:
    question = wait_for_approval(refund_task)
    signed_in(client, approver)
    client.post(decide_url(question), {"_reject": "1", "approval-reason": ""})
    assert Task.objects.get(pk=refund_task.pk).status == TaskStatus.WORKING  # needs a reason
    client.post(decide_url(question), {"_reject": "1", "approval-reason": "wrong customer"})
    refund_task.refresh_from_db()
    assert refund_task.status == TaskStatus.COMPLETED
    assert refund_task.result == {
        "content": [{"type": "text", "text": "Rejected by staff: wrong customer"}],
        "isError": True,
    }
    (log,) = LogEntry.objects.filter(object_id=refund_task.pk)
    assert log.change_message == "Rejected; reason: wrong customer"


def test_four_eyes_in_the_admin(client: Client, approver: User, second_approver: User) -> None:
    task = make_task("erase_customer", {"customer": "acme"})
    question = wait_for_approval(task)
    signed_in(client, approver).post(decide_url(question), {"_approve": "1"})
    page = text(client.get(decide_url(question)))
    assert "1 of 2" in page and "another user must approve" in page
    client.post(decide_url(question), {"_approve": "1"})  # the same user again: refused
    question.refresh_from_db()
    assert len(question.decisions) == 1
    signed_in(client, second_approver).post(decide_url(question), {"_approve": "1"})
    question.refresh_from_db()
    assert question.status == InputRequestStatus.ANSWERED
    assert LogEntry.objects.filter(object_id=task.pk).count() == 2


def test_a_staff_question_is_answered_only_with_its_permission(
    client: Client, refund_task: Task
) -> None:
    question = ask_staff(refund_task, StaffAudience("mcp_tasks.retry_task"))
    url = reverse("admin:mcp_tasks_inputrequest_answer", args=[question.pk])
    answer = {"_accept": "1", "answer-value": "eu"}
    plain = make_user("plain", *BROWSE, "mcp_tasks.answer_inputrequest")
    assert signed_in(client, plain).post(url, answer).status_code == 403
    allowed = make_user("rita", *BROWSE, "mcp_tasks.retry_task")
    assert signed_in(client, allowed).post(url, answer).status_code == 302
    question.refresh_from_db()
    assert question.response == {"action": "accept", "content": {"value": "eu"}}


def test_the_waiting_list_and_header_count_include_approvals(
    client: Client, approver: User, refund_task: Task
) -> None:
    wait_for_approval(refund_task)
    page = text(signed_in(client, approver).get("/admin/mcp_tasks/inputrequest/"))
    assert "Refund 120.0 EUR to acme" in page and "Approval" in page
    assert "Waiting questions (1)" in page


@pytest.mark.parametrize(
    "options",
    [[{"type": "null"}, {"type": "null"}], [{"type": "null"}, True]],
    ids=["null-twice", "boolean-schema"],
)
def test_an_odd_optional_in_a_hand_written_schema_is_left_as_written(
    options: list[Any],
) -> None:
    schema = {"properties": {"limit": {"anyOf": options, "title": "Limit"}}}
    assert admin_approvals._property(schema, "limit") == {"anyOf": options, "title": "Limit"}
    usual = {"properties": {"limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}
    assert admin_approvals._property(usual, "limit") == {"type": "integer"}

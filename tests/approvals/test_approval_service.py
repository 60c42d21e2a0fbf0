"""Staff questions and approvals in the task service: who may answer, what the client
sees, the decisions recorded, four eyes, and the signals."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from mcp_tasks import signals
from mcp_tasks.authoring.approval import WAITING_FOR_STAFF, StaffAudience
from mcp_tasks.core.task_contract import InvalidAnswer
from mcp_tasks.models import Audience, InputRequestStatus, Task, TaskStatus, WaitingFor
from mcp_tasks.tasks.state import approvals, service

from .conftest import ANSWER, BROWSE, ask_staff, make_task, make_user, wait_for_approval

pytestmark = pytest.mark.django_db


def test_a_staff_question_leaves_the_task_working_for_the_client(refund_task: Task) -> None:
    question = wait_for_approval(refund_task)
    refund_task.refresh_from_db()
    assert question.audience == Audience.STAFF
    assert refund_task.status == TaskStatus.WORKING
    assert refund_task.status_message == WAITING_FOR_STAFF
    assert refund_task.waiting_for == WaitingFor.STAFF
    assert service.outstanding_requests(refund_task) == []


def test_the_client_cannot_answer_a_staff_question_on_either_era(refund_task: Task) -> None:
    """``tasks/update`` and a 2025-11-25 reply both reach ``service.answer`` with the
    caller's principal (``Engine.answer``; strict for ``tasks/update``): the key is refused
    exactly like an unknown one (False, nothing stored)."""
    question = ask_staff(refund_task, StaffAudience())
    response = {"action": "accept", "content": {"value": "eu"}}
    for strict in (True, False):  # tasks/update (modern), the legacy reply
        outcomes = [
            service.answer(
                refund_task.id,
                key,
                response,
                principal_scope="anonymous",
                answered_by="client",
                not_found_raises=strict,
            )
            for key in (question.key, "nope")
        ]
        assert outcomes == [False, False]
    question.refresh_from_db()
    assert question.status == InputRequestStatus.PENDING
    assert not service.claim_relay(refund_task.id, question.key)


def test_staff_answer_needs_the_questions_permission_and_group(refund_task: Task) -> None:
    question = ask_staff(refund_task, StaffAudience("mcp_tasks.retry_task", group="oncall"))
    response = {"action": "accept", "content": {"value": "eu"}}
    plain = make_user("plain", *BROWSE, ANSWER)
    outsider = make_user("outsider", *BROWSE, "mcp_tasks.retry_task")
    member = make_user("member", *BROWSE, "mcp_tasks.retry_task", groups=("oncall",))
    for user in (plain, outsider):
        with pytest.raises(service.NotAllowed):
            service.answer(
                refund_task.id,
                question.key,
                response,
                principal_scope=None,
                answered_by="admin",
                user=user,
            )
    assert service.answer(
        refund_task.id,
        question.key,
        response,
        principal_scope=None,
        answered_by="admin:member",
        user=member,
    )
    refund_task.refresh_from_db()
    assert refund_task.waiting_for == WaitingFor.NOTHING
    assert refund_task.status_message == "Answered; resuming"


def test_approve_with_an_edit_changes_the_arguments_and_records_the_decision(
    refund_task: Task, approver: User
) -> None:
    question = wait_for_approval(refund_task)
    decision = approvals.decide(question.pk, approver, approve=True, edits={"amount": 80.0})
    assert decision is not None and decision.final
    question.refresh_from_db()
    refund_task.refresh_from_db()
    assert refund_task.arguments == {"customer": "acme", "amount": 80.0}
    assert question.status == InputRequestStatus.ANSWERED
    assert question.response == {"action": "approve", "arguments": refund_task.arguments}
    assert question.answered_by_user == approver
    (entry,) = question.decisions
    assert entry["action"] == "approve" and entry["user"] == "ann"
    assert entry["changes"] == {"amount": {"from": 120.0, "to": 80.0}}
    assert entry["at"]


def test_an_edit_outside_the_schema_or_the_editable_fields_is_refused(
    refund_task: Task, approver: User
) -> None:
    question = wait_for_approval(refund_task)
    with pytest.raises(InvalidAnswer, match="less than or equal to 1000"):
        approvals.decide(question.pk, approver, approve=True, edits={"amount": 5000.0})
    with pytest.raises(InvalidAnswer, match="customer may not be changed"):
        approvals.decide(question.pk, approver, approve=True, edits={"customer": "evil"})
    question.refresh_from_db()
    assert question.decisions == [] and question.status == InputRequestStatus.PENDING


def test_reject_needs_a_reason_and_completes_the_task_with_an_error(
    refund_task: Task, approver: User
) -> None:
    question = wait_for_approval(refund_task)
    with pytest.raises(InvalidAnswer, match="reason"):
        approvals.decide(question.pk, approver, approve=False, reason=" ")
    approvals.decide(question.pk, approver, approve=False, reason="duplicate claim")
    refund_task.refresh_from_db()
    assert refund_task.status == TaskStatus.COMPLETED
    assert refund_task.result == {
        "content": [{"type": "text", "text": "Rejected by staff: duplicate claim"}],
        "isError": True,
    }
    assert approvals.decide(question.pk, approver, approve=True) is None  # no longer waits


def test_four_eyes_need_two_different_users(approver: User, second_approver: User) -> None:
    task = make_task("erase_customer", {"customer": "acme"})
    question = wait_for_approval(task)
    first = approvals.decide(question.pk, approver, approve=True)
    assert first is not None and not first.final and (first.approvals, first.needed) == (1, 2)
    with pytest.raises(InvalidAnswer, match="already approved"):
        approvals.decide(question.pk, approver, approve=True)
    task.refresh_from_db()
    assert task.status_message == f"{WAITING_FOR_STAFF} (1 of 2 approvals)"
    second = approvals.decide(question.pk, second_approver, approve=True)
    assert second is not None and second.final
    question.refresh_from_db()
    assert [entry["user"] for entry in question.decisions] == ["ann", "bob"]
    assert question.status == InputRequestStatus.ANSWERED


def test_an_edit_by_the_second_approver_restarts_the_count(
    approver: User, second_approver: User
) -> None:
    assert approvals.approvals_in_force(
        [
            {"action": "approve", "user_id": 1, "changes": {}},
            {"action": "approve", "user_id": 2, "changes": {"amount": {"from": 1, "to": 2}}},
        ]
    ) == [2]


def test_deciding_needs_the_approvals_permission(refund_task: Task, onlooker: User) -> None:
    question = wait_for_approval(refund_task)
    with pytest.raises(service.NotAllowed):
        approvals.decide(question.pk, onlooker, approve=True)


def test_signals_fire_for_approvals(
    refund_task: Task, approver: User, django_capture_on_commit_callbacks: Any
) -> None:
    heard: list[tuple[str, Any]] = []

    def asked(sender: Any, task_id: str, question: Any, **kwargs: Any) -> None:
        heard.append(("asked", question.key))

    def answered(sender: Any, task_id: str, question: Any, user: Any, **kwargs: Any) -> None:
        heard.append(("answered", user.get_username()))

    signals.question_asked.connect(asked)
    signals.question_answered.connect(answered)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            question = wait_for_approval(refund_task)
        with django_capture_on_commit_callbacks(execute=True):
            approvals.decide(question.pk, approver, approve=False, reason="no")
    finally:
        signals.question_asked.disconnect(asked)
        signals.question_answered.disconnect(answered)
    assert heard == [("asked", "approval"), ("answered", "ann")]


def test_an_approval_is_mailed_like_a_question(
    refund_task: Task, settings: Any, mailoutbox: list[Any]
) -> None:
    settings.MCP_TASKS = {"NOTIFY_QUESTIONS": True, "SITE_URL": "https://ops.example.com"}
    make_user("mia", *BROWSE, ANSWER).__class__.objects.filter(username="mia").update(
        email="mia@example.com"
    )
    question = wait_for_approval(refund_task)
    from mcp_tasks.tasks.state import question_mail

    assert question_mail.send_due() == 1
    (mail,) = mailoutbox
    assert mail.to == ["mia@example.com"]
    assert "Refund 120.0 EUR to acme" in mail.subject
    assert f"/admin/mcp_tasks/inputrequest/{question.pk}/answer/" in mail.body

"""E-mail to operators about new questions (``mcp_tasks.tasks.state.question_mail``), through Django's
``locmem`` e-mail backend: recipients, content, the link, and the digest rule."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core import mail
from django.test import Client
from django.utils import timezone

from mcp_tasks import signals
from mcp_tasks.authoring.approval import StaffAudience
from mcp_tasks.models import InputRequest, InputRequestStatus, Task
from mcp_tasks.tasks.queues import embedded
from mcp_tasks.tasks.state import question_mail, service
from mcp_tasks.tasks.worker.task_worker import maintain
from tests.support import rows
from tests.support.rows import YES_NO, ask

SITE = "https://ops.example.com"
ON = {"EMBEDDED_WORKER": True, "NOTIFY_QUESTIONS": True, "SITE_URL": SITE}


@pytest.fixture(autouse=True)
def notifications_on(settings: Any) -> Iterator[None]:
    settings.MCP_TASKS = ON
    embedded.connection().flushall()
    yield
    question_mail.flush()
    embedded.connection().flushall()


def perm(codename: str = "answer_inputrequest") -> Permission:
    return Permission.objects.get(content_type__app_label="mcp_tasks", codename=codename)


def user(name: str, *, email: str | None = None, can_answer: bool = True, **flags: Any) -> User:
    flags.setdefault("is_staff", True)
    found = User.objects.create_user(name, email=f"{name}@example.com" if email is None else email)
    User.objects.filter(pk=found.pk).update(**flags)
    if can_answer:
        found.user_permissions.add(perm())
    return User.objects.get(pk=found.pk)


def new_task(tool: str = "build_report") -> Task:
    return rows.new_task(
        tool,
        arguments={"quarter": "Q3"},
        principal_scope="user:7",
        client_info={"name": "claude-code", "version": "2.1"},
    )


def window_passes() -> None:
    """Move every mail time past the digest window."""
    past = timezone.now() - timedelta(seconds=61)
    InputRequest.objects.exclude(notified_at=None).update(notified_at=past)


def link_path(body: Any) -> str:
    found = re.search(rf"Answer: {re.escape(SITE)}(\S+)", str(body))
    assert found is not None, body
    return found[1]


# -- what goes out ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_question_is_mailed_at_once_with_task_question_starter_and_link() -> None:
    user("olga")
    task = new_task()
    question = ask(task)
    question_mail.flush()
    (sent,) = mail.outbox
    assert sent.to == ["olga@example.com"]
    assert sent.subject == "[Django] Task build_report asks: Include draft figures?"
    assert f"Task: build_report {task.id[:8]}…" in sent.body
    assert "Question: Include draft figures?" in sent.body
    assert "Started by: user:7 (client: claude-code 2.1)" in sent.body
    assert f"Answer: {SITE}/admin/mcp_tasks/inputrequest/{question.pk}/answer/" in sent.body
    assert InputRequest.objects.get(pk=question.pk).notified_at is not None


@pytest.mark.django_db(transaction=True)
def test_nothing_is_mailed_when_notifications_are_off(settings: Any) -> None:
    settings.MCP_TASKS = {"EMBEDDED_WORKER": True}
    user("olga")
    ask(new_task())
    question_mail.flush()
    assert question_mail.send_due() == 0
    assert mail.outbox == []


@pytest.mark.django_db
def test_the_receiver_is_connected_only_while_notifications_are_on(settings: Any) -> None:
    assert signals.question_asked.has_listeners(Task)
    settings.MCP_TASKS = {}
    assert not signals.question_asked.has_listeners(Task)


@pytest.mark.django_db
def test_mail_goes_to_active_staff_who_may_answer_and_have_an_address() -> None:
    user("olga")
    group = Group.objects.create(name="operators")
    group.permissions.add(perm())
    user("gus", can_answer=False).groups.add(group)
    user("root", can_answer=False, is_superuser=True)
    user("victor", can_answer=False)  # staff, but may not answer
    user("ivan", is_active=False)
    user("nora", is_staff=False)  # cannot log in to the admin
    user("nomail", email="")
    ask(new_task())
    assert question_mail.send_due() == 1
    assert sorted(sent.to[0] for sent in mail.outbox) == [
        "gus@example.com",
        "olga@example.com",
        "root@example.com",
    ]
    assert all(len(sent.to) == 1 for sent in mail.outbox)  # nobody sees the others' address


def ask_staff(task: Task, permission: str, group: str | None = None) -> InputRequest:
    return ask(task, "Approve the refund?", staff=StaffAudience(permission, group))


@pytest.mark.django_db
def test_a_staff_question_goes_to_the_holders_of_its_permission_only() -> None:
    user("olga")  # may answer the clients' questions, not this one
    user("bill", can_answer=False).user_permissions.add(perm("change_task"))
    user("root", can_answer=False, is_superuser=True)
    user("nostaff", is_staff=False, can_answer=False).user_permissions.add(perm("change_task"))
    ask_staff(new_task(), "mcp_tasks.change_task")
    assert question_mail.send_due() == 1
    assert sorted(sent.to[0] for sent in mail.outbox) == ["bill@example.com", "root@example.com"]


@pytest.mark.django_db
def test_a_staff_question_for_a_group_goes_to_its_members_and_superusers() -> None:
    finance = Group.objects.create(name="finance")
    user("fay").groups.add(finance)
    user("olga")  # holds the permission, not in the group
    user("root", can_answer=False, is_superuser=True)
    ask_staff(new_task(), "mcp_tasks.answer_inputrequest", group="finance")
    question_mail.send_due()
    assert sorted(sent.to[0] for sent in mail.outbox) == ["fay@example.com", "root@example.com"]


@pytest.mark.django_db
def test_each_operator_is_mailed_only_the_questions_they_may_answer() -> None:
    user("olga")
    user("bill", can_answer=False).user_permissions.add(perm("change_task"))
    for_clients = ask(new_task("build_report"))
    for_staff = ask_staff(new_task("refund"), "mcp_tasks.change_task")
    assert question_mail.send_due() == 2
    bodies = {sent.to[0]: sent.body for sent in mail.outbox}
    assert set(bodies) == {"olga@example.com", "bill@example.com"}
    assert f"/{for_clients.pk}/answer/" in bodies["olga@example.com"]
    assert f"/{for_staff.pk}/" not in bodies["olga@example.com"]
    assert f"/{for_staff.pk}/answer/" in bodies["bill@example.com"]
    assert f"/{for_clients.pk}/" not in bodies["bill@example.com"]


@pytest.mark.django_db
def test_a_staff_question_nobody_may_answer_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    user("olga")
    ask(new_task())
    ask_staff(new_task("refund"), "mcp_tasks.change_task")
    with caplog.at_level(logging.WARNING, logger="mcp_tasks.notifications"):
        assert question_mail.send_due() == 1
    assert [sent.to[0] for sent in mail.outbox] == ["olga@example.com"]
    assert "1 question(s) wait, but nobody to e-mail them to" in caplog.text


@pytest.mark.django_db
def test_a_configured_list_replaces_the_permission_holders(settings: Any) -> None:
    settings.MCP_TASKS = {**ON, "NOTIFY_RECIPIENTS": ["oncall@example.com", "lead@example.com"]}
    user("olga")
    ask(new_task())
    question_mail.send_due()
    assert sorted(sent.to[0] for sent in mail.outbox) == [
        "lead@example.com",
        "oncall@example.com",
    ]


@pytest.mark.django_db
def test_nobody_to_mail_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    ask(new_task())
    with caplog.at_level(logging.WARNING, logger="mcp_tasks.notifications"):
        assert question_mail.send_due() == 0
    assert mail.outbox == []
    assert "nobody to e-mail them to" in caplog.text


# -- the digest -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_questions_inside_the_window_go_out_together_once_it_has_passed() -> None:
    user("olga")
    ask(new_task(), "First?")
    assert question_mail.send_due() == 1
    ask(new_task("sync_books"), "Second?")
    ask(new_task("send_invoices"), "Third?")
    assert question_mail.send_due() == 0  # inside the window: gathered
    assert len(mail.outbox) == 1
    window_passes()
    assert question_mail.send_due() == 2
    digest = mail.outbox[1]
    assert digest.subject == "[Django] 2 questions from tasks wait for an answer"
    assert "Question: Second?" in digest.body and "Question: Third?" in digest.body
    assert "First?" not in digest.body
    assert "Task: sync_books" in digest.body and "Task: send_invoices" in digest.body
    assert len(re.findall(r"Answer: https://", str(digest.body))) == 2


@pytest.mark.django_db
def test_each_question_is_mailed_once() -> None:
    user("olga")
    ask(new_task())
    assert question_mail.send_due() == 1
    window_passes()
    assert question_mail.send_due() == 0
    assert len(mail.outbox) == 1


@pytest.mark.django_db
def test_a_question_answered_before_the_digest_is_left_out() -> None:
    user("olga")
    ask(new_task(), "First?")
    question_mail.send_due()
    task = new_task()
    answered = ask(task, "Answered meanwhile?")
    ask(new_task(), "Still waiting?")
    service.answer(
        task.id, answered.key, {"action": "decline"}, principal_scope=None, answered_by="client"
    )
    window_passes()
    assert question_mail.send_due() == 1
    assert "Still waiting?" in mail.outbox[1].body
    assert "Answered meanwhile?" not in mail.outbox[1].body


@pytest.mark.django_db(transaction=True)  # maintain() closes connections, as between runs
def test_the_housekeeping_sends_the_digest() -> None:
    user("olga")
    ask(new_task())
    question_mail.flush()  # mailed at once
    ask(new_task(), "Later?")
    question_mail.flush()  # inside the window: gathered
    assert len(mail.outbox) == 1
    window_passes()
    assert maintain()["questions_mailed"] == 1
    assert "Later?" in mail.outbox[1].body


@pytest.mark.django_db(transaction=True)
def test_a_round_of_questions_asked_at_once_makes_one_mail() -> None:
    user("olga")
    task = new_task()
    questions: list[tuple[str, dict[str, Any], str | None]] = [
        ("elicitation/create", {"message": f"Question {n}?", "requestedSchema": YES_NO}, None)
        for n in range(3)
    ]
    service.ask_all(task.id, 1, questions, "w")
    question_mail.flush()
    (sent,) = mail.outbox
    assert sent.subject.endswith("3 questions from tasks wait for an answer")


# -- the link ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_link_lets_someone_with_the_permission_answer(client: Client) -> None:
    user("olga")
    question = ask(new_task())
    question_mail.send_due()
    path = link_path(mail.outbox[0].body)
    client.force_login(User.objects.get(username="olga"))
    assert "Include draft figures?" in client.get(path).content.decode()
    response = client.post(path, {"answer-value": "on", "_accept": "Accept"})
    assert response.status_code == 302
    assert InputRequest.objects.get(pk=question.pk).status == InputRequestStatus.ANSWERED


@pytest.mark.django_db
def test_the_link_lets_nobody_else_answer(client: Client) -> None:
    user("olga")
    question = ask(new_task())
    question_mail.send_due()
    path = link_path(mail.outbox[0].body)
    assert client.get(path)["Location"].startswith("/admin/login/")  # not logged in
    client.force_login(user("victor", can_answer=False))  # staff without any task permission
    assert client.get(path).status_code == 403
    viewer = user("vera", can_answer=False)
    viewer.user_permissions.add(perm("view_inputrequest"))
    client.force_login(viewer)  # may look, may not answer
    assert "You can see this question but not answer it" in client.get(path).content.decode()
    assert client.post(path, {"answer-value": "on", "_accept": "Accept"}).status_code == 403
    assert InputRequest.objects.get(pk=question.pk).status == InputRequestStatus.PENDING

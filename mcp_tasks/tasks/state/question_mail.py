"""E-mail to operators when tasks ask questions (``MCP_TASKS["NOTIFY_QUESTIONS"]``).

Unmailed questions go out in one mail when none went out in the last
``NOTIFY_DIGEST_WINDOW`` seconds: at once (a :data:`~mcp_tasks.signals.question_asked`
receiver, on a background thread), else as a digest from the housekeeping. Each question is
mailed at most once (claimed in the database); answered ones are left out."""

from __future__ import annotations

import functools
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage
from django.db import connections
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from ... import signals
from ...conf import get_config
from ...models import InputRequest
from . import service
from .service import question_text

logger = logging.getLogger("mcp_tasks.notifications")

ANSWER_PERMISSION = "mcp_tasks.answer_inputrequest"
_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
#: The most questions one mail lists (the rest follow in the next one).
MAX_PER_MAIL = 50

_mailer = ThreadPoolExecutor(1, thread_name_prefix="mcp_tasks-mail")
_lock = threading.Lock()
_scheduled = False


def send_due() -> int:
    """Mail unmailed questions unless the digest window is open; returns how many were listed."""
    config = get_config()
    if not config.NOTIFY_QUESTIONS:
        return 0
    questions = service.claim_questions_to_mail(config.NOTIFY_DIGEST_WINDOW, MAX_PER_MAIL)
    if not questions:
        return 0
    mails = mail_plan(questions)
    listed = {question.pk for theirs in mails.values() for question in theirs}
    if len(listed) < len(questions):
        logger.warning(
            "%d question(s) wait, but nobody to e-mail them to", len(questions) - len(listed)
        )
    for address, theirs in mails.items():
        subject, body = compose(theirs)
        EmailMessage(subject, body, to=[address]).send()
    return len(listed)


def mail_plan(questions: list[InputRequest]) -> dict[str, list[InputRequest]]:
    """Each address with the questions its user may answer (``NOTIFY_RECIPIENTS``: all)."""
    plan: dict[str, list[InputRequest]] = {}
    addresses = functools.cache(recipient_addresses)  # one query per permission and group
    for question in questions:
        for address in addresses(*_who_answers(question)):
            plan.setdefault(address, []).append(question)
    return plan


def _who_answers(question: InputRequest) -> tuple[str, str]:
    if question.for_staff:
        return question.permission or ANSWER_PERMISSION, question.staff_group
    return ANSWER_PERMISSION, ""


def recipient_addresses(permission: str = ANSWER_PERMISSION, group: str = "") -> list[str]:
    """``NOTIFY_RECIPIENTS``, else active staff with ``permission`` in ``group`` (or superusers)."""
    configured = list(get_config().NOTIFY_RECIPIENTS)
    if configured:
        return configured
    user_model = get_user_model()
    field = user_model.get_email_field_name()
    backends = list(settings.AUTHENTICATION_BACKENDS)
    backend = _MODEL_BACKEND if len(backends) > 1 and _MODEL_BACKEND in backends else None
    manager: Any = user_model._default_manager  # Django's UserManager has with_perm()
    users = manager.with_perm(permission, backend=backend).filter(is_staff=True)
    if group:
        users = users.filter(Q(groups__name=group) | Q(is_superuser=True))
    found = users.exclude(**{field: ""}).exclude(**{f"{field}__isnull": True})
    return sorted({str(address) for address in found.values_list(field, flat=True)})


def answer_link(question: InputRequest) -> str:
    """The absolute URL of the question's Answer page in the admin."""
    base = str(get_config().SITE_URL or "").rstrip("/")
    return base + reverse("admin:mcp_tasks_inputrequest_answer", args=[question.pk])


def started_by(question: InputRequest) -> str:
    """Who started the question's task: its principal and, when known, its client."""
    task = question.task
    snapshot = getattr(task, "snapshot", None)
    info = (snapshot.client_info if snapshot is not None else None) or {}
    client = f"{info.get('name', '')} {info.get('version', '')}".strip()
    return f"{task.principal_scope} (client: {client})" if client else task.principal_scope


def compose(questions: list[InputRequest]) -> tuple[str, str]:
    """The subject and plain-text body of a mail listing ``questions``."""
    if len(questions) == 1:
        (only,) = questions
        subject = f"Task {only.task.tool_name} asks: {_question(only)}"[:150]
    else:
        subject = f"{len(questions)} questions from tasks wait for an answer"
    parts = [
        "\n".join(
            [
                f"Task: {q.task.tool_name} {q.task_id[:8]}…",
                f"Question: {_question(q)}",
                f"Started by: {started_by(q)}",
                f"Asked: {timezone.localtime(q.created_at):%Y-%m-%d %H:%M:%S %Z}",
                f"Answer: {answer_link(q)}",
            ]
        )
        for q in questions
    ]
    footer = "Only staff who may answer these questions can open these links."
    return settings.EMAIL_SUBJECT_PREFIX + subject, "\n\n".join([*parts, footer]) + "\n"


def _question(question: InputRequest) -> str:
    return " ".join(question_text(question.method, question.params or {}).split())


# -- sending at once, off the asking thread ---------------------------------------------------


def on_question_asked(sender: Any, **arguments: Any) -> None:
    """``question_asked`` receiver: mail soon, on the mail thread."""
    global _scheduled
    with _lock:
        if _scheduled:
            return  # a run is queued and will see this question too
        _scheduled = True
    _mailer.submit(_run)


def _run() -> None:
    global _scheduled
    with _lock:
        _scheduled = False
    try:
        send_due()
    except Exception:
        logger.exception("could not e-mail new questions")
    finally:
        connections.close_all()  # this thread's own connections


def flush() -> None:
    """Wait until mails already scheduled are sent (tests, shutdown)."""
    done: Future[None] = _mailer.submit(lambda: None)
    done.result()


def connect(**kwargs: Any) -> None:
    """Connect the receiver while notifications are on (start-up, ``setting_changed``)."""
    if kwargs.get("setting", "MCP_TASKS") != "MCP_TASKS":
        return
    user = getattr(settings, "MCP_TASKS", None)  # read here: a broken dict is E003's business
    uid = "mcp_tasks.notifications"
    if isinstance(user, dict) and user.get("NOTIFY_QUESTIONS") is True:
        signals.question_asked.connect(on_question_asked, dispatch_uid=uid)
    else:
        signals.question_asked.disconnect(dispatch_uid=uid)

"""A task's questions (input requests): asked by the tool, answered through one path
(clients, legacy replies, the admin), timed out, mailed, relayed to 2025-11-25 streams."""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ... import jsontext, signals
from ...authoring.approval import (
    APPROVAL_METHOD,
    DEFAULT_PERMISSION,
    WAITING_FOR_STAFF,
    StaffAudience,
)
from ...authoring.inputs import KEY_PREFIXES
from ...conf import get_config
from ...core.db import db
from ...core.task_contract import InvalidAnswer, TaskNotFound
from ...models import Audience, InputRequest, InputRequestStatus, Task, TaskStatus, WaitingFor
from . import outbox, rows
from .changes import expired, locked, status_changed, touch
from .loop_database import LoopDatabase


def outstanding_requests(task: Task) -> list[InputRequest]:
    """The client's questions still waiting, in the order asked (never staff questions)."""
    return list(
        task.input_requests.filter(
            status=InputRequestStatus.PENDING, audience=Audience.CLIENT
        ).order_by("sequence")
    )


async def aoutstanding_requests(task: Task) -> Sequence[InputRequest | rows.WaitingQuestion]:
    """:func:`outstanding_requests` from async code (on PostgreSQL, from the event loop)."""
    database = LoopDatabase.of_running_loop()
    if database is None:
        return await db(outstanding_requests)(task)
    return await rows.awaiting_questions(database, task.id)


class NotAllowed(PermissionError):  # noqa: N818 - reads like PermissionDenied
    """This user may not answer this staff question (its permission or group)."""


def may_answer(user: Any, question: InputRequest) -> bool:
    """Whether ``user`` may answer ``question`` (a staff question's permission and group)."""
    if user is None or not getattr(user, "is_active", False):
        return False
    permission = (question.permission if question.for_staff else "") or DEFAULT_PERMISSION
    if not user.has_perm(permission):
        return False
    if question.for_staff and question.staff_group and not user.is_superuser:
        return bool(user.groups.filter(name=question.staff_group).exists())
    return True


class ReplayMismatch(BaseException):
    """On resume, the tool asked something other than what it asked the first time."""


class TaskEnded(BaseException):
    """The task reached a terminal state while the tool was still running."""


EXPIRED = {"_mcp_tasks": "expired"}


def question_text(method: str, params: dict[str, Any]) -> str:
    """A one-line description of a question, used as the task's ``statusMessage``."""
    if method == "elicitation/create":
        return str(params.get("message") or "Waiting for an answer")[:2000]
    if method == "sampling/createMessage":
        return "Waiting for the client's model to answer"
    if method == APPROVAL_METHOD:
        return str(params.get("message") or "Approve this task")[:2000]
    return "Waiting for the client's roots"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def ask(
    task_id: str,
    sequence: int,
    method: str,
    params: dict[str, Any],
    worker_name: str,
    key: str | None = None,
    staff: StaffAudience | None = None,
) -> InputRequest:
    """One question: :func:`ask_all` of a round of one."""
    (request,) = ask_all(task_id, sequence, [(method, params, key, staff)], worker_name)
    return request


#: One question of a round: ``(method, params, key)``, or with who may answer it (staff).
Asked = (
    tuple[str, dict[str, Any], str | None]
    | tuple[str, dict[str, Any], str | None, StaffAudience | None]
)


def ask_all(
    task_id: str, first_sequence: int, questions: Sequence[Asked], worker_name: str
) -> list[InputRequest]:
    """Record a round of questions from ``first_sequence`` in one transaction: the task goes
    ``input_required`` (staff only: stays ``working``). On replay recorded questions return
    as they are; one that differs raises :class:`ReplayMismatch`."""
    audiences = [question[3] if len(question) > 3 else None for question in questions]
    stored: list[tuple[str, dict[str, Any], str | None]] = [
        (method, *jsontext.storable((params, key), f"a question of task {task_id}"))
        for method, params, key, *_ in questions
    ]
    with transaction.atomic():
        task = locked(task_id)
        if task.is_terminal:
            raise TaskEnded(task_id)
        recorded = list(task.input_requests.all())
        by_sequence = {request.sequence: request for request in recorded}
        used_keys = {request.key for request in recorded}
        now = timezone.now()
        round_: list[InputRequest] = []
        new: list[InputRequest] = []
        for offset, ((method, params, key), staff) in enumerate(
            zip(stored, audiences, strict=True)
        ):
            sequence = first_sequence + offset
            existing = by_sequence.get(sequence)
            if existing is not None:
                _check_replay(existing, sequence, method, params)
                round_.append(existing)
                continue
            if key is None or key in used_keys:
                # Keys are unique for the task's whole life, so a repeated key gets a suffix.
                key = suffixed_key(method, sequence, key)
            request = new_question(task_id, sequence, method, params, key, now)
            request.task = task
            used_keys.add(request.key)
            if staff is not None:
                request.audience = Audience.STAFF
                request.permission = staff.permission
                request.staff_group = staff.group or ""
                if staff.timeout is not None:
                    request.expires_at = now + timedelta(seconds=staff.timeout)
            round_.append(request)
            new.append(request)
        if new:
            InputRequest.objects.bulk_create(new)
            tell_asked(task_id, task.status, new)
            for_client = [request for request in new if not request.for_staff]
            if for_client:
                last = for_client[-1]
                touch(
                    task,
                    status=TaskStatus.INPUT_REQUIRED,
                    status_message=question_text(last.method, last.params),
                    waiting_worker=worker_name[:255],
                )
            else:
                # Only staff may answer: the client sees its task working, waiting for staff.
                touch(
                    task,
                    status_message=WAITING_FOR_STAFF,
                    waiting_for=WaitingFor.STAFF,
                    waiting_worker=worker_name[:255],
                )
    return round_


def tell_asked(task_id: str, status: str, new: Sequence[InputRequest]) -> None:
    """Tell, after commit, that a task in ``status`` asked ``new`` (input required if any is
    for the client)."""
    if any(not request.for_staff for request in new):
        status_changed(task_id, status, TaskStatus.INPUT_REQUIRED)
    outbox.announce(task_id, "question_asked")
    if signals.listened(signals.question_asked):
        for request in new:
            outbox.signal(signals.question_asked, task_id=task_id, question=request)


def suffixed_key(method: str, sequence: int, key: str | None = None) -> str:
    """A unique question key: ``key`` (else the method's prefix), number, random hex."""
    return f"{key or KEY_PREFIXES.get(method, 'input')}-{sequence}-{secrets.token_hex(4)}"


def new_question(
    task_id: str, sequence: int, method: str, params: dict[str, Any], key: str, now: datetime
) -> InputRequest:
    """A client's question asked ``now`` (unsaved); it times out after ``INPUT_TIMEOUT``."""
    return InputRequest(
        task_id=task_id,
        key=key[:100],
        sequence=sequence,
        method=method,
        params=params,
        created_at=now,
        expires_at=now + timedelta(seconds=get_config().INPUT_TIMEOUT),
    )


def _check_replay(
    existing: InputRequest, sequence: int, method: str, params: dict[str, Any]
) -> None:
    if existing.method != method or _canonical(existing.params) != _canonical(params):
        raise ReplayMismatch(
            f"on resume the tool asked question {sequence} differently "
            f"(first: {existing.method} {question_text(existing.method, existing.params)!r}; "
            f"now: {method} {question_text(method, params)!r}); code before a question "
            "must ask the same questions in the same order when the task resumes"
        )


def withdraw(task_id: str, key: str) -> None:
    """Close a question that could not be announced; the task goes back to working."""
    with transaction.atomic():
        task = locked(task_id)
        task.input_requests.filter(key=key, status=InputRequestStatus.PENDING).update(
            status=InputRequestStatus.CLOSED
        )
        if (
            not task.is_terminal
            and not task.input_requests.filter(status=InputRequestStatus.PENDING).exists()
        ):
            status_changed(task_id, task.status, TaskStatus.WORKING)
            touch(
                task,
                status=TaskStatus.WORKING,
                status_message="Working",
                waiting_worker="",
                waiting_for=WaitingFor.NOTHING,
            )
            outbox.publish(task)


def answer_in(request: InputRequest) -> Any:
    """A question's answer: None while it waits, :data:`EXPIRED` when closed unanswered."""
    if request.status == InputRequestStatus.PENDING:
        return None
    return request.response if request.response is not None else EXPIRED


def answers_of(task_id: str, keys: list[str | None]) -> list[Any]:
    """The answers to ``keys`` in one query (None: no key, unknown, or still waiting)."""
    found = {
        request.key: answer_in(request)
        for request in InputRequest.objects.filter(
            task_id=task_id, key__in=[k for k in keys if k]
        ).only("key", "status", "response")
    }
    return [found.get(key) if key else None for key in keys]


def claim_questions_to_mail(window: float, limit: int) -> list[InputRequest]:
    """Up to ``limit`` waiting questions not yet mailed (oldest first), marked mailed so no
    other process mails them; none if a mail went out in the last ``window`` seconds."""
    now = timezone.now()
    if InputRequest.objects.filter(notified_at__gt=now - timedelta(seconds=window)).exists():
        return []
    waiting = InputRequest.objects.filter(status=InputRequestStatus.PENDING, notified_at=None)
    ids = list(waiting.order_by("created_at", "id").values_list("pk", flat=True)[:limit])
    if not ids:
        return []
    waiting.filter(pk__in=ids).update(notified_at=now)
    return list(
        InputRequest.objects.filter(pk__in=ids, notified_at=now)
        .select_related("task__snapshot")
        .order_by("created_at", "id")
    )


def release(task_id: str) -> bool:
    """Stop waiting: True if all was answered (go on), else the task is let go until then."""
    with transaction.atomic():
        task = locked(task_id)
        if not task.input_requests.filter(status=InputRequestStatus.PENDING).exists():
            return True
        touch(task, waiting_worker="")
    return False


def claim_relay(task_id: str, key: str) -> bool:
    """Reserve a waiting question for one 2025-11-25 stream to send (the client is asked once)."""
    claimed = InputRequest.objects.filter(
        task_id=task_id,
        key=key,
        status=InputRequestStatus.PENDING,
        relayed_at__isnull=True,
        audience=Audience.CLIENT,
    ).update(relayed_at=timezone.now())
    return bool(claimed)


def release_relay(task_id: str, key: str) -> None:
    """The stream that sent the question ended without an answer: another may send it."""
    InputRequest.objects.filter(task_id=task_id, key=key, status=InputRequestStatus.PENDING).update(
        relayed_at=None
    )


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """A checked JSON Schema validator for a question's ``requestedSchema`` (built once)."""
    import jsonschema  # type: ignore[import-untyped]

    schema = json.loads(schema_json)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema, format_checker=jsonschema.FormatChecker())


def validate_answer(request: InputRequest, response: Any) -> dict[str, Any]:
    """Check an answer against its question; raises :class:`InvalidAnswer`."""
    import jsonschema

    if not isinstance(response, dict):
        raise InvalidAnswer("an answer must be a JSON object")
    if request.method == "elicitation/create":
        action = response.get("action")
        if action not in ("accept", "decline", "cancel"):
            raise InvalidAnswer("action must be 'accept', 'decline' or 'cancel'")
        if action != "accept":
            return {"action": action}
        content = response.get("content") or {}
        schema = request.params.get("requestedSchema") or {"type": "object"}
        error = jsonschema.exceptions.best_match(
            _validator(_canonical(schema)).iter_errors(content)
        )
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path)
            raise InvalidAnswer(f"{where + ': ' if where else ''}{error.message}")
        return {"action": "accept", "content": content}
    if request.method == "sampling/createMessage":
        import mcp_types as types

        try:
            types.CreateMessageResult.model_validate(response)
        except Exception as exc:
            raise InvalidAnswer(f"not a sampling result: {exc}") from None
        return response
    if request.method == "roots/list":
        if not isinstance(response.get("roots"), list):
            raise InvalidAnswer("a roots answer needs a 'roots' list")
        import mcp_types as types

        try:  # what the tool reads (RootsInput.read): its roots, file URIs
            types.ListRootsResult.model_validate(response)
        except Exception as exc:
            raise InvalidAnswer(f"not a roots result: {exc}") from None
    return response


def after_answer(
    task: Task, *, others_pending: bool | None = None, answered: InputRequest | None = None
) -> None:
    """The questions changed: resume the task once none waits (``answered``: the one just in)."""
    if others_pending is None:
        others_pending = task.input_requests.filter(status=InputRequestStatus.PENDING).exists()
    if others_pending:
        touch(task)
        outbox.publish(task)
        return
    status_changed(task.id, task.status, TaskStatus.WORKING)
    if task.waiting_worker:
        # A worker holds the task in its hold window: wake it.
        touch(
            task,
            status=TaskStatus.WORKING,
            status_message="Answered",
            waiting_for=WaitingFor.NOTHING,
        )
        answers = None
        if answered is not None and answered.response is not None:
            answers = {answered.key: answered.response}
        outbox.publish(task, wake=True, answers=answers)
        return
    touch(
        task,
        status=TaskStatus.WORKING,
        status_message="Answered; resuming",
        runs=task.runs + 1,
        heartbeat_at=None,
        waiting_for=WaitingFor.NOTHING,
    )
    outbox.publish(task)
    # robust: the answer stands; a resume job not queued now is requeued after TASK_REQUEUE_AFTER.
    outbox.enqueue(task, robust=True)


def answer(
    task_id: str,
    key: str,
    response: Any,
    *,
    principal_scope: str | None,
    answered_by: str,
    user: Any = None,
    not_found_raises: bool = False,
) -> bool:
    """The one answer path (clients, legacy replies, the admin: ``principal_scope`` None).
    False when the task is not the principal's or ended, or the question does not wait for
    this caller (first wins). Raises :class:`TaskNotFound` (``not_found_raises``),
    :class:`InvalidAnswer` (unfit, or an approval: :func:`.approvals.decide`), NotAllowed."""
    with transaction.atomic():
        task = rows.locked_task(task_id, principal_scope)
        if not_found_raises and (task is None or expired(task)):
            raise TaskNotFound(task_id)
        if task is None or task.is_terminal:
            return False
        # The row lock serialises changes of its questions: one read finds both.
        waiting = list(
            task.input_requests.filter(Q(key=key) | Q(status=InputRequestStatus.PENDING))
        )
        request = next((r for r in waiting if r.key == key), None)
        if request is None or request.status != InputRequestStatus.PENDING:
            return False
        if request.for_staff:
            if principal_scope is not None:
                return False  # the client never saw it: as for an unknown key
            if request.method == APPROVAL_METHOD:
                raise InvalidAnswer("an approval is decided with Approve or Reject")
            if not may_answer(user, request):
                raise NotAllowed(request.permission)
        store_answer(request, validate_answer(request, response), answered_by, user)
        after_answer(task, others_pending=len(waiting) > 1, answered=request)
    return True


def store_answer(
    request: InputRequest, response: Any, answered_by: str, user: Any, *also: str
) -> None:
    """The one place an answer is written (task row locked; ``also``: other changed
    fields), told after commit; the caller then resumes (:func:`after_answer`) or ends it."""
    request.response = response
    request.status = InputRequestStatus.ANSWERED
    request.answered_by = answered_by[:255]
    request.answered_by_user = user if getattr(user, "pk", None) else None
    request.answered_at = timezone.now()
    request.save(
        update_fields=[
            *also,
            "response",
            "status",
            "answered_by",
            "answered_by_user",
            "answered_at",
        ]
    )
    tell_answered(request)


def tell_answered(request: InputRequest) -> None:
    """Tell, after commit, that ``request`` was answered."""
    outbox.announce(request.task_id, "question_answered")
    outbox.signal(
        signals.question_answered,
        task_id=request.task_id,
        question=request,
        answered_by=request.answered_by,
        user=request.answered_by_user,
    )


def expire_questions() -> int:
    """Questions past ``INPUT_TIMEOUT`` are closed; the tool sees a cancellation."""
    count = 0
    for request in InputRequest.objects.filter(
        status=InputRequestStatus.PENDING, expires_at__lte=timezone.now()
    ):
        with transaction.atomic():
            task = locked(request.task_id)
            updated = InputRequest.objects.filter(
                pk=request.pk, status=InputRequestStatus.PENDING
            ).update(status=InputRequestStatus.EXPIRED, answered_at=timezone.now())
            if updated and not task.is_terminal:
                after_answer(task)
                count += 1
    return count

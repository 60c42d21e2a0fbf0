"""The task admin's operator actions: retry a failed task (``mcp_tasks.retry_task``), and
answer a task's only open question from its page (posted to the question's Answer page, the
one answer path, which comes back)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.utils.html import format_html

from ..authoring.approval import APPROVAL_METHOD
from ..core import task_contract
from ..models import InputRequest, InputRequestStatus, Task, TaskStatus
from ..tasks.state import crypto, service
from ..tasks.state.lifecycle import NotRetryable, retry
from .forms import ELICIT, answer_adminform, answer_form, answer_url, task_links, task_url

RETRY_PERMISSION = "mcp_tasks.retry_task"
#: The hidden field that brings an answer given on the task page back to the task page.
RETURN_TO_TASK = "_return_to_task"


def tasks_text(count: int) -> str:
    """``count`` tasks in words: "1 task", "2 tasks"."""
    return f"{count} task{'' if count == 1 else 's'}"


def can_retry(request: HttpRequest) -> bool:
    return request.user.has_perm(RETRY_PERMISSION)


def _retry_one(request: HttpRequest, task_id: str) -> Task | None:
    """Retry ``task_id``; tell the operator why not when it cannot be."""
    try:
        return retry(task_id)
    except task_contract.TaskNotFound:
        messages.error(request, "No such task.")
    except NotRetryable as exc:
        messages.warning(request, f"Task {task_id[:8]}… was not retried: {exc}.")
    except crypto.SnapshotDecryptionError:
        messages.error(
            request,
            f"Task {task_id[:8]}… was not retried: its snapshot cannot be decrypted "
            "(SECRET_KEY changed without SECRET_KEY_FALLBACKS).",
        )
    except RuntimeError as exc:  # the queue is unavailable: the new task failed at once
        messages.error(request, f"Task {task_id[:8]}… was not retried: {exc}.")
    return None


def retry_view(
    model_admin: admin.ModelAdmin[Task], request: HttpRequest, object_id: str
) -> HttpResponse:
    """POST only: retry the task and show the new one."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not model_admin.has_view_permission(request) or not can_retry(request):
        raise PermissionDenied
    task_id = unquote(object_id)
    new = _retry_one(request, task_id)
    if new is None:
        return HttpResponseRedirect(task_url(task_id))
    messages.success(request, f"Retrying task {task_id[:8]}… as this new task.")
    return HttpResponseRedirect(task_url(new.id))


def retry_tasks(request: HttpRequest, queryset: QuerySet[Task]) -> None:
    """The list action: retry every failed task selected, skip the others."""
    failed = queryset.filter(status=TaskStatus.FAILED).values_list("id", flat=True)
    retried = [new for task_id in failed if (new := _retry_one(request, task_id)) is not None]
    skipped = queryset.exclude(status=TaskStatus.FAILED).count()
    if retried:
        links = task_links(new.id for new in retried)
        messages.success(request, format_html("Retried {}: {}.", tasks_text(len(retried)), links))
    if skipped:
        messages.warning(request, f"Left {skipped} task(s) alone: only failed tasks are retried.")


def quick_answer(request: HttpRequest, task_id: str) -> dict[str, Any] | None:
    """The task page's answer form, when its only open question is one the operator may answer."""
    waiting = list(
        InputRequest.objects.filter(task_id=task_id, status=InputRequestStatus.PENDING)
        .select_related("task")
        .order_by("sequence")[:2]
    )
    if len(waiting) != 1 or waiting[0].task.is_terminal:
        return None
    (question,) = waiting
    if question.method == APPROVAL_METHOD or not service.may_answer(request.user, question):
        return None  # an approval has its own panel
    form = answer_form(question, None)
    return {
        "question": question,
        "text": service.question_text(question.method, question.params or {}),
        "url": answer_url(question),
        "form": form,
        "adminform": answer_adminform(form),
        "is_elicitation": question.method == ELICIT,
        "return_field": RETURN_TO_TASK,
    }


def after_answer(request: HttpRequest, question: InputRequest) -> HttpResponse:
    """After a POST: back to the task page when the answer came from there, else the same page."""
    if request.POST.get(RETURN_TO_TASK):
        return HttpResponseRedirect(task_url(question.task_id))
    return HttpResponseRedirect(request.path)

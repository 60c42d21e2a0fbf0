"""The admin's questions: the waiting questions and the Answer page, answering through
:func:`mcp_tasks.tasks.state.service.answer` (needs ``mcp_tasks.answer_inputrequest``)."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from ..authoring.approval import APPROVAL_METHOD
from ..core import task_contract
from ..models import InputRequest, InputRequestStatus
from ..tasks.state import service
from . import actions as admin_actions, approvals as admin_approvals, forms as admin_forms
from .forms import ELICIT, SAMPLE, answer_adminform, answer_form, task_url
from .model_admins import (
    KINDS,
    QuestionColumns,
    ReadOnly,
    answerer,
    live_context,
    pretty_json,
)
from .rq_dashboard import queue_dashboard_url


class QuestionStatusFilter(admin.SimpleListFilter):
    """Status, waiting by default (``?status=all`` lists every question)."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), str(label)) for value, label in InputRequestStatus.choices]

    def value(self) -> str:
        return super().value() or InputRequestStatus.PENDING

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value == "all" else queryset.filter(status=value)

    def choices(self, changelist: Any) -> Any:
        current = self.value()
        for value, label in [("all", "All"), *self.lookup_choices]:
            yield {
                "selected": current == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }


@admin.register(InputRequest)
class InputRequestAdmin(ReadOnly, QuestionColumns, admin.ModelAdmin):  # type: ignore[type-arg]
    """Waiting questions (by default, oldest first) and the Answer page, also the detail page."""

    list_display = (
        "question",
        "kind",
        "task_link",
        "tool",
        "age",
        "status",
        "answered",
        "answer_link",
    )
    list_display_links = None
    list_filter = (QuestionStatusFilter, "method")
    list_select_related = ("task", "answered_by_user")
    search_fields = ("^task__id", "task__tool_name", "key")
    ordering = ("created_at", "id")

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("approvals/", wrap(self.approvals_view), name="mcp_tasks_inputrequest_approvals"),
            path(
                "<path:object_id>/answer/",
                wrap(self.answer_view),
                name="mcp_tasks_inputrequest_answer",
            ),
            path(
                "<path:object_id>/decide/",
                wrap(self.decide_view),
                name="mcp_tasks_inputrequest_decide",
            ),
            *super().get_urls(),
        ]

    def approvals_view(self, request: HttpRequest) -> HttpResponse:
        extra = {"mcp_live": live_context(), "queue_dashboard_url": queue_dashboard_url()}
        return admin_approvals.approvals_view(self, request, extra)

    def decide_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return admin_approvals.decide_view(self, request, object_id, {"mcp_live": live_context()})

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        waiting = (
            request.GET.get("status", InputRequestStatus.PENDING) == InputRequestStatus.PENDING
        )
        context = {
            "title": "Waiting questions" if waiting else "Questions asked by tasks",
            "approvals_url": admin_approvals.approvals_url(),
            "approvals_waiting": admin_approvals.waiting_approvals(),
            "queue_dashboard_url": queue_dashboard_url(),
            "mcp_live": live_context(),
            **(extra_context or {}),
        }
        return super().changelist_view(request, context)

    def change_view(
        self, request: HttpRequest, object_id: str, *args: Any, **kwargs: Any
    ) -> HttpResponse:
        """A question has no edit form: its page is the answer page."""
        return HttpResponseRedirect(
            reverse("admin:mcp_tasks_inputrequest_answer", args=[object_id])
        )

    @admin.display(description="task", ordering="task__id")
    def task_link(self, obj: InputRequest) -> SafeString:
        return format_html(
            '<a href="{}" data-task-id="{}">{}…</a>',
            task_url(obj.task_id),
            obj.task_id,
            obj.task_id[:8],
        )

    @admin.display(description="tool", ordering="task__tool_name")
    def tool(self, obj: InputRequest) -> str:
        return obj.task.tool_name

    @admin.display(description="age", ordering="created_at")
    def age(self, obj: InputRequest) -> str:
        return timesince(obj.created_at)

    def answer_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        question = admin_forms.question_or_404(object_id, "No such question.")
        if not self.has_view_permission(request, question):
            raise PermissionDenied
        if question.method == APPROVAL_METHOD:
            return HttpResponseRedirect(admin_approvals.decide_url(question))
        answerable = question.status == InputRequestStatus.PENDING and not question.task.is_terminal
        form = answer_form(question, request.POST if request.method == "POST" else None)
        if request.method == "POST":
            if not service.may_answer(request.user, question):
                raise PermissionDenied
            if not answerable:
                messages.warning(
                    request, "This question is no longer waiting; your answer was not used."
                )
                return admin_actions.after_answer(request, question)
            action = next((a for a in ("decline", "cancel") if f"_{a}" in request.POST), "accept")
            response = answer_from(action, question, form)
            if response is not None:
                try:
                    accepted = service.answer(
                        question.task_id,
                        question.key,
                        response,
                        principal_scope=None,
                        answered_by=f"admin:{request.user.get_username()}",
                        user=request.user,
                    )
                except task_contract.InvalidAnswer as exc:
                    form.add_error(None, str(exc))
                except service.NotAllowed:
                    raise PermissionDenied from None
                else:
                    if accepted:
                        messages.success(request, "Answer sent: the task resumes.")
                    else:
                        messages.warning(
                            request,
                            "This question was answered meanwhile; your answer was not used.",
                        )
                    return admin_actions.after_answer(request, question)
        context = self.answer_context(request, question, form, answerable)
        return TemplateResponse(request, "admin/mcp_tasks/inputrequest/answer.html", context)

    def answer_context(
        self, request: HttpRequest, question: InputRequest, form: forms.Form, answerable: bool
    ) -> dict[str, Any]:
        params = question.params or {}
        return {
            **self.admin_site.each_context(request),
            "title": "Answer a question" if answerable else "Question",
            "opts": self.opts,
            "question": question,
            "task": question.task,
            "params": params,
            "kind": KINDS.get(question.method, question.method),
            "is_elicitation": question.method == ELICIT,
            "is_url_mode": params.get("mode") == "url",
            "messages_json": pretty_json(params.get("messages"))
            if question.method == SAMPLE
            else None,
            "answerable": answerable,
            "can_answer": service.may_answer(request.user, question),
            "answerer": answerer(question),
            "response_json": pretty_json(question.response),
            "form": form,
            "adminform": answer_adminform(form),
            "errors": helpers.AdminErrorList(cast(Any, form), []) if form.is_bound else [],
            "media": self.media + form.media,
        }


def answer_from(action: str, question: InputRequest, form: forms.Form) -> dict[str, Any] | None:
    """The answer for the button pressed; None while the form has errors."""
    if question.method == ELICIT and action in ("decline", "cancel"):
        return {"action": action}
    if not form.is_valid():
        return None
    if isinstance(form, admin_forms.SamplingForm | admin_forms.RootsForm):
        return form.result()
    if isinstance(form, admin_forms.ElicitationForm):
        return {"action": "accept", "content": form.content()}
    return {"action": "accept"}

"""Staff sign-off in the admin: the Approvals list, the decision panel (task page and the
approval's own page) and the decision, made through
:func:`mcp_tasks.tasks.state.approvals.decide` and logged (``LogEntry``) in its transaction."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from ..authoring.approval import APPROVAL_METHOD
from ..authoring.registry import mcp
from ..core.task_contract import InvalidAnswer
from ..models import InputRequest, InputRequestStatus, Task
from ..tasks.state import approvals, service
from .actions import RETURN_TO_TASK
from .forms import field_for, json_value, question_or_404, task_url

#: How many decided approvals the Approvals list shows below the waiting ones.
RECENT = 50


def decide_url(question: InputRequest) -> str:
    return reverse("admin:mcp_tasks_inputrequest_decide", args=[question.pk])


def approvals_url() -> str:
    return reverse("admin:mcp_tasks_inputrequest_approvals")


def waiting_approvals() -> int:
    """How many approvals wait for a decision."""
    return InputRequest.objects.filter(
        method=APPROVAL_METHOD, status=InputRequestStatus.PENDING
    ).count()


class DecisionForm(forms.Form):
    """The editable arguments (built from the tool's input schema) and a reason."""

    reason = forms.CharField(
        label="Reason",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Required to reject: the client reads it.",
    )

    editable: tuple[str, ...] = ()

    def edits(self) -> dict[str, Any]:
        """The editable arguments the operator changed, with their values (call after
        ``is_valid()``): a field left as shown (an argument not given shows its default) is
        no edit."""
        return {
            name: json_value(self.cleaned_data[name])
            for name in self.editable
            if name in self.changed_data
        }


def _property(schema: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The schema of argument ``name``, with a ``$ref`` or an ``Optional`` resolved."""
    prop = dict((schema.get("properties") or {}).get(name) or {})
    defs = schema.get("$defs") or {}
    if "$ref" in prop:
        prop = {**defs.get(str(prop.pop("$ref")).rsplit("/", 1)[-1], {}), **prop}
    options = prop.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options and len(options) == 2:
        inner = [option for option in options if option != {"type": "null"}]
        if len(inner) == 1 and isinstance(inner[0], dict):  # a hand-written schema may not be
            prop = {**inner[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
    return prop


def decision_form(question: InputRequest, arguments: Mapping[str, Any], data: Any) -> DecisionForm:
    """An approval's decision form: a field per editable argument, holding its current value."""
    params = question.params or {}
    editable = tuple(params.get("editable") or [])
    tool = mcp.tools.get(question.task.tool_name)
    schema = tool.input_schema if tool is not None else {}
    required = set(schema.get("required") or [])
    fields: dict[str, forms.Field] = {}
    for name in editable:
        field = field_for(name, _property(schema, name), required=name in required)
        if name in arguments:
            field.initial = arguments[name]
        fields[name] = field
    form_class = type("ApprovalForm", (DecisionForm,), {**fields, "editable": editable})
    form: DecisionForm = form_class(data, prefix="approval")
    form.order_fields([*editable, "reason"])
    return form


def summary_of(question: InputRequest, arguments: Mapping[str, Any]) -> str:
    """The approval's summary with the arguments as they are now."""
    tool = mcp.tools.get(question.task.tool_name)
    if tool is not None and tool.approval is not None:
        return tool.approval.render(arguments)
    return service.question_text(question.method, question.params or {})


def _when(value: Any) -> Any:
    """A recorded time (ISO 8601) as a datetime, shown like every other date; else as is."""
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return value


def trail(question: InputRequest) -> list[dict[str, Any]]:
    """The decisions recorded on an approval, oldest first, ready to show."""
    return [
        {
            **entry,
            "at": _when(entry.get("at")),
            "changes_text": ", ".join(
                f"{name}: {json.dumps(change.get('from'))} → {json.dumps(change.get('to'))}"
                for name, change in (entry.get("changes") or {}).items()
            ),
        }
        for entry in question.decisions or []
    ]


def panel(request: HttpRequest, question: InputRequest, *, on_task_page: bool) -> dict[str, Any]:
    """What the decision panel shows (``admin/mcp_tasks/approval_panel.html``)."""
    task = question.task
    arguments = dict(task.arguments or {})
    waiting = question.status == InputRequestStatus.PENDING and not task.is_terminal
    allowed = service.may_answer(request.user, question)
    in_force = approvals.approvals_in_force(list(question.decisions or []))
    needed = int((question.params or {}).get("approvers") or 1)
    return {
        "question": question,
        "task": task,
        "summary": summary_of(question, arguments),
        "arguments": json.dumps(arguments, indent=2, ensure_ascii=False, default=str),
        "waiting": waiting,
        "can_decide": waiting and allowed,
        "already_approved": request.user.pk in in_force,
        "approvals": len(in_force),
        "needed": needed,
        "permission": question.permission,
        "group": question.staff_group,
        "form": decision_form(question, arguments, None) if waiting and allowed else None,
        "url": decide_url(question),
        "trail": trail(question),
        "return_field": RETURN_TO_TASK if on_task_page else "",
    }


def task_panel(request: HttpRequest, task_id: str) -> dict[str, Any] | None:
    """The task page's approval panel, when its task has an approval."""
    question = (
        InputRequest.objects.filter(task_id=task_id, method=APPROVAL_METHOD)
        .select_related("task", "answered_by_user")
        .first()
    )
    return None if question is None else panel(request, question, on_task_page=True)


def _log(user: Any, task: Task, decision: approvals.Decision) -> None:
    entry = decision.entry
    words = "Approved" if entry["action"] == "approve" else "Rejected"
    if entry["action"] == "approve" and not decision.final:
        words += f" ({decision.approvals} of {decision.needed} approvals)"
    if entry.get("changes"):
        words += "; changed " + ", ".join(
            f"{name} {json.dumps(c['from'])} → {json.dumps(c['to'])}"
            for name, c in entry["changes"].items()
        )
    if entry.get("reason"):
        words += f"; reason: {entry['reason']}"
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[task],
        action_flag=CHANGE,
        change_message=words[:2000],
        single_object=True,
    )


def decide_view(
    model_admin: admin.ModelAdmin[InputRequest],
    request: HttpRequest,
    object_id: str,
    extra_context: dict[str, Any],
) -> HttpResponse:
    """GET: the approval's page (summary, arguments, the trail, the panel); POST: decide."""
    question = question_or_404(object_id, "No such approval.", method=APPROVAL_METHOD)
    if not model_admin.has_view_permission(request, question):
        raise PermissionDenied
    if request.method == "POST":
        return _post(request, question)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Approve a task",
        "opts": model_admin.opts,
        "approval": panel(request, question, on_task_page=False),
        "approvals_url": approvals_url(),
        **extra_context,
    }
    return TemplateResponse(request, "admin/mcp_tasks/inputrequest/approval.html", context)


def _post(request: HttpRequest, question: InputRequest) -> HttpResponse:
    if not service.may_answer(request.user, question):
        raise PermissionDenied
    back = task_url(question.task_id) if request.POST.get(RETURN_TO_TASK) else decide_url(question)
    approve = "_approve" in request.POST
    if not approve and "_reject" not in request.POST:
        messages.error(request, "Choose Approve or Reject.")
        return HttpResponseRedirect(back)
    edits: dict[str, Any] = {}
    try:  # the form's own rules (no NUL character, which PostgreSQL cannot store)
        reason = DecisionForm.base_fields["reason"].clean(request.POST.get("approval-reason"))
    except ValidationError as exc:
        messages.error(request, f"reason: {' '.join(exc.messages)}")
        return HttpResponseRedirect(back)
    if approve:  # a rejection changes no argument: only its reason is read
        form = decision_form(question, dict(question.task.arguments or {}), request.POST)
        if not form.is_valid():
            for field, errors in form.errors.items():
                messages.error(request, f"{field}: {' '.join(str(e) for e in errors)}")
            return HttpResponseRedirect(back)
        edits, reason = form.edits(), form.cleaned_data.get("reason") or ""
    try:
        with transaction.atomic():
            decision = approvals.decide(
                question.pk, request.user, approve=approve, reason=reason, edits=edits
            )
            if decision is not None:
                _log(request.user, question.task, decision)
    except service.NotAllowed:
        raise PermissionDenied from None
    except InvalidAnswer as exc:
        messages.error(request, f"Not recorded: {exc}.")
        return HttpResponseRedirect(back)
    if decision is None:
        messages.warning(request, "This approval no longer waits; your decision was not used.")
    elif not approve:
        messages.success(request, "Rejected: the task ended with your reason.")
    elif decision.final:
        messages.success(request, "Approved: the task runs.")
    else:
        messages.success(
            request,
            f"Approved ({decision.approvals} of {decision.needed}): another user must approve too.",
        )
    return HttpResponseRedirect(back)


def approvals_list(queryset: QuerySet[InputRequest]) -> list[InputRequest]:
    """Waiting approvals first, oldest first; then the latest decided ones."""
    approvals_only = queryset.filter(method=APPROVAL_METHOD).select_related(
        "task", "answered_by_user"
    )
    waiting = list(
        approvals_only.filter(status=InputRequestStatus.PENDING).order_by("created_at", "id")
    )
    decided = list(
        approvals_only.exclude(status=InputRequestStatus.PENDING).order_by(
            F("answered_at").desc(nulls_last=True), "-id"
        )[:RECENT]
    )
    return waiting + decided


def approvals_view(
    model_admin: admin.ModelAdmin[InputRequest],
    request: HttpRequest,
    extra_context: dict[str, Any],
) -> HttpResponse:
    """The Approvals list."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    rows = [
        {
            "question": question,
            "summary": summary_of(question, dict(question.task.arguments or {})),
            "waiting": question.status == InputRequestStatus.PENDING,
            "approvals": len(approvals.approvals_in_force(list(question.decisions or []))),
            "needed": int((question.params or {}).get("approvers") or 1),
            "can_decide": service.may_answer(request.user, question),
            "url": decide_url(question),
            "task_url": task_url(question.task_id),
        }
        for question in approvals_list(InputRequest.objects.all())
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Approvals",
        "opts": model_admin.opts,
        "rows": rows,
        "waiting_count": sum(1 for row in rows if row["waiting"]),
        **extra_context,
    }
    return TemplateResponse(request, "admin/mcp_tasks/inputrequest/approvals.html", context)

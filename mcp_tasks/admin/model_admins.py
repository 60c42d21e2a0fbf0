"""The task admin: tasks with their logs and questions (the questions' own pages are
:mod:`.question_admin`). Rows are read-only; the only writes (Cancel, Retry, answers) go
through :mod:`mcp_tasks.tasks.state.service`, like the MCP wire's. Cancelling needs
``mcp_tasks.change_task``, retrying ``mcp_tasks.retry_task``."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..authoring.approval import APPROVAL_METHOD
from ..conf import get_config
from ..core import task_contract
from ..models import InputRequest, InputRequestStatus, Task, TaskLogEntry, TaskStatus
from ..tasks.state import service
from . import actions as admin_actions, approvals as admin_approvals, dashboard as admin_dashboard
from .actions import tasks_text
from .forms import ELICIT, ROOTS, SAMPLE, answer_url, task_links
from .rq_dashboard import queue_dashboard_url
from .waiting import (
    PrincipalFilter,
    WaitingForFilter,
    attempts_of,
    render_attempt,
    waiting_labels,
    warn_of_unserved_queues,
)

CANCEL_PERMISSION = "mcp_tasks.change_task"
KINDS = {
    ELICIT: "Question",
    SAMPLE: "Model request (sampling)",
    ROOTS: "Roots request",
    APPROVAL_METHOD: "Approval",
}


def pretty_json(value: Any) -> SafeString:
    """``value`` as indented JSON in a ``<pre>`` block."""
    if value is None:
        return format_html('<span class="mcp-empty">{}</span>', "—")
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return format_html('<pre class="mcp-json">{}</pre>', text)


def answerer(question: InputRequest) -> str:
    """Who answered, for people: "alice (admin)", "the MCP client", "nobody (timed out)"."""
    if question.status == InputRequestStatus.EXPIRED:
        return "nobody (timed out)"
    if question.status == InputRequestStatus.CLOSED:
        return "nobody (the task ended)"
    if question.answered_by_user is not None:
        return f"{question.answered_by_user.get_username()} (admin)"
    if question.answered_by == "client":
        return "the MCP client"
    return question.answered_by or "—"


def sees_tasks(user: Any) -> bool:
    """Staff allowed to look at tasks and their questions."""
    perms = ("view_task", "change_task", "answer_inputrequest", "view_inputrequest")
    return any(user.has_perm(f"mcp_tasks.{perm}") for perm in perms)


class ReadOnly:
    """No add, change or delete through the admin's own forms; viewing as tasks allow."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return sees_tasks(request.user)


class QuestionColumns:
    """Columns shared by the task page's questions and the Waiting questions list."""

    @admin.display(description="question")
    def question(self, obj: InputRequest) -> str:
        return service.question_text(obj.method, obj.params or {})

    @admin.display(description="kind", ordering="method")
    def kind(self, obj: InputRequest) -> str:
        kind = KINDS.get(obj.method, obj.method)
        return f"{kind} (staff only)" if obj.for_staff and obj.method != APPROVAL_METHOD else kind

    @admin.display(description="answered by")
    def answered(self, obj: InputRequest) -> str:
        if obj.status == InputRequestStatus.PENDING:
            return "—"
        when = obj.answered_at and timezone.localtime(obj.answered_at).strftime("%Y-%m-%d %H:%M:%S")
        return f"{answerer(obj)} {when or ''}".strip()

    @admin.display(description="")
    def answer_link(self, obj: InputRequest) -> SafeString:
        waiting = obj.status == InputRequestStatus.PENDING
        if obj.method == APPROVAL_METHOD:
            url, label = admin_approvals.decide_url(obj), "Decide" if waiting else "Details"
        else:
            url, label = answer_url(obj), "Answer" if waiting else "Details"
        return format_html('<a class="button" href="{}">{}</a>', url, label)


class QuestionInline(ReadOnly, QuestionColumns, admin.TabularInline):  # type: ignore[type-arg]
    model = InputRequest
    verbose_name, verbose_name_plural = "question", "questions"
    fields = ("created_at", "kind", "question", "status", "answer", "answered", "answer_link")
    readonly_fields = fields
    extra = 0
    ordering = ("sequence",)

    @admin.display(description="answer")
    def answer(self, obj: InputRequest) -> SafeString | str:
        if obj.response is None:
            return "—"
        return format_html("<code>{}</code>", json.dumps(obj.response, ensure_ascii=False))


class LogInline(ReadOnly, admin.TabularInline):  # type: ignore[type-arg]
    model = TaskLogEntry
    verbose_name, verbose_name_plural = "log line", "log"
    fields = ("created_at", "level", "logger_name", "message")
    readonly_fields = fields
    extra = 0

    @admin.display(description="message")
    def message(self, obj: TaskLogEntry) -> SafeString | str:
        return obj.data if isinstance(obj.data, str) else pretty_json(obj.data)


@admin.register(Task)
class TaskAdmin(ReadOnly, admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "short_id",
        "tool_name",
        "status",
        "waiting",
        "attempt_column",
        "principal",
        "oauth_client",
        "progress_bar",
        "created_at",
        "updated_at",
    )
    list_display_links = ("short_id",)
    list_filter = ("status", WaitingForFilter, PrincipalFilter, "tool_name")
    search_fields = ("^id", "tool_name")
    date_hierarchy = "created_at"
    actions = ["cancel_tasks", "retry_tasks"]
    inlines = [QuestionInline, LogInline]
    fieldsets = [
        (
            None,
            {
                "fields": (
                    "id",
                    "tool_name",
                    "status",
                    "status_message",
                    "waiting_for_page",
                    "attempt_page",
                    "progress_bar",
                    "principal_scope",
                    "client_id",
                    "retry_of_link",
                    "retries_links",
                )
            },
        ),
        ("Arguments", {"fields": ("arguments_json",)}),
        ("Outcome", {"fields": ("result_text", "result_json", "error_json")}),
        (
            "Times",
            {"fields": ("created_at", "updated_at", "started_at", "finished_at", "expires_at")},
        ),
        (
            "Run",
            {
                "classes": ("collapse",),
                "fields": (
                    "client",
                    "runs",
                    "queue",
                    "worker_name",
                    "waiting_worker",
                    "heartbeat_at",
                    "session_id",
                ),
            },
        ),
    ]
    readonly_fields = flatten_fieldsets(fieldsets)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(CANCEL_PERMISSION)

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return admin_actions.can_retry(request)

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("dashboard/", wrap(self.dashboard_view), name="mcp_tasks_task_dashboard"),
            path("<path:object_id>/retry/", wrap(self.retry_view), name="mcp_tasks_task_retry"),
            *super().get_urls(),
        ]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        return admin_dashboard.dashboard_view(self, request, {"mcp_live": live_context()})

    def retry_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return admin_actions.retry_view(self, request, object_id)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if request.method == "GET":
            warn_of_unserved_queues(request)
        return super().changelist_view(request, {**(extra_context or {}), **_links()})

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        task_id = unquote(object_id)
        failed = Task.objects.filter(pk=task_id, status=TaskStatus.FAILED).exists()
        operator = {
            "retry_url": reverse("admin:mcp_tasks_task_retry", args=[object_id])
            if failed and admin_actions.can_retry(request)
            else None,
            "quick_answer": admin_actions.quick_answer(request, task_id),
            "approval": admin_approvals.task_panel(request, task_id),
            "mcp_live": live_context(task_id),
        }
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), **_links(), **operator}
        )

    @admin.display(description="task", ordering="id")
    def short_id(self, obj: Task) -> SafeString:
        return format_html(
            '<span class="mcp-nowrap" data-task-id="{}">{}…</span>', obj.id, obj.id[:8]
        )

    @admin.display(description="waiting for", empty_value="")
    def waiting(self, obj: Task) -> SafeString | str:
        labels = waiting_labels(obj)
        if labels is None:
            return ""
        why = obj.status_message or "Queued: no worker has started it yet"
        return format_html('<span class="mcp-waiting" title="{}">{}</span>', why, labels[0])

    @admin.display(description="attempt", ordering="attempt", empty_value="")
    def attempt_column(self, obj: Task) -> str:
        return "" if obj.attempt == 1 and attempts_of(obj) is None else render_attempt(obj)

    @admin.display(description="waiting for")
    def waiting_for_page(self, obj: Task) -> str:
        labels = waiting_labels(obj)
        return "—" if labels is None else labels[1]

    @admin.display(description="attempt")
    def attempt_page(self, obj: Task) -> str:
        return render_attempt(obj)

    @admin.display(description="principal", ordering="principal_scope")
    def principal(self, obj: Task) -> str:
        return obj.principal_scope

    @admin.display(description="OAuth client", ordering="client_id")
    def oauth_client(self, obj: Task) -> str:
        return obj.client_id or "—"

    @admin.display(description="progress")
    def progress_bar(self, obj: Task) -> SafeString | str:
        """A bar when the tool reported progress with a total, the bare count without one."""
        if obj.progress is None:
            return "—"
        if not obj.progress_total:
            return f"{obj.progress:g}"
        percent = max(0.0, min(100.0, 100.0 * obj.progress / obj.progress_total))
        label = f"{obj.progress:g}/{obj.progress_total:g}"
        return format_html(
            '<span class="mcp-nowrap"><span class="mcp-progress" role="progressbar" '
            'aria-valuenow="{}" aria-valuemin="0" aria-valuemax="100" title="{}">'
            '<span style="width: {}%"></span></span> {}</span>',
            f"{percent:.0f}",
            label,
            f"{percent:.1f}",
            label,
        )

    @admin.display(description="retry of")
    def retry_of_link(self, obj: Task) -> SafeString | str:
        return "—" if obj.retry_of_id is None else task_links([obj.retry_of_id])

    @admin.display(description="retried as")
    def retries_links(self, obj: Task) -> SafeString | str:
        ids = list(obj.retries.order_by("created_at").values_list("id", flat=True))
        return task_links(ids) if ids else "—"

    @admin.display(description="arguments")
    def arguments_json(self, obj: Task) -> SafeString:
        return pretty_json(obj.arguments)

    @admin.display(description="result text")
    def result_text(self, obj: Task) -> SafeString | str:
        blocks = obj.result.get("content") or [] if isinstance(obj.result, dict) else []
        texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        if not texts:
            return "—"
        return format_html_join("", '<pre class="mcp-text">{}</pre>', ((text,) for text in texts))

    @admin.display(description="result")
    def result_json(self, obj: Task) -> SafeString:
        return pretty_json(obj.result)

    @admin.display(description="error")
    def error_json(self, obj: Task) -> SafeString:
        return pretty_json(obj.error)

    @admin.display(description="client")
    def client(self, obj: Task) -> str:
        # The snapshot's plain fields only: its sealed secrets are never shown.
        snapshot = getattr(obj, "snapshot", None)
        if snapshot is None:
            return "—"
        info = snapshot.client_info or {}
        name = f"{info.get('name', 'unknown client')} {info.get('version', '')}".strip()
        return f"{name}, protocol {snapshot.protocol_version} ({snapshot.era})"

    @admin.action(description="Cancel selected tasks", permissions=["cancel"])
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        cancelled = finished = 0
        for task_id, status in queryset.values_list("id", "status"):
            try:
                task = service.cancel(task_id, None)
            except task_contract.TaskNotFound:
                continue
            if (
                status in (TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED)
                and task.status == TaskStatus.CANCELLED
            ):
                cancelled += 1
            else:
                finished += 1
        if cancelled:
            self.message_user(request, f"Cancelled {tasks_text(cancelled)}.", messages.SUCCESS)
        if finished:
            self.message_user(
                request, f"Left {tasks_text(finished)} alone: already finished.", messages.WARNING
            )

    @admin.action(description="Retry selected failed tasks", permissions=["retry"])
    def retry_tasks(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        admin_actions.retry_tasks(request, queryset)


def live_context(task_id: str = "") -> dict[str, Any]:
    """What the live admin's script needs (``admin/mcp_tasks/live.html``)."""
    config = get_config()
    return {
        "ws_path": config.ADMIN_LIVE_PATH or "",
        "interval": config.ADMIN_REFRESH_INTERVAL,
        "task": task_id,
    }


def _links() -> dict[str, Any]:
    return {
        "mcp_live": live_context(),
        "queue_dashboard_url": queue_dashboard_url(),
        "waiting_questions_url": reverse("admin:mcp_tasks_inputrequest_changelist"),
        "approvals_url": admin_approvals.approvals_url(),
        "waiting_count": InputRequest.objects.filter(status=InputRequestStatus.PENDING).count(),
        "approvals_waiting": admin_approvals.waiting_approvals(),
    }

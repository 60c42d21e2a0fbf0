"""Rows: legacy-era sessions (background tasks add their own models)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class LegacySession(models.Model):
    """A 2025-era ``Mcp-Session-Id`` session, so that any ASGI process can serve it."""

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    principal_scope = models.CharField(max_length=255, db_index=True)
    protocol_version = models.CharField(max_length=16)
    client_info = models.JSONField(default=dict, blank=True)
    client_capabilities = models.JSONField(default=dict, blank=True)
    log_level = models.CharField(max_length=16, blank=True, default="")
    subscriptions = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name = "legacy session"
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        name = (
            self.client_info.get("name", "client")
            if isinstance(self.client_info, dict)
            else "client"
        )
        return f"{name} session {self.id[:8]}…"


class TaskStatus(models.TextChoices):
    WORKING = "working", "Working"
    INPUT_REQUIRED = "input_required", "Input required"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_STATUSES = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
#: Tasks that are not over yet: what ``MAX_ACTIVE_TASKS`` counts.
ACTIVE_STATUSES = (TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED)


class WaitingFor(models.TextChoices):
    """Why a ``working`` task that is not running waits (besides a free worker)."""

    NOTHING = "", "—"
    LIMIT = "limit", "A concurrency slot"
    RETRY = "retry", "Its next attempt"
    STAFF = "staff", "Staff (approval or answer)"


class Task(models.Model):
    """A background run of a tool. Only the task service writes these rows
    (:mod:`mcp_tasks.tasks.state.service`: its modules ``lifecycle``, ``questions``,
    ``approvals``, ``changes``, ``recovery``, ``loop_questions``, with the SQL of ``rows``
    and ``loop_database``)."""

    #: Not a column: the questions the change this row was brought up to date with carried
    #: (:func:`~mcp_tasks.tasks.state.changes.with_fields`), read instead of the database.
    carried_questions: list[Any] | None = None

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    principal_scope = models.CharField(max_length=255, db_index=True)
    #: The OAuth client whose token created the task ("" without a token).
    client_id = models.CharField(max_length=255, blank=True, default="")
    tool_name = models.CharField(max_length=128, db_index=True)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16, choices=TaskStatus.choices, default=TaskStatus.WORKING, db_index=True
    )
    status_message = models.TextField(blank=True, default="")
    progress = models.FloatField(null=True, blank=True)
    progress_total = models.FloatField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    era = models.CharField(
        max_length=8, default="modern", help_text="The protocol era of the creating client."
    )
    session_id = models.CharField(max_length=64, blank=True, default="")
    origin_request_id = models.JSONField(null=True, blank=True)
    queue = models.CharField(max_length=100, default="mcp_tasks")
    job_timeout = models.IntegerField(null=True, blank=True)
    ttl_ms = models.BigIntegerField(null=True, blank=True)
    poll_interval_ms = models.IntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    runs = models.IntegerField(
        default=0, help_text="Jobs started for this task (resumes included)."
    )
    attempt = models.PositiveIntegerField(
        default=1, help_text="Which attempt this is (TaskConfig(retries=...) runs it again)."
    )
    waiting_for = models.CharField(
        max_length=8,
        choices=WaitingFor.choices,
        blank=True,
        default=WaitingFor.NOTHING,
        help_text="What the task waits for before it runs again (the status message says more).",
    )
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker_name = models.CharField(max_length=255, blank=True, default="")
    waiting_worker = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="The worker holding the task while it waits for an answer.",
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    retry_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="retries",
        help_text="The failed task this task runs again.",
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # MAX_ACTIVE_TASKS and MAX_ACTIVE_TASKS_PER_CLIENT count these at every task call.
            models.Index(
                fields=["principal_scope"],
                condition=models.Q(status__in=ACTIVE_STATUSES),
                name="mcp_tasks_task_active_owner",
            ),
            models.Index(
                fields=["client_id"],
                condition=models.Q(status__in=ACTIVE_STATUSES) & ~models.Q(client_id=""),
                name="mcp_tasks_task_active_client",
            ),
        ]
        permissions = [
            ("answer_inputrequest", "Can answer questions asked by tasks"),
            ("retry_task", "Can retry failed tasks"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.id[:8]}… ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def job_id(self) -> str:
        """The rq job id of the current run (letters, digits, ``_`` and ``-`` only)."""
        return f"mcp_tasks-{self.id}-{self.runs}"


class TaskSnapshot(models.Model):
    """The creating request's context, restored in the worker.

    ``sealed`` holds the secrets (access token, allow-listed headers) encrypted with a key
    derived from ``SECRET_KEY`` (``SECRET_KEY_FALLBACKS`` decrypt too).
    """

    task = models.OneToOneField(
        Task, on_delete=models.CASCADE, primary_key=True, related_name="snapshot"
    )
    era = models.CharField(max_length=8)
    protocol_version = models.CharField(max_length=16)
    client_info = models.JSONField(default=dict, blank=True)
    client_capabilities = models.JSONField(default=dict, blank=True)
    log_level = models.CharField(max_length=16, blank=True, default="")
    progress_token = models.JSONField(null=True, blank=True)
    prior_answers = models.JSONField(default=dict, blank=True)
    sealed = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"snapshot of {self.task_id}"


class TaskLogEntry(models.Model):
    """A log line a task's tool emitted (shown in the admin)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="log_entries")
    level = models.CharField(max_length=16)
    logger_name = models.CharField(max_length=255, blank=True, default="")
    data = models.JSONField(null=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name_plural = "task log entries"

    def __str__(self) -> str:
        return f"[{self.level}] {self.data!r}"[:120]


class InputRequestStatus(models.TextChoices):
    PENDING = "pending", "Waiting"
    ANSWERED = "answered", "Answered"
    EXPIRED = "expired", "Timed out"
    CLOSED = "closed", "Closed (task ended)"


class Audience(models.TextChoices):
    """Who may answer a question."""

    CLIENT = "client", "The client (or staff in its place)"
    STAFF = "staff", "Staff only"


class InputRequest(models.Model):
    """A question a task asked (elicitation, sampling, roots, or a staff approval); its key
    is unique for the task's whole life."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="input_requests")
    key = models.CharField(max_length=100)
    sequence = models.IntegerField()
    method = models.CharField(max_length=64)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16,
        choices=InputRequestStatus.choices,
        default=InputRequestStatus.PENDING,
        db_index=True,
    )
    response = models.JSONField(null=True, blank=True)
    answered_by = models.CharField(max_length=255, blank=True, default="")
    answered_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    relayed_at = models.DateTimeField(
        null=True, blank=True, help_text="2025-11-25 sessions: when a stream sent it to the client."
    )
    notified_at = models.DateTimeField(
        null=True, blank=True, db_index=True, help_text="When it was e-mailed to operators."
    )
    audience = models.CharField(
        max_length=8,
        choices=Audience.choices,
        default=Audience.CLIENT,
        help_text="Staff questions (ctx.ask_staff, approvals) are never shown to the client.",
    )
    permission = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="Staff questions: the Django permission an operator needs to answer.",
    )
    staff_group = models.CharField(
        max_length=150,
        blank=True,
        default="",
        help_text="Staff questions: the group an operator must belong to (empty: any).",
    )
    decisions = models.JSONField(
        default=list,
        blank=True,
        help_text="Approvals: every decision (who, when, approve or reject, reason, changes).",
    )

    class Meta:
        verbose_name = "question"
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "key"], name="mcp_tasks_inputrequest_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.key} of {self.task_id[:8]}…"

    @property
    def for_staff(self) -> bool:
        return self.audience == Audience.STAFF


class StreamEvent(models.Model):
    """An SSE event of a legacy stream whose connection was closed before the request
    finished, kept for the client's ``GET`` with ``Last-Event-ID`` (any process)."""

    stream_id = models.CharField(max_length=64, db_index=True)
    session_id = models.CharField(max_length=64)
    sequence = models.IntegerField()
    message = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["stream_id", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["stream_id", "sequence"], name="mcp_tasks_streamevent_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.stream_id}:{self.sequence}"

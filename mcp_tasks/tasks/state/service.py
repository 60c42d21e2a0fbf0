"""The task service: the one place that changes task state, by domain.

- :mod:`.lifecycle`: creation (under quotas), reads, the worker's transitions, cancel;
- :mod:`.questions`: questions, the one answer path (:func:`.questions.answer`), time-outs;
  :mod:`.loop_questions`: their common case in one statement from the event loop;
- :mod:`.approvals`: decisions on an approval;
- :mod:`.changes`: what transitions share, and the ones that end a task;
- :mod:`.recovery`: lost workers and jobs, unserved queues, expired rows;
- the SQL of :mod:`.rows` and :mod:`.loop_database`.

Only these modules write task rows, and news leaves after commit through :mod:`.outbox`
alone. A transition another party may race (cancel, answer, question, an end not by the
worker, a re-queue) runs under the row lock (:func:`.changes.locked`); the worker's own
steps (claim, progress, result) are conditional updates (``WHERE status = 'working'``, a
claim also on its run) that change nothing once the task moved on. Terminal states never
change. Functions are sync (ORM) unless named ``a…`` (async callers use
:func:`mcp_tasks.core.db.db`)."""

from __future__ import annotations

from .changes import FINAL_FIELDS_MAX, acomplete, add_log, complete, fail, final_fields, with_fields
from .lifecycle import (
    abegin_run,
    acreate_task,
    aget_task,
    aowned_task_ids,
    begin_run,
    cancel,
    create_task,
    find_task,
    get_task,
    heartbeat,
    list_tasks,
    note_waiting_for_limit,
    report_progress,
    retry_later,
    snapshot_secrets,
    stored_caller,
)
from .loop_questions import aanswer, aask_all
from .questions import (
    EXPIRED,
    NotAllowed,
    ReplayMismatch,
    TaskEnded,
    answer,
    answer_in,
    answers_of,
    aoutstanding_requests,
    ask,
    ask_all,
    claim_questions_to_mail,
    claim_relay,
    expire_questions,
    may_answer,
    outstanding_requests,
    question_text,
    release,
    release_relay,
    withdraw,
)
from .recovery import check_liveness, purge_expired, recover_stalled, unserved_queues

__all__ = [
    "EXPIRED",
    "FINAL_FIELDS_MAX",
    "NotAllowed",
    "ReplayMismatch",
    "TaskEnded",
    "aanswer",
    "aask_all",
    "abegin_run",
    "acomplete",
    "acreate_task",
    "add_log",
    "aget_task",
    "answer",
    "answer_in",
    "answers_of",
    "aoutstanding_requests",
    "aowned_task_ids",
    "ask",
    "ask_all",
    "begin_run",
    "cancel",
    "check_liveness",
    "claim_questions_to_mail",
    "claim_relay",
    "complete",
    "create_task",
    "expire_questions",
    "fail",
    "final_fields",
    "find_task",
    "get_task",
    "heartbeat",
    "list_tasks",
    "may_answer",
    "note_waiting_for_limit",
    "outstanding_requests",
    "purge_expired",
    "question_text",
    "recover_stalled",
    "release",
    "release_relay",
    "report_progress",
    "retry_later",
    "snapshot_secrets",
    "stored_caller",
    "unserved_queues",
    "with_fields",
    "withdraw",
]

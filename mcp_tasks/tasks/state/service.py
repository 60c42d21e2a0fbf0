"""The task service: the one place that changes task state, by domain.

- :mod:`.lifecycle`: a task's creation (under its quotas), reads for its owner, the
  transitions of the worker running it (claim, progress, retry) and its cancel;
- :mod:`.questions`: its questions, the one answer path (:func:`.questions.answer`, which
  records through :func:`.questions.store_answer`, as an approval's last decision does),
  their time-outs; :mod:`.loop_questions`: a new question and a client's answer in one
  statement each from the event loop (PostgreSQL), when nothing else is under way;
- :mod:`.approvals`: the decisions on an approval;
- :mod:`.changes`: what every transition shares, and the ones that end a task;
- :mod:`.recovery`: lost workers and jobs, queues no worker serves, expired rows;
- with the SQL of :mod:`.rows` and :mod:`.loop_database` (the statements of the task path).

The rule: only these modules write task rows (the wire handlers, the worker and the admin
call them), and what a transition tells others leaves after its commit through
:mod:`.outbox` alone. A transition that another party may race — a cancel, an answer, a question, a
task ended by anyone but the worker running it, a re-queue — runs under the task's row lock
(:func:`.changes.locked`). The worker's own steps of the job it runs (its claim, its
progress, its result) are single conditional updates instead (``WHERE status = 'working'``,
and for a claim the run number): they change nothing once someone else ended or moved the
task. Terminal states (completed, failed, cancelled) never change. Functions are
synchronous (ORM) unless named ``a…``; async callers wrap the others with
:func:`mcp_tasks.core.db.db`. Each change is published after its transaction commits, and sent
as a Django signal (:mod:`mcp_tasks.signals`).
"""

from __future__ import annotations

from .changes import (
    FINAL_FIELDS_MAX,
    acomplete,
    add_log,
    complete,
    fail,
    final_fields,
    with_fields,
)
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
    validate_answer,
    withdraw,
)
from .recovery import check_liveness, purge_expired, recover_stalled, requeue_lost, unserved_queues

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
    "requeue_lost",
    "retry_later",
    "snapshot_secrets",
    "stored_caller",
    "unserved_queues",
    "validate_answer",
    "with_fields",
    "withdraw",
]

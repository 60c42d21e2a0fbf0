"""rq worker classes for task jobs.

``TaskWorker`` (set ``RQ = {"WORKER_CLASS": "mcp_tasks.tasks.worker.TaskWorker"}``) is rq's
forking worker plus: a task whose work-horse dies (SIGKILL, OOM) fails at once with a
clear message, and every ``MAINTENANCE_INTERVAL`` seconds it runs the task housekeeping
(stalled tasks, timed-out questions, expired rows).
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

from django.db import close_old_connections
from rq.worker import SimpleWorker, Worker

from ..conf import get_config
from . import service

logger = logging.getLogger("mcp_tasks.tasks")


def task_id_of(job: Any) -> str | None:
    if getattr(job, "func_name", "") == "mcp_tasks.tasks.job.run_task" and job.args:
        return str(job.args[0])
    return None


def maintain() -> dict[str, int]:
    """Housekeeping: fail tasks whose worker died, re-queue lost jobs, time out questions,
    delete expired tasks and idle sessions. Safe to run from several processes."""
    from ..sessions import purge_idle_sessions
    from ..streams import purge_old_events

    close_old_connections()
    return {
        "stalled_tasks": service.recover_stalled(),
        "questions_timed_out": service.expire_questions(),
        "expired_tasks_deleted": service.purge_expired(),
        "idle_sessions_deleted": purge_idle_sessions(),
        "stream_events_deleted": purge_old_events(),
    }


class TaskWorker(Worker):
    """rq's forking ``Worker`` that also keeps task rows truthful."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("maintenance_interval", get_config()["TASK_MAINTENANCE_INTERVAL"])
        super().__init__(*args, **kwargs)

    @property
    def dequeue_timeout(self) -> int:
        # An idle worker wakes up for maintenance at least this often (rq would wait minutes).
        return max(1, min(int(super().dequeue_timeout), int(self.maintenance_interval)))

    def handle_work_horse_killed(self, job: Any, retpid: int, ret_val: int, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)  # type: ignore[no-untyped-call]
        task_id = task_id_of(job)
        if task_id is None:
            return
        how = (
            f"signal {os.WTERMSIG(ret_val)}"
            if ret_val and os.WIFSIGNALED(ret_val)
            else f"status {ret_val}"
        )
        close_old_connections()
        service.fail(
            task_id,
            {"code": -32603, "message": "The worker process running this task died"},
            f"The worker process running this task died ({how})",
        )

    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()  # type: ignore[no-untyped-call]
        try:
            counts = maintain()
            if any(counts.values()):
                logger.info("task maintenance: %s", counts)
        except Exception:
            logger.exception("task maintenance failed")


class ThreadWorker(SimpleWorker):
    """A ``SimpleWorker`` that can run in a thread (embedded development mode): no signal
    handlers, and timeouts by timer instead of SIGALRM."""

    from rq.timeouts import TimerDeathPenalty as death_penalty_class  # noqa: N813

    def _install_signal_handlers(self) -> None:
        return None

    def request_stop(self, signum: Any = None, frame: Any = None) -> None:
        self._stop_requested = True

    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()  # type: ignore[no-untyped-call]
        try:
            maintain()
        except Exception:
            logger.exception("task maintenance failed")


__all__ = ["TaskWorker", "ThreadWorker", "maintain", "signal"]

"""rq's forking worker for task jobs (:class:`ForkingTaskWorker`): one work-horse per job,
fed from the fair queue, with :class:`.task_worker.TaskWorker`'s housekeeping."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any

from django.db import close_old_connections
from rq.exceptions import NoSuchJobError
from rq.worker import Worker

from ...conf import get_config
from ...core.gc_freeze import freeze_startup_objects
from ...core.jsonrpc import INTERNAL_ERROR
from ..queues import fair_queue
from ..state import service
from .intake import note_parked
from .task_worker import _FairDequeuing, _logged_if_unreachable, _Maintaining, task_job_args

logger = logging.getLogger("mcp_tasks.tasks")


class ForkingTaskWorker(_FairDequeuing, _Maintaining, Worker):
    """rq's forking ``Worker``: a sync tool's ``tasks/cancel`` kills its work-horse."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("maintenance_interval", get_config().TASK_MAINTENANCE_INTERVAL)
        # rq beats for a running job this often: a third of a lease's life keeps it.
        kwargs.setdefault("job_monitoring_interval", max(1, int(fair_queue.lease_seconds() / 3)))
        super().__init__(*args, **kwargs)
        self._lease: fair_queue.Lease | None = None

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> Any:
        found = self._dequeue_fairly(timeout, max_idle_time)
        self.heartbeat()
        return found

    def _take_one(self) -> tuple[Any, fair_queue.TakenOne]:
        more = False
        for queue in self.queues:
            taken = fair_queue.take_one(self.connection, queue)
            note_parked(taken.parked)
            more = more or taken.more
            if taken.job_id is None:
                continue
            try:
                job = self.job_class.fetch(
                    taken.job_id, connection=self.connection, serializer=self.serializer
                )
            except NoSuchJobError:  # deleted while queued: skipped, as rq's dequeue skips it
                self.connection.lrem(queue.intermediate_queue_key, 1, taken.job_id)
                return None, replace(taken, more=True)
            job.redis_server_version = self.get_redis_server_version()  # type: ignore[no-untyped-call]
            self._lease = taken.lease
            return (job, queue), taken
        return None, fair_queue.TakenOne(None, None, [], more)

    def execute_job(self, job: Any, queue: Any) -> None:
        try:
            super().execute_job(job, queue)
        finally:
            lease, self._lease = self._lease, None
            if lease is not None:
                try:
                    fair_queue.release(self.connection, [lease])
                except Exception:  # Redis down: the lease expires
                    logger.warning("could not give back the lease of job %s", job.id, exc_info=True)

    def maintain_heartbeats(self, job: Any, execution: Any) -> None:
        # Redis unreachable: the work-horse goes on; again next time.
        with _logged_if_unreachable(self, "job heartbeat"):
            super().maintain_heartbeats(job, execution)
            if self._lease is not None:
                fair_queue.renew(self.connection, [self._lease])

    def bootstrap(self, *args: Any, **kwargs: Any) -> None:
        super().bootstrap(*args, **kwargs)
        freeze_startup_objects()  # before the first fork: the work-horses share those pages

    def handle_work_horse_killed(self, job: Any, retpid: int, ret_val: int, rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)  # type: ignore[no-untyped-call]
        task_id = task_job_args(job)[0]
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
            {"code": INTERNAL_ERROR, "message": "The worker process running this task died"},
            f"The worker process running this task died ({how})",
        )

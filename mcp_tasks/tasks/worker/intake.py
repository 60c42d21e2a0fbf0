"""How a :class:`~mcp_tasks.tasks.worker.TaskWorker` takes jobs and gives back what ended:
each round trip is one run of :mod:`.rq_bookkeeping`'s script (forget succeeded jobs, give
back leases, start the next jobs in the principals' turn)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from ...conf import get_config
from ...core import metrics_hook
from ..queues import fair_queue
from ..queues.fair_queue import Lease
from ..queues.rq_bookkeeping import Bookkeeping, Room, Started, Succeeded, Taken
from ..state import service

logger = logging.getLogger("mcp_tasks.tasks")


def _drain(queue: SimpleQueue[Any]) -> list[Any]:
    items = []
    while not queue.empty():
        items.append(queue.get())
    return items


def note_parked(job_ids: list[str]) -> None:
    """Note in their tasks' status that these jobs wait for their concurrency limit."""
    task_ids = [t for t in map(fair_queue.task_id_of_job, job_ids) if t is not None]
    if not task_ids:
        return
    try:
        service.note_waiting_for_limit(task_ids)
    except Exception:
        logger.warning("could not note %d tasks waiting for a limit", len(task_ids), exc_info=True)


class Intake:
    """A worker's side of its queues; ``forgot`` hears of succeeded jobs once forgotten."""

    def __init__(self, worker: Any, forgot: Callable[[list[Any]], None]) -> None:
        self.worker = worker
        self.bookkeeping = Bookkeeping(worker)
        self._forgot = forgot
        #: Task jobs that succeeded (filled on the event loop, sent from the worker's thread).
        self.succeeded: SimpleQueue[Succeeded] = SimpleQueue()
        #: Leases of jobs that ended, to give back.
        self.released: SimpleQueue[Lease] = SimpleQueue()
        #: The leases of the jobs running here, by job id.
        self.leases: dict[str, Lease] = {}
        #: Whose line each job running here waited in, by job id.
        self.principals: dict[str, str] = {}
        self._renewed_at = time.monotonic()

    def reserves_slots(self) -> bool:
        """Whether one principal may not fill this worker (``RESERVED_SLOTS``)."""
        config = get_config()
        return bool(config.FAIR_SHARE and config.RESERVED_SLOTS and self.worker.slots.size >= 2)

    def room(self) -> Room | None:
        """Jobs one principal may run here: all slots but ``RESERVED_SLOTS`` (None: all)."""
        if not self.reserves_slots():
            return None
        cap = max(1, self.worker.slots.size - get_config().RESERVED_SLOTS)
        return Room(cap, dict(Counter(list(self.principals.values()))))

    def take(self, limit: int) -> Taken:
        """Start up to ``limit`` waiting jobs from the worker's queues in order."""
        self.worker.slots.look()
        taken_all = Taken()
        started = taken_all.started
        forgotten, released = self._ended()
        for queue in self.worker.queues:
            room = self.room()
            try:
                taken = self._trip(queue, forgotten, released, take=limit - len(started), room=room)
            except Exception:
                if not started:
                    raise
                # What the queues before it started runs; this one is tried again at once.
                logger.warning("taking jobs from queue %s failed", queue.name, exc_info=True)
                taken_all.more = True
                break
            forgotten, released = [], []
            started += taken.started
            self._keep(taken.started)  # counted in the next queue's room
            taken_all.more = taken_all.more or taken.more
            taken_all.full = taken_all.full or taken.full
            note_parked(taken.parked)
            if metrics_hook.recorder is not None and (taken.full or taken.parked):
                metrics_hook.recorder.jobs_held_back(queue.name, taken.full, len(taken.parked))
            if len(started) >= limit:
                break
        return taken_all

    def start(self, queue: Any, job_id: str) -> list[Started]:
        """Start the job ``job_id`` that rq dequeued itself (with what ended meanwhile)."""
        started = self._trip(queue, *self._ended(), job_ids=[job_id]).started
        self._keep(started)
        return started

    def settle(self) -> None:
        """Forget what succeeded and give back what ended, in a round trip of their own."""
        forgotten, released = self._ended()
        if not forgotten and not released:
            return
        try:
            self._trip(self.worker.queues[0], forgotten, released)
        except Exception:
            logger.warning(
                "rq bookkeeping of %d jobs failed", len(forgotten) + len(released), exc_info=True
            )

    def _ended(self) -> tuple[list[Succeeded], list[Lease]]:
        """The jobs that succeeded and the leases to give back since the last trip."""
        return _drain(self.succeeded), _drain(self.released)

    def _trip(
        self, queue: Any, forgotten: list[Succeeded], released: list[Lease], **kwargs: Any
    ) -> Taken:
        """One run of the script; the leases go back to the next one should it fail."""
        try:
            return self.bookkeeping.run(queue, forgotten=forgotten, released=released, **kwargs)
        except Exception:
            for lease in released:
                self.released.put(lease)
            raise
        finally:
            self._forgot(forgotten)

    def _keep(self, started: list[Started]) -> None:
        for entry in started:
            if entry.lease is not None:
                self.leases[entry.job.id] = entry.lease
            if entry.principal is not None:
                self.principals[entry.job.id] = entry.principal

    def ended(self, job_id: str) -> None:
        """The job ``job_id`` ended (any thread): its lease goes back with the next trip."""
        self.principals.pop(job_id, None)
        lease = self.leases.pop(job_id, None)
        if lease is not None:
            self.released.put(lease)

    def renew_leases(self) -> None:
        """Keep the leases of the running jobs (a third of a lease's life apart)."""
        if time.monotonic() - self._renewed_at < fair_queue.lease_seconds() / 3:
            return
        self._renewed_at = time.monotonic()
        try:
            fair_queue.renew(self.worker.connection, list(self.leases.values()))
        except Exception:
            logger.warning("renewing %d leases failed", len(self.leases), exc_info=True)

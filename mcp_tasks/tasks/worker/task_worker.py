"""rq worker classes for task jobs, all running the housekeeping every
``TASK_MAINTENANCE_INTERVAL`` seconds.

- :class:`TaskWorker` (``RQ = {"WORKER_CLASS": "mcp_tasks.tasks.worker.TaskWorker"}``): up to
  ``TASK_CONCURRENCY`` jobs at once in one process, async tools on one event loop, sync ones
  on a thread pool; a task waiting for an answer holds no slot. rq's registries are kept.
- :class:`.forking_worker.ForkingTaskWorker`: rq's forking worker, for tools that must be
  stoppable by a hard kill.
- :class:`EmbeddedTaskWorker`: a :class:`TaskWorker` in a thread of the ASGI process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import redis
from django.db import close_old_connections
from rq.command import parse_payload
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.utils import now
from rq.worker import BaseWorker, WorkerStatus

from ...authoring.registry import mcp
from ...conf import get_config
from ...core import metrics_hook
from ...core.db import db
from ...core.gc_freeze import freeze_startup_objects
from ...core.jsonrpc import INTERNAL_ERROR, error_object
from ...sessions import purge_idle_sessions
from ...stream_events import purge_old_events
from ..queues import fair_queue
from ..queues.queue import JOB_FUNCTION, TASK_WORKER_FIELD
from ..queues.rq_bookkeeping import Started, Taken
from ..state import service
from ..state.question_mail import send_due
from .intake import Intake
from .job import execute
from .loop_thread import LoopThread
from .newcomers import NewcomerListener
from .runtime import JobSlot, Runtime, Slots

logger = logging.getLogger("mcp_tasks.tasks")

ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]

#: Most jobs a :class:`TaskWorker` takes in one round trip; the rest stay for other workers.
TAKE_AT_ONCE = 8
#: Seconds a job may wait queued before the worker counts itself behind (and takes several).
BEHIND_AFTER = 0.005
#: Longest pause of a worker whose ready jobs all belong to principals at their most on it
#: (``RESERVED_SLOTS``): it waits for a job to end or a newcomer (:mod:`.newcomers`).
FULL_PAUSE = 0.05
#: Longest blocking dequeue while jobs run: an ended job's bookkeeping waits at most this long.
FORGET_WITHIN = 0.1
#: What a Redis unreachable for now raises (``READONLY``: a master demoted, same address).
REDIS_UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,
)
#: Longest pause between tries of an unreachable Redis (rq's own back-off grows to a minute).
REDIS_RETRY_CAP = 2.0


@dataclass
class _Ended:
    """A job that ended, for rq's bookkeeping (``returned``: what a non-task job returned)."""

    job: Any
    queue: Any
    execution: Execution
    exc_info: ExcInfo | None
    returned: Any = None


@dataclass
class _Running:
    """A job this worker runs, and its run's future (set after scheduling; may end first)."""

    job: Any
    future: Future[None] | None = None


def task_job_args(job: Any) -> tuple[str | None, int | None]:
    """``(task_id, run)`` of a task job; ``(None, None)`` for any other rq job."""
    if getattr(job, "func_name", "") == JOB_FUNCTION and job.args:
        run = job.args[1] if len(job.args) > 1 else None
        return str(job.args[0]), run
    return None, None


def maintain() -> dict[str, int]:
    """Housekeeping (lost workers/jobs, time-outs, expiry, mail); safe from several processes."""
    close_old_connections()
    return {
        "stalled_tasks": service.recover_stalled(),
        "questions_timed_out": service.expire_questions(),
        "expired_tasks_deleted": service.purge_expired(),
        "idle_sessions_deleted": purge_idle_sessions(),
        "stream_events_deleted": purge_old_events(),
        "questions_mailed": send_due(),
    }


class _Maintaining:
    """Task housekeeping on rq's schedule; idle workers wake for it (rq alone blocks minutes)."""

    maintenance_interval: int

    @property
    def dequeue_timeout(self) -> int:
        return max(1, min(int(super().dequeue_timeout), int(self.maintenance_interval)))  # type: ignore[misc]

    def run_maintenance_tasks(self) -> None:
        # rq's registries: again at the next round
        with _logged_if_unreachable(self, "maintenance"):
            super().run_maintenance_tasks()  # type: ignore[misc]
        try:
            counts = maintain()
            if any(counts.values()):
                logger.info("task maintenance: %s", counts)
        except Exception:
            logger.exception("task maintenance failed")

    # rq's work loop quits on a Redis error outside its dequeue: a Redis failover would stop
    # every worker. These calls go on; the dequeue loop waits for Redis (_FairDequeuing).

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        with _logged_if_unreachable(self, "heartbeat"):
            super().heartbeat(timeout, pipeline)  # type: ignore[misc]

    def check_for_suspension(self, burst: bool) -> None:
        with _logged_if_unreachable(self, "suspension check"):
            super().check_for_suspension(burst)  # type: ignore[misc]


@contextlib.contextmanager
def _logged_if_unreachable(worker: Any, what: str) -> Iterator[None]:
    """Log, rather than raise, that Redis is unreachable for the worker's ``what``."""
    try:
        yield
    except REDIS_UNREACHABLE as error:
        logger.warning("rq worker %s: Redis unreachable for its %s (%s)", worker.name, what, error)


class _FairDequeuing:
    """rq's dequeue loop (heartbeats, maintenance, Redis back-off, ``max_idle_time``) over
    :mod:`.fair_queue`: wait on the bells, then :meth:`_take_one` (``timeout`` None: once)."""

    def serialize(self) -> dict[str, Any]:
        """rq's registration, marked as a task worker (:func:`.queue.queue_workers`)."""
        return {**super().serialize(), TASK_WORKER_FIELD: "1"}  # type: ignore[misc]

    def _take_one(self) -> tuple[Any, Taken | fair_queue.TakenOne]:
        """The next job (None when none waits), and what the take said of the rest."""
        raise NotImplementedError

    def _pause(self, limit: float) -> None:
        """Only principals at their most here have jobs: wait up to ``limit`` s for a job to end."""
        time.sleep(min(limit, FULL_PAUSE))

    def _dequeue_fairly(self, timeout: float | None, max_idle_time: float | None) -> Any:
        worker: Any = self
        worker.set_state(WorkerStatus.IDLE)
        idle_since = time.monotonic()
        wait = 1.0
        look_first = timeout is None
        while True:
            if worker._stop_requested:  # an idle worker asked to stop (no signal woke it)
                return None
            try:
                worker.heartbeat()
                if worker.should_run_maintenance_tasks:
                    worker.run_maintenance_tasks()
                limit: float = FULL_PAUSE if timeout is None else timeout
                if max_idle_time is not None:
                    limit = min(limit, max(max_idle_time - (time.monotonic() - idle_since), 0.01))
                if not look_first:
                    fair_queue.wait_for_bell(
                        worker.connection, [queue.name for queue in worker.queues], limit
                    )
                    if worker._stop_requested:  # rung by request_stop
                        return None
                found, rest = self._take_one()
                if found or timeout is None:
                    return found
                # Parked for their limit: look again at once. Only principals at their most
                # here wait: leave the bell to other workers.
                look_first = rest.more
                if rest.full:
                    self._pause(limit)
                if max_idle_time is not None and time.monotonic() - idle_since >= max_idle_time:
                    return None
            except REDIS_UNREACHABLE as error:
                logger.error(
                    "rq worker %s: Redis unreachable (%s), retrying in %g s",
                    worker.name,
                    error,
                    wait,
                )
                time.sleep(wait)
                wait = min(
                    wait * worker.exponential_backoff_factor,
                    worker.max_connection_wait_time,
                    REDIS_RETRY_CAP,
                )


class TaskWorker(_FairDequeuing, _Maintaining, BaseWorker):
    """Runs many task jobs at once in one process. A first SIGTERM/SIGINT waits for the
    running jobs (warm shutdown); a second cancels them and fails their tasks (cold)."""

    #: Seconds between rq heartbeats that are not part of a job's bookkeeping.
    HEARTBEAT_EVERY = 5.0

    def __init__(self, *args: Any, concurrency: int | None = None, **kwargs: Any) -> None:
        config = get_config()
        kwargs.setdefault("maintenance_interval", config.TASK_MAINTENANCE_INTERVAL)
        super().__init__(*args, **kwargs)
        self.slots = Slots(concurrency or config.TASK_CONCURRENCY)
        self.loop_thread = LoopThread(self.slots)
        self._running: dict[str, _Running] = {}  # by job id
        self._taken: list[Started] = []  # the jobs started with the one rq executes next
        self._behind = True  # the last job dequeued had waited (or none yet): more may wait
        #: The last take found only principals at their most here: wait for a job to end.
        self._full = False
        self.intake = Intake(self, self._forgot)
        #: Wakes the worker for another principal's job (when it keeps reserved slots).
        self.newcomers: NewcomerListener | None = None
        self._bookkeeper = ThreadPoolExecutor(1, thread_name_prefix="mcp_tasks-rq")
        self._interruptible = False
        self._last_rq_heartbeat = 0.0
        self._suspension_checked_at = 0.0
        self._executions_beaten_at = time.monotonic()

    # -- the event loop ---------------------------------------------------------------------

    def bootstrap(self, *args: Any, **kwargs: Any) -> None:
        super().bootstrap(*args, **kwargs)
        self.loop_thread.start()
        if self.intake.reserves_slots():
            queue_names = [queue.name for queue in self.queues]
            self.newcomers = NewcomerListener(self.connection, queue_names, self.slots)
            self.newcomers.start()
        if metrics_hook.recorder is not None:
            metrics_hook.recorder.slots_changed(0, self.slots.size)
        self.freeze_startup_objects()

    def freeze_startup_objects(self) -> None:
        """Keep the garbage collector off what start-up made (:mod:`mcp_tasks.core.gc_freeze`)."""
        freeze_startup_objects()

    @property
    def runtime(self) -> Runtime | None:
        return self.loop_thread.runtime

    # -- taking jobs ------------------------------------------------------------------------

    @property
    def running_jobs(self) -> int:
        return len(self._running)

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> Any:
        # Take jobs only into free slots, beating meanwhile; while behind, several at once.
        self._interruptible = True
        try:
            while not self.slots.wait_available(timeout=1.0):
                if self._stop_requested:
                    return None
                self._keep_alive()
            if self._full:  # the last take found only principals at their most here
                self._full = False
                self.slots.wait_for_release(FORGET_WITHIN)
            self._keep_alive()
            started: list[Started] | None = None
            if self._behind:
                with contextlib.suppress(*REDIS_UNREACHABLE):
                    taken = self.intake.take(min(self.slots.free(), TAKE_AT_ONCE))
                    started, self._full = taken.started, taken.full
            if not started:
                started = self._wait_for_job(timeout, max_idle_time)
            if not started:
                return None
            enqueued_at = started[-1].job.enqueued_at
            self._behind = enqueued_at is not None and (
                (now() - enqueued_at).total_seconds() > BEHIND_AFTER
            )
            self._taken = started
            return started[0].job, started[0].queue
        finally:
            self._interruptible = False

    def _keep_alive(self) -> None:
        """While jobs run: rq's heartbeats, the leases, and what ended given back."""
        self._beat_executions()
        self.heartbeat()
        self.intake.renew_leases()
        self.intake.settle()

    def _wait_for_job(self, timeout: int | None, max_idle_time: int | None) -> list[Started] | None:
        """Wait for a job, :data:`FORGET_WITHIN` at a time while jobs run (settling what
        ended), then fully (``max_idle_time`` counts from when none runs)."""
        while self._running and timeout is not None and not self._stop_requested:
            started: list[Started] | None = self._dequeue_fairly(timeout, FORGET_WITHIN)
            if started:
                return started
            self._keep_alive()
        self.intake.settle()  # jobs are queued there before they leave the running set
        started = self._dequeue_fairly(timeout, max_idle_time)
        return started

    def _take_one(self) -> tuple[list[Started] | None, Taken]:
        taken = self.intake.take(1)
        self._full = taken.full
        return taken.started or None, taken

    def _pause(self, limit: float) -> None:
        self.slots.wait_for_release(limit)

    def execute_job(self, job: Any, queue: Any) -> None:
        """Start the job (and those taken with it) on the event loop and return at once;
        rq counts them as one (``--max-jobs``)."""
        started, self._taken = self._taken, []
        if not started or started[0].job is not job:  # not dequeued here: start it now
            started = self.intake.start(queue, job.id)
        for entry in started:
            self.slots.take_now()
            # Registered before it is scheduled: a short job can end (and be forgotten by
            # _forget_succeeded) before run_coroutine_threadsafe returns to this thread.
            running = self._running[entry.job.id] = _Running(entry.job)
            running.future = self.loop_thread.submit(
                self._perform(entry.job, entry.queue, entry.execution)
            )

    async def _perform(self, job: Any, queue: Any, execution: Execution) -> None:
        """Run one job to its end on the loop, then do rq's bookkeeping off the loop."""
        slot = JobSlot(self.slots)
        task_id, run = task_job_args(job)
        exc_info: ExcInfo | None = None
        returned: Any = None
        try:
            if task_id is None:  # some other job on a task queue: run it like rq would
                returned = await asyncio.get_running_loop().run_in_executor(None, job.perform)
            else:
                assert self.runtime is not None
                timeout = job.timeout if job.timeout and job.timeout > 0 else None
                await execute(task_id, mcp, run, self.runtime, slot=slot, timeout=timeout)
        except asyncio.CancelledError:  # a cold shutdown
            exc_info = sys.exc_info()
            if task_id is not None:
                message = "The worker running this task was stopped (cold shutdown)"
                await db(service.fail)(task_id, error_object(INTERNAL_ERROR, message))
        except BaseException:
            exc_info = sys.exc_info()
        finally:
            self.intake.ended(job.id)  # before its slot: the thread it wakes sees it ended
            slot.release()
        job.ended_at = now()
        ended = _Ended(job, queue, execution, exc_info, returned)
        if exc_info is None and job.result_ttl == 0 and task_id is not None:
            self.intake.succeeded.put(ended)  # forgotten by the dequeuing thread: no hop
            self._running.pop(job.id, None)  # after put: see _wait_for_job
            return
        await asyncio.get_running_loop().run_in_executor(self._bookkeeper, self._finalize, ended)

    def _finalize(self, ended: _Ended) -> None:
        """rq's bookkeeping of a job that failed, or of a job that is not a task's."""
        try:
            if ended.exc_info is not None:
                self._finalize_failure(ended.job, ended.queue, ended.execution, ended.exc_info)
            else:
                self._finalize_success(ended.job, ended.queue, ended.execution, ended.returned)
        except Exception:
            logger.exception("rq bookkeeping of job %s failed", ended.job.id)
        finally:
            self._running.pop(ended.job.id, None)

    def _forgot(self, forgotten: list[_Ended]) -> None:
        """Done with these jobs, forgotten or not (rq's maintenance cleans up the rest)."""
        for ended in forgotten:
            self.executions.pop(ended.execution.id, None)

    # -- rq state, heartbeats and commands --------------------------------------------------

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if state == WorkerStatus.IDLE and self._running:
            state = WorkerStatus.BUSY  # rq marks a dequeuing worker idle; ours may be busy too
        if pipeline is None and state == self._state:
            return
        super().set_state(state, pipeline)

    def check_for_suspension(self, burst: bool) -> None:
        # rq asks Redis before every job; a suspension (``rq suspend``) is seen within a second.
        if time.monotonic() - self._suspension_checked_at < 1:
            return
        self._suspension_checked_at = time.monotonic()
        super().check_for_suspension(burst)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        # rq beats several times per job; once every few seconds is plenty for the worker key.
        if timeout is None and pipeline is None:
            if time.monotonic() - self._last_rq_heartbeat < self.HEARTBEAT_EVERY:
                return
            self._last_rq_heartbeat = time.monotonic()
        super().heartbeat(timeout, pipeline)

    def _beat_executions(self) -> None:
        """Keep the running jobs' entries in rq's started registry alive."""
        if time.monotonic() - self._executions_beaten_at < self.job_monitoring_interval / 2:
            return
        self._executions_beaten_at = time.monotonic()
        for running in list(self._running.values()):
            job = running.job
            execution = next(
                (e for e in list(self.executions.values()) if e.job_id == job.id), None
            )
            if execution is None:
                continue
            try:
                self.maintain_heartbeats(job, execution)
            except Exception:
                logger.warning("rq heartbeat of job %s failed", job.id, exc_info=True)

    def handle_payload(self, message: Any) -> None:
        """rq's worker commands; ``stop-job``/``stop-execution`` cancel that task."""
        payload = parse_payload(message)
        if payload.get("command") in ("stop-job", "stop-execution"):
            entry = self._running.get(str(payload.get("job_id")))
            task_id = task_job_args(entry.job)[0] if entry else None
            if task_id is not None and self.loop_thread.loop is not None:
                self.loop_thread.submit(self._stop_task(task_id))
            return
        super().handle_payload(message)  # type: ignore[no-untyped-call]

    async def _stop_task(self, task_id: str) -> None:
        await db(service.cancel)(task_id, None)  # no-op when it is already cancelled
        if self.runtime is not None:
            self.runtime.deliver(task_id, "cancelled")

    # -- shutdown -----------------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Warm shutdown: stop taking jobs; :meth:`teardown` waits for the running ones."""
        self._stop_requested = True
        self.set_shutdown_requested_date()  # type: ignore[no-untyped-call]
        if self._interruptible:
            raise StopRequested()

    def request_force_stop(self, signum: int, frame: Any) -> None:
        """Cold shutdown: cancel the running jobs (their tasks fail with a clear message)."""
        if (now() - self._shutdown_requested_date).total_seconds() < 1:  # type: ignore[operator]
            return  # the same stop, delivered twice (worker pools do that)
        logger.warning("cold shutdown: cancelling %d running task jobs", self.running_jobs)
        for running in list(self._running.values()):
            if running.future is not None:
                running.future.cancel()
        deadline = time.monotonic() + 10  # seconds for the jobs to fail their tasks
        while self._running and time.monotonic() < deadline:
            time.sleep(0.05)
        raise SystemExit()

    def teardown(self) -> None:
        while self._running:  # warm shutdown: the running jobs finish first
            self._keep_alive()
            time.sleep(0.1)
        self.intake.settle()
        if metrics_hook.recorder is not None:
            metrics_hook.recorder.slots_changed(0, -self.slots.size)
        super().teardown()  # type: ignore[no-untyped-call]
        if self.newcomers is not None:
            self.newcomers.stop()
        self.loop_thread.stop()
        self._bookkeeper.shutdown(wait=True)


class EmbeddedTaskWorker(TaskWorker):
    """A :class:`TaskWorker` inside the ASGI process (embedded mode): no signal handlers."""

    def _install_signal_handlers(self) -> None:
        return None

    def freeze_startup_objects(self) -> None:
        return None  # the ASGI process did, when its application was built

    def request_stop(self, signum: Any = None, frame: Any = None) -> None:
        """Stop taking jobs: an idle worker, woken by its bell, ends at once."""
        self._stop_requested = True
        with contextlib.suppress(redis.exceptions.RedisError):
            for queue in self.queues:
                self.connection.rpush(fair_queue.bell_key(queue.name), "1")


def takes_task_jobs(worker_class: type[Any]) -> bool:
    """Whether workers of ``worker_class`` take task jobs (from the fair queue)."""
    return issubclass(worker_class, _FairDequeuing)


__all__ = [
    "EmbeddedTaskWorker",
    "TaskWorker",
    "maintain",
    "takes_task_jobs",
    "task_job_args",
]

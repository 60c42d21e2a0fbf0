"""The task runtime: what the jobs running on one event loop share.

- **Watches** (:class:`TaskWatch`): end a tool when its task ends; wake one awaiting an answer.
- **Wake-ups**: others' changes to a running task go to the channel-layer group of the name
  on its row (:func:`mcp_tasks.core.groups.worker_group`), joined once per process.
- **Heartbeat**: one query per ``TASK_HEARTBEAT_INTERVAL`` marks the claimed tasks alive and
  reads their statuses, so a lost wake-up is noticed within one interval.
- **Database calls**: from the loop on PostgreSQL (:attr:`Runtime.database`), else batched
  to Django's thread (:meth:`Runtime.call_db`).
- **Slots** (:class:`Slots`): at most ``TASK_CONCURRENCY`` tools at once; a task waiting
  for an answer gives its slot back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from channels.layers import get_channel_layer

from ...conf import get_config
from ...core import groups, metrics_hook
from ...core.db import db
from ...models import TERMINAL_STATUSES
from ..queues.coalesce import Coalesced, database_hop, each
from ..state import service
from ..state.loop_database import LoopDatabase

R = TypeVar("R")

logger = logging.getLogger("mcp_tasks.tasks")


class TaskWatch:
    """What the runtime knows of one running task."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.changed = asyncio.Event()
        self.tool: asyncio.Future[Any] | None = None
        self.ended = False
        #: Its claim went through; only then does the heartbeat beat for it (so that a
        #: resent claim finds the row as it left it).
        self.claimed = False
        #: Answers that came with a wake-up (question key → the committed answer).
        self.answers: dict[str, Any] = {}

    def seen(self, status: str | None, answers: dict[str, Any] | None = None) -> None:
        """The task's status as heard (None: row gone), and the answers the wake-up carried."""
        if answers:
            self.answers.update(answers)
        if status is None or status in TERMINAL_STATUSES:
            self.end()
        self.changed.set()

    def end(self) -> None:
        """Stop the tool at its next ``await`` (sync tools: ``Context`` call): the task ended."""
        self.ended = True
        if self.tool is not None and not self.tool.done():
            self.tool.cancel()
        self.changed.set()


class Slots:
    """At most ``size`` tools at once, across threads; tools back from an answer go first."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.used = 0
        self._lock = threading.Condition()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        #: A slot was given back, or :meth:`nudge` called, since :meth:`look` (a take).
        self._changed = False

    def wait_available(self, timeout: float) -> bool:
        """Block (the dequeuing thread) until a slot is free; False after ``timeout``."""
        with self._lock:
            return self._lock.wait_for(lambda: self.used < self.size and not self._waiters, timeout)

    def look(self) -> None:
        """The dequeuing thread looks at the queues now: what changed before is seen."""
        with self._lock:
            self._changed = False

    def wait_for_release(self, timeout: float) -> bool:
        """Block until a slot is freed or :meth:`nudge` (since :meth:`look`); False on timeout."""
        with self._lock:
            return self._lock.wait_for(lambda: self._changed, timeout)

    def nudge(self) -> None:
        """Wake :meth:`wait_for_release` from any thread: a job it may take arrived."""
        with self._lock:
            self._changed = True
            self._lock.notify_all()

    def free(self) -> int:
        """Slots free for new jobs now (none while tools wait to take one again)."""
        with self._lock:
            return 0 if self._waiters else max(0, self.size - self.used)

    def take_now(self) -> None:
        """Take a slot for a job just dequeued (checked free by :meth:`wait_available`)."""
        with self._lock:
            self.used += 1
            if metrics_hook.recorder is not None:
                metrics_hook.recorder.slots_changed(1, 0)

    async def take(self) -> None:
        """Take a slot from async code, waiting in line when none is free."""
        with self._lock:
            if self.used < self.size and not self._waiters:
                self.take_now()  # the lock is reentrant (Condition's RLock)
                return
            loop = asyncio.get_running_loop()
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, future))
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                if (loop, future) in self._waiters:
                    self._waiters.remove((loop, future))
                elif future.done() and not future.cancelled():
                    self._give_locked()  # handed over just as we gave up: pass it on
            raise

    def give(self) -> None:
        """Give a slot back: to the first waiting tool, else to the dequeuing thread."""
        with self._lock:
            self._give_locked()

    def _give_locked(self) -> None:
        while self._waiters:
            loop, future = self._waiters.popleft()
            if not future.done():
                loop.call_soon_threadsafe(_hand_over, self, future)
                return
        if self.used > 0:
            self.used -= 1
            if metrics_hook.recorder is not None:
                metrics_hook.recorder.slots_changed(-1, 0)
        self._changed = True
        self._lock.notify_all()


def _hand_over(slots: Slots, future: asyncio.Future[None]) -> None:
    """Give the slot to the tool awaiting ``future``; one cancelled since it was chosen
    (its task ended) no longer takes it: the slot goes on to the next in line."""
    if future.cancelled():
        slots.give()
    elif not future.done():
        future.set_result(None)


class JobSlot:
    """One job's hold on a slot; released while the tool waits for an answer."""

    def __init__(self, slots: Slots | None) -> None:
        self._slots = slots
        self.held = slots is not None

    def release(self) -> None:
        if self._slots is not None and self.held:
            self.held = False
            self._slots.give()

    async def reacquire(self) -> None:
        if self._slots is not None and not self.held:
            await self._slots.take()
            self.held = True


def process_name() -> str:
    """``host:pid:random``: names this process's runtime on the task rows it runs."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Runtime:
    """Shared by every task job on one event loop (see the module docstring)."""

    def __init__(self, slots: Slots | None = None, *, loop_database: bool = False) -> None:
        self.name = process_name()
        self.slots = slots
        #: The jobs' own statements on this loop (PostgreSQL, a task worker), else None.
        self.database = LoopDatabase.of_running_loop() if loop_database else None
        self.watches: dict[str, TaskWatch] = {}
        self._helpers: list[asyncio.Task[None]] = []
        self._joined = asyncio.Event()
        self._database_calls: Coalesced[tuple[Callable[..., Any], tuple[Any, ...]], Any] = (
            Coalesced(each(_call), database_hop)
        )

    async def call_db(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` in Django's thread (:func:`mcp_tasks.core.db.db`), batched."""
        result: R = await self._database_calls((fn, args))
        return result

    async def start(self) -> None:
        """Join this runtime's wake-up group and start the heartbeat (idempotent)."""
        if self._helpers:
            return
        self._helpers = [
            asyncio.ensure_future(self._listen()),
            asyncio.ensure_future(self._heartbeat()),
        ]
        # Joined before the first task starts, so no wake-up of it can be missed.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._joined.wait(), 5)

    async def stop(self) -> None:
        for helper in self._helpers:
            helper.cancel()
        # A blocking channel-layer read can outlive its cancellation by seconds.
        if self._helpers:
            await asyncio.wait(self._helpers, timeout=1)
        self._helpers = []
        if self.database is not None:
            await self.database.close()

    @contextlib.contextmanager
    def watch(self, task_id: str) -> Iterator[TaskWatch]:
        """Register a running task, so that wake-ups and heartbeats reach it."""
        watch = TaskWatch(task_id)
        self.watches[task_id] = watch
        try:
            yield watch
        finally:
            if self.watches.get(task_id) is watch:
                del self.watches[task_id]

    def deliver(
        self, task_id: str, status: str | None, answers: dict[str, Any] | None = None
    ) -> None:
        watch = self.watches.get(task_id)
        if watch is not None:
            watch.seen(status, answers)

    async def _listen(self) -> None:
        layer = get_channel_layer(get_config().CHANNEL_LAYER)
        if layer is None:
            self._joined.set()
            return
        channel = await layer.new_channel()
        group = groups.worker_group(self.name)
        try:
            await layer.group_add(group, channel)
        finally:
            self._joined.set()  # joined, or failed to: the heartbeat still polls
        try:
            while True:
                try:
                    message = await layer.receive(channel)
                except Exception:  # Redis hiccup or read timeout: the heartbeat still polls
                    logger.warning("task runtime: channel layer read failed", exc_info=True)
                    await asyncio.sleep(1)
                    continue
                if message.get("type") == "mcp.task":
                    answers = message.get("answers")
                    self.deliver(
                        str(message.get("task_id")),
                        message.get("status"),
                        answers if isinstance(answers, dict) else None,
                    )
        finally:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, channel)

    async def _heartbeat(self) -> None:
        beat = db(service.heartbeat)
        while True:
            await asyncio.sleep(get_config().TASK_HEARTBEAT_INTERVAL)
            task_ids = [task_id for task_id, watch in self.watches.items() if watch.claimed]
            if not task_ids:
                continue
            try:
                statuses = await beat(task_ids)
            except Exception:
                logger.warning("task heartbeat failed", exc_info=True)
                continue
            for task_id in task_ids:
                self.deliver(task_id, statuses.get(task_id))


def _call(call: tuple[Callable[..., Any], tuple[Any, ...]]) -> Any:
    fn, args = call
    return fn(*args)


_runtimes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Runtime] = (
    weakref.WeakKeyDictionary()
)


def runtime_for_loop(slots: Slots | None = None, *, loop_database: bool = False) -> Runtime:
    """The running loop's runtime, made once (``loop_database``: :attr:`Runtime.database`)."""
    loop = asyncio.get_running_loop()
    runtime = _runtimes.get(loop)
    if runtime is None:
        runtime = _runtimes[loop] = Runtime(slots, loop_database=loop_database)
    return runtime

"""A :class:`~mcp_tasks.tasks.worker.TaskWorker`'s event loop thread and :mod:`.runtime`."""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .runtime import Runtime, Slots, runtime_for_loop

logger = logging.getLogger("mcp_tasks.tasks")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when it is installed (the ``uvicorn`` extra), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """An event loop in a daemon thread, with ``slots.size + 2`` tool threads (a cancelled
    sync tool keeps its thread until its next ``Context`` call)."""

    def __init__(self, slots: Slots) -> None:
        self.slots = slots
        self.loop: asyncio.AbstractEventLoop | None = None
        self.runtime: Runtime | None = None
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None

    def start(self) -> None:
        """Start the loop and, on it, the runtime (joined to its wake-up group)."""
        loop = new_event_loop()
        self._executor = ThreadPoolExecutor(
            self.slots.size + 2, thread_name_prefix="mcp_tasks-tool"
        )
        loop.set_default_executor(self._executor)
        self.loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="mcp_tasks-task-loop", daemon=True
        )
        self._thread.start()
        self.runtime = self.call(self._start_runtime())

    async def _start_runtime(self) -> Runtime:
        runtime = runtime_for_loop(self.slots, loop_database=True)
        await runtime.start()
        return runtime

    def submit(self, coroutine: Any) -> Future[Any]:
        """Schedule ``coroutine`` on the loop from another thread."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, coroutine: Any, timeout: float | None = None) -> Any:
        """Run ``coroutine`` on the loop and wait for its result (another thread)."""
        return self.submit(coroutine).result(timeout)

    def stop(self) -> None:
        """Stop the runtime, then the loop (seconds each); the tool threads end with their tools."""
        if self.loop is None or self.runtime is None:
            return
        try:
            self.call(self.runtime.stop(), timeout=5)
        except Exception:
            logger.debug("the task runtime did not stop cleanly", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._executor is not None:
            self._executor.shutdown(wait=False)

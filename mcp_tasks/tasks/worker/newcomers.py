"""Wake a :class:`~mcp_tasks.tasks.worker.TaskWorker` whose free slots are reserved (it waits
for its own jobs to end, not on the bell) when another principal's job arrives: this thread
hears ``:newcomer`` and nudges :class:`~.runtime.Slots`; a lost message costs at most
``FORGET_WITHIN``."""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from typing import Any

from ..queues import fair_queue
from .runtime import Slots

logger = logging.getLogger("mcp_tasks.tasks")

#: Longest wait for a message before the listener checks for a stop.
STOP_CHECK = 1.0
#: Longest pause before the listener subscribes again after Redis failed it.
RETRY_CAP = 2.0


class NewcomerListener:
    """A daemon thread subscribed to the newcomer channels of ``queue_names``."""

    def __init__(self, connection: Any, queue_names: list[str], slots: Slots) -> None:
        self.connection = connection
        self.channels = [fair_queue.newcomer_channel(name) for name in queue_names]
        #: :meth:`stop` publishes here: the listener stops at once.
        self.stop_channel = f"{self.channels[0]}:stop:{secrets.token_hex(8)}"
        self.slots = slots
        self._stopped = threading.Event()
        #: Set once subscribed (cleared while Redis fails it).
        self.listening = threading.Event()
        self._wait = 0.1  # seconds before subscribing again after a failure
        self._thread = threading.Thread(target=self._run, name="mcp_tasks-newcomers", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(Exception):  # Redis gone: it stops within STOP_CHECK
            self.connection.publish(self.stop_channel, "stop")
        self._thread.join(STOP_CHECK + 1)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._listen()
            except Exception as error:  # Redis restarting, failing over: subscribe again
                self.listening.clear()
                logger.warning(
                    "newcomer listener: %s; subscribing again in %g s", error, self._wait
                )
                self._stopped.wait(self._wait)
                self._wait = min(self._wait * 2, RETRY_CAP)

    def _listen(self) -> None:
        pubsub = self.connection.pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(*self.channels, self.stop_channel)
            self._wait = 0.1
            self.slots.nudge()  # a newcomer may have come while it was not subscribed
            self.listening.set()
            while not self._stopped.is_set():
                if pubsub.get_message(timeout=STOP_CHECK) is not None:
                    self.slots.nudge()
        finally:
            pubsub.close()

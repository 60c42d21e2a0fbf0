"""Admission control: past ``MAX_REQUESTS_IN_PROGRESS`` POSTs in progress (not streams), a new
one gets HTTP 503 and ``Retry-After`` before its body is parsed (logged at most once a second).
:mod:`mcp_tasks.contrib.uvicorn_http` refuses those that waited too long in the backlog."""

from __future__ import annotations

import logging
import time

from ..conf import get_config
from ..core import metrics_hook
from ..core.jsonrpc import SERVER_BUSY, error_object, error_response
from .http import HttpError

logger = logging.getLogger("mcp_tasks.transport")

#: Seconds a refused client is asked to wait (``Retry-After``).
RETRY_AFTER = 1
#: Seconds between two warnings about refusals.
WARN_EVERY = 1.0


class Admission:
    """The POSTs in progress in this process."""

    def __init__(self) -> None:
        self.in_progress = 0
        self.refused = 0  # since the last warning
        self.warned_at = 0.0

    def enter(self) -> None:
        """Count one more request, or raise ``HttpError(503)`` when the process is full."""
        limit = get_config().MAX_REQUESTS_IN_PROGRESS
        if limit is not None and self.in_progress >= limit:
            raise self.refusal(f"{limit} requests in progress (MAX_REQUESTS_IN_PROGRESS)")
        self.in_progress += 1

    def leave(self) -> None:
        self.in_progress -= 1

    def refusal(self, why: str, reason: str = "in_progress") -> HttpError:
        """Count and (at most once a second) log one refusal; the 503 to answer it with
        (``reason``: its label in the metrics, ``in_progress`` or ``accept_wait``)."""
        self.refused += 1
        if metrics_hook.recorder is not None:
            metrics_hook.recorder.request_refused(reason)
        now = time.monotonic()
        if now - self.warned_at >= WARN_EVERY:
            logger.warning("refused %d request(s) with 503: %s", self.refused, why)
            self.refused, self.warned_at = 0, now
        message = f"Server busy: {why}; retry after {RETRY_AFTER}s"
        body = error_response(None, error_object(SERVER_BUSY, message))
        return HttpError(503, message, [(b"retry-after", str(RETRY_AFTER).encode())], body=body)


#: One per process (the requests of every event loop of the process count together).
admission = Admission()

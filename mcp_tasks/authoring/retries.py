"""Retries of background tasks whose failure is transient (``TaskConfig(retries=Retry(...))``,
or ``raise RetryTask``): between attempts the task stays ``working`` and holds no worker
slot; questions answered in an earlier attempt are replayed, not asked again."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from ..core import is_count


class RetryTask(Exception):  # noqa: N818 - an instruction, like Django's Http404
    """Raised by a task's tool: run the task again after ``delay`` seconds (None: the
    tool's back-off), if attempts are left (the tool's ``Retry.attempts``, else 3)."""

    def __init__(self, message: str = "", *, delay: float | None = None) -> None:
        super().__init__(message or "the tool asked for another attempt")
        if delay is not None and not 0 <= delay < math.inf:  # NaN fails too
            raise ValueError(f"RetryTask(delay={delay!r}): use a finite number of seconds >= 0")
        self.delay = delay


@dataclass(frozen=True)
class Retry:
    """How a task runs again after a transient failure.

    ``attempts``: runs in all, the first included. ``delay``: seconds before the second;
    each later one waits ``backoff`` times longer, at most ``max_delay``. ``on``: the
    exception classes that count as transient (``RetryTask`` always does)."""

    attempts: int = 3
    delay: float = 1.0
    backoff: float = 2.0
    max_delay: float = 60.0
    on: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        if not is_count(self.attempts):
            raise ImproperlyConfigured(f"Retry(attempts={self.attempts!r}): use an int >= 1")
        for name in ("delay", "max_delay"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value >= 0:  # NaN fails too
                raise ImproperlyConfigured(f"Retry({name}={value!r}): use seconds >= 0")
        if not isinstance(self.backoff, int | float) or not self.backoff >= 1:
            raise ImproperlyConfigured(f"Retry(backoff={self.backoff!r}): use a factor >= 1")
        on = self.on if isinstance(self.on, tuple) else (self.on,)
        if not all(isinstance(kind, type) and issubclass(kind, Exception) for kind in on):
            raise ImproperlyConfigured(
                f"Retry(on={self.on!r}): use a tuple of Exception subclasses"
            )
        object.__setattr__(self, "on", on)

    def delay_before(self, attempt: int) -> float:
        """Seconds to wait before attempt number ``attempt`` (2 for the first retry)."""
        return float(min(self.max_delay, self.delay * self.backoff ** max(0, attempt - 2)))

    def is_transient(self, error: BaseException) -> bool:
        return isinstance(error, (RetryTask, *self.on))


#: The policy of a tool that raises ``RetryTask`` without declaring ``retries``.
DEFAULT_RETRY = Retry()

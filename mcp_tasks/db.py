"""``db(fn)``: run a synchronous ORM function from async code (typed wrapper of Channels'
``database_sync_to_async``, which also closes stale connections)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar, cast

from channels.db import database_sync_to_async

P = ParamSpec("P")
R = TypeVar("R")


def db(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """The async version of ``fn``, run in a thread with database connection hygiene."""
    return cast("Callable[P, Awaitable[R]]", database_sync_to_async(fn))

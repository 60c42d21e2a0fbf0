"""PostgreSQL cannot store or compare a NUL (U+0000): a value to store with one is refused with
``-32602`` naming the field, before anything is written; an id or key with one names nothing."""

from __future__ import annotations

from typing import Any

from .. import jsontext
from ..core.jsonrpc import INVALID_PARAMS
from ..exceptions import ProtocolError


def require_storable(value: Any, field: str) -> None:
    """Raise ``-32602`` naming the place in ``value`` (found at ``field``) with a NUL."""
    where = jsontext.find(value, jsontext.NUL)
    if where is not None:
        raise ProtocolError(
            INVALID_PARAMS, f"{jsontext.describe(field, where)}: NUL characters are not allowed"
        )


def is_lookup_key(value: Any) -> bool:
    """True for a non-empty string that can name a stored row (a task id, a question key)."""
    return isinstance(value, str) and bool(value) and "\x00" not in value

"""Client data that the server stores or looks up must be storable.

PostgreSQL cannot keep a NUL character (U+0000) in text or JSON columns, nor compare one.
The rule (:mod:`mcp_tasks.jsontext`, README "Hostile input"): a value the server would store
with a NUL in it is refused with ``-32602`` naming the field, here in the protocol layer,
before anything is written; an id or key with a NUL names nothing that exists.
"""

from __future__ import annotations

from typing import Any

from .. import jsontext
from ..core.jsonrpc import INVALID_PARAMS
from ..exceptions import ProtocolError


def nul_error(field: str, path: jsontext.Path = ()) -> ProtocolError:
    """``-32602`` naming the field that holds a NUL character."""
    return ProtocolError(
        INVALID_PARAMS, f"{jsontext.describe(field, path)}: NUL characters are not allowed"
    )


def require_storable(value: Any, field: str) -> None:
    """Raise ``-32602`` naming the place in ``value`` (found at ``field``) with a NUL."""
    where = jsontext.find(value, jsontext.NUL)
    if where is not None:
        raise nul_error(field, where)


def is_lookup_key(value: Any) -> bool:
    """True for a non-empty string that can name a stored row (a task id, a question key)."""
    return isinstance(value, str) and bool(value) and "\x00" not in value

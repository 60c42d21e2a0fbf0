"""JSON values that cannot be sent or stored as they are, and what the app does with them.

A lone UTF-16 surrogate in a string (``"\\ud800"``) has no UTF-8 encoding: it can be neither
sent nor stored. PostgreSQL cannot store a NUL (U+0000) in text or JSON columns. ``NaN``,
``Infinity`` and numbers beyond a double's range (``1e999``) are not JSON. The rule (README,
"Hostile input"):

- **from a client**: a message with a lone surrogate anywhere, a non-finite number or
  nesting deeper than :data:`MAX_DEPTH` is refused whole
  (:func:`mcp_tasks.protocol.dispatch.parse_body`); a NUL character in a value the server
  would store is refused with ``-32602`` naming the field (:mod:`mcp_tasks.protocol.stored`);
- **from the server's own code** (tool results, log lines, progress, questions, errors):
  :func:`storable` and :func:`sendable` replace each such character with U+FFFD and each
  non-finite number with ``null``, and log a warning that says where.

A leaf module: it imports nothing from the app, so every layer may use it."""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterator
from typing import Any, TypeVar

logger = logging.getLogger("mcp_tasks.jsontext")

T = TypeVar("T")

#: Deepest nesting of objects and arrays accepted in a client's message.
MAX_DEPTH = 100
#: What replaces a character that cannot be sent or stored.
REPLACEMENT = "\ufffd"

NUL = re.compile("\x00")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

Path = tuple[str | int, ...]
#: A path built backwards without copying: ``(parent trail, key)`` or None at the root.
_Trail = tuple[Any, str | int] | None

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _path(trail: _Trail) -> Path:
    parts: list[str | int] = []
    while trail is not None:
        trail, key = trail
        parts.append(key)
    return tuple(reversed(parts))


def _nodes(value: Any) -> Iterator[tuple[Any, _Trail, int]]:
    """Every value and object key inside ``value`` (depth first, in document order), with
    its trail and nesting depth. Iterative: any depth is fine."""
    stack: list[tuple[Any, _Trail, int]] = [(value, None, 0)]
    while stack:
        node, trail, depth = stack.pop()
        yield node, trail, depth
        if isinstance(node, dict):
            children: list[tuple[Any, _Trail, int]] = []
            for key, item in node.items():
                child: _Trail = (trail, key)
                children += [(key, child, depth + 1), (item, child, depth + 1)]  # key first
            stack.extend(reversed(children))
        elif isinstance(node, list | tuple):
            stack.extend(
                (item, (trail, index), depth + 1) for index, item in reversed(list(enumerate(node)))
            )


def _flawed(node: Any, pattern: re.Pattern[str]) -> bool:
    if isinstance(node, str):
        return pattern.search(node) is not None
    return isinstance(node, float) and not math.isfinite(node)


def find(value: Any, pattern: re.Pattern[str]) -> Path | None:
    """The path of the first string (value or key) in ``value`` matching ``pattern``, or of
    the first non-finite number; None when there is none."""
    for node, trail, _depth in _nodes(value):
        if _flawed(node, pattern):
            return _path(trail)
    return None


def deeper_than(value: Any, limit: int) -> bool:
    """True when objects and arrays in ``value`` nest more than ``limit`` levels deep."""
    return any(depth > limit for _node, _trail, depth in _nodes(value))


def describe(field: str, path: Path) -> str:
    """``field`` followed by ``path`` as a reader writes it: ``params.arguments.tags[2]``,
    ``params._meta["io.modelcontextprotocol/clientInfo"]`` (odd keys JSON-escaped)."""
    text = field
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)}]"
    return text


def _rebuilt(value: Any, pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(REPLACEMENT, value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {_rebuilt(key, pattern): _rebuilt(item, pattern) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_rebuilt(item, pattern) for item in value)
    return value


def _repaired(value: T, pattern: re.Pattern[str], what: str, why: str) -> T:
    found = find(value, pattern)
    if found is None:
        return value
    logger.warning(
        "%s: %s held a character that %s, or a non-finite number: each replaced (U+FFFD, null)",
        what,
        describe("", found) or "the value",
        why,
    )
    repaired: T = _rebuilt(value, pattern)
    return repaired


def sendable(value: T, what: str) -> T:
    """``value`` ready to be sent as JSON text: lone surrogates become U+FFFD and non-finite
    numbers ``null`` (with a warning naming ``what``); unchanged when it is clean."""
    return _repaired(value, LONE_SURROGATE, what, "has no UTF-8 encoding")


def storable(value: T, what: str) -> T:
    """``value`` ready to be stored: as :func:`sendable`, and NUL characters become U+FFFD
    too (PostgreSQL cannot store them). For data the server produces; a client's data with
    a NUL is refused instead (:mod:`mcp_tasks.protocol.stored`)."""
    return _repaired(value, UNSTORABLE, what, "cannot be stored")

"""The MRTR ``requestState`` a modern client echoes back: signed (Django's signing), timed
(``REQUEST_STATE_TTL``) and bound to the principal, method, target and arguments; any
failure is the same ``-32602``."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.core import signing

from ..conf import get_config
from ..core.jsonrpc import INVALID_PARAMS
from ..exceptions import ProtocolError

_SALT = "mcp_tasks.request_state"


def arguments_digest(arguments: Any) -> str:
    """A stable digest of a request's arguments."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _binding(principal: str, method: str, target: str, arguments: Any) -> list[str]:
    return [principal, method, target, arguments_digest(arguments)]


def seal(
    answers: dict[str, Any],
    *,
    principal: str,
    method: str,
    target: str,
    arguments: Any,
    task_id: str | None = None,
) -> str:
    """An opaque token of the answers gathered so far (and, for a call following a task, its id)."""
    payload: dict[str, Any] = {"b": _binding(principal, method, target, arguments), "a": answers}
    if task_id is not None:
        payload["t"] = task_id
    return signing.dumps(payload, salt=_SALT, compress=True)


def unseal(
    token: Any, *, principal: str, method: str, target: str, arguments: Any
) -> dict[str, Any]:
    """Verify ``token`` for this request and return its answers, or raise ``-32602``."""
    answers, _ = unseal_with_task(
        token, principal=principal, method=method, target=target, arguments=arguments
    )
    return answers


def unseal_with_task(
    token: Any, *, principal: str, method: str, target: str, arguments: Any
) -> tuple[dict[str, Any], str | None]:
    """:func:`unseal`, and the task id sealed with the answers (None: no task)."""
    invalid = ProtocolError(
        INVALID_PARAMS,
        "Invalid requestState: expired, tampered with, or not issued for this request",
    )
    if not isinstance(token, str):
        raise invalid
    try:
        payload = signing.loads(
            token, salt=_SALT, max_age=timedelta(seconds=get_config().REQUEST_STATE_TTL)
        )
    except signing.BadSignature:
        raise invalid from None
    if not isinstance(payload, dict) or payload.get("b") != _binding(
        principal, method, target, arguments
    ):
        raise invalid
    answers, task_id = payload.get("a"), payload.get("t")
    if not isinstance(answers, dict) or not isinstance(task_id, str | None):
        raise invalid
    return answers, task_id

"""Sealing the MRTR ``requestState`` that a modern client echoes back.

The state is attacker-controlled on the way back, so it is signed with Django's signing
(keyed from ``SECRET_KEY``, honouring ``SECRET_KEY_FALLBACKS``), carries a timestamp checked
against ``REQUEST_STATE_TTL``, and is bound to the principal, the method, the target name
and a digest of the arguments. Any failure is the same ``-32602`` error.
"""

from __future__ import annotations

import hashlib
import json
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
    answers: dict[str, Any], *, principal: str, method: str, target: str, arguments: Any
) -> str:
    """Return an opaque token carrying the answers gathered so far."""
    payload = {"b": _binding(principal, method, target, arguments), "a": answers}
    return signing.dumps(payload, salt=_SALT, compress=True)


def unseal(
    token: Any, *, principal: str, method: str, target: str, arguments: Any
) -> dict[str, Any]:
    """Verify ``token`` for this request and return its answers, or raise ``-32602``."""
    invalid = ProtocolError(
        INVALID_PARAMS,
        "Invalid requestState: expired, tampered with, or not issued for this request",
    )
    if not isinstance(token, str):
        raise invalid
    try:
        payload = signing.loads(token, salt=_SALT, max_age=get_config()["REQUEST_STATE_TTL"])
    except signing.BadSignature:
        raise invalid from None
    if not isinstance(payload, dict) or payload.get("b") != _binding(
        principal, method, target, arguments
    ):
        raise invalid
    answers = payload.get("a")
    if not isinstance(answers, dict):
        raise invalid
    return answers

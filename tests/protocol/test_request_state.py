"""``requestState`` sealing (``mcp_tasks.protocol.request_state``): what a token is bound to,
tampering, keys and their rotation, expiry."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from mcp_tasks.exceptions import ProtocolError
from mcp_tasks.protocol import request_state

# -- request_state seal / unseal --------------------------------------------------------------

BINDING: dict[str, Any] = {
    "principal": "user:1",
    "method": "tools/call",
    "target": "book",
    "arguments": {"room": 5, "day": "mon"},
}


def unseal_error(token: Any, **binding: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        request_state.unseal(token, **{**BINDING, **binding})
    return caught.value


def test_request_state_round_trips_the_answers() -> None:
    token = request_state.seal({"k": {"action": "decline"}}, **BINDING)
    assert request_state.unseal(token, **BINDING) == {"k": {"action": "decline"}}


def test_request_state_ignores_argument_order() -> None:
    token = request_state.seal({}, **BINDING)
    assert request_state.unseal(token, **{**BINDING, "arguments": {"day": "mon", "room": 5}}) == {}


@pytest.mark.parametrize(
    "change",
    [
        {"principal": "user:2"},
        {"method": "prompts/get"},
        {"target": "cancel_booking"},
        {"arguments": {"room": 6, "day": "mon"}},
    ],
    ids=["principal", "method", "target", "arguments"],
)
def test_request_state_is_bound_to_its_request(change: dict[str, Any]) -> None:
    token = request_state.seal({}, **BINDING)
    assert unseal_error(token, **change).code == -32602


def test_tampered_request_state_is_rejected() -> None:
    token = request_state.seal({"k": {"action": "accept"}}, **BINDING)
    value, _, signature = token.rpartition(":")
    forged = value + ":" + signature[::-1]
    assert unseal_error(forged).code == -32602


def test_request_state_signed_with_another_key_is_rejected() -> None:
    with override_settings(SECRET_KEY="another-secret-key-entirely"):
        token = request_state.seal({}, **BINDING)
    assert unseal_error(token).code == -32602


def test_request_state_survives_a_key_rotation_with_fallbacks() -> None:
    with override_settings(SECRET_KEY="old-secret-key-of-the-project"):
        token = request_state.seal({"k": {}}, **BINDING)
    with override_settings(
        SECRET_KEY="new-secret-key-of-the-project",
        SECRET_KEY_FALLBACKS=["old-secret-key-of-the-project"],
    ):
        assert request_state.unseal(token, **BINDING) == {"k": {}}


@override_settings(MCP_TASKS={"REQUEST_STATE_TTL": 0})
def test_expired_request_state_is_rejected() -> None:
    token = request_state.seal({}, **BINDING)
    assert unseal_error(token).code == -32602


def test_all_request_state_failures_share_one_message() -> None:
    token = request_state.seal({}, **BINDING)
    messages = {
        unseal_error("garbage").message,
        unseal_error(token, principal="user:9").message,
        unseal_error(None).message,
    }
    assert len(messages) == 1

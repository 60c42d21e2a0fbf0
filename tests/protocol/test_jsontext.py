"""``mcp_tasks.jsontext``: finding what cannot be sent or stored, naming it, repairing it; and
the transport's encoder and stream that rely on it."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from mcp_tasks import jsontext
from mcp_tasks.core.jsonrpc import INVALID_PARAMS
from mcp_tasks.exceptions import ProtocolError
from mcp_tasks.protocol.stored import is_lookup_key, require_storable
from mcp_tasks.transport.response_stream import ResponseStream, encode_json


def test_find_names_the_first_string_with_a_match_in_document_order() -> None:
    value = {"a": ["ok", {"b": "x\x00"}], "c": "\x00"}
    assert jsontext.find(value, jsontext.NUL) == ("a", 1, "b")


def test_find_looks_at_object_keys_too() -> None:
    assert jsontext.find({"ok": {"k\ud800": 1}}, jsontext.LONE_SURROGATE) == ("ok", "k\ud800")


def test_find_reports_non_finite_numbers() -> None:
    assert jsontext.find([1.5, float("nan")], jsontext.NUL) == (1,)


def test_find_returns_none_for_clean_values_at_any_depth() -> None:
    deep: Any = "bottom"
    for _ in range(5000):  # far past the recursion limit: the walk is iterative
        deep = [deep]
    assert jsontext.find(deep, jsontext.UNSTORABLE) is None
    assert jsontext.deeper_than(deep, 4999) and not jsontext.deeper_than(deep, 5000)


def test_describe_writes_paths_as_a_reader_would() -> None:
    path = ("_meta", "io.modelcontextprotocol/clientInfo", "tags", 2, "\x00")
    assert jsontext.describe("params", path) == (
        'params._meta["io.modelcontextprotocol/clientInfo"].tags[2]["\\u0000"]'
    )
    assert jsontext.describe("", ("id",)) == "id"


def test_storable_replaces_nul_and_surrogates_and_nulls_non_finite_numbers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    value = {"text": "a\x00b\ud800", "k\x00": [float("inf"), 1], "n": 2.5}
    with caplog.at_level(logging.WARNING, "mcp_tasks.jsontext"):
        repaired = jsontext.storable(value, "the result of task T")
    assert repaired == {"text": "a\ufffdb\ufffd", "k\ufffd": [None, 1], "n": 2.5}
    assert "the result of task T: text held a character" in caplog.text


def test_storable_returns_a_clean_value_itself_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    value = {"text": "fine", "items": (1, "two")}
    assert jsontext.storable(value, "x") is value
    assert not caplog.records


def test_sendable_keeps_nul_which_json_can_carry() -> None:
    assert jsontext.sendable(["a\x00", "\udfff"], "x") == ["a\x00", "\ufffd"]


def test_require_storable_refuses_a_nul_with_invalid_params_naming_the_field() -> None:
    with pytest.raises(ProtocolError) as caught:
        require_storable({"note": "x\x00"}, "params.arguments")
    assert caught.value.code == INVALID_PARAMS
    assert caught.value.message == "params.arguments.note: NUL characters are not allowed"


@pytest.mark.parametrize(
    ("value", "usable"),
    [("abc", True), ("", False), ("a\x00", False), (5, False), (None, False)],
)
def test_only_non_empty_strings_without_nul_can_name_a_row(value: Any, usable: bool) -> None:
    assert is_lookup_key(value) is usable


# -- the transport's encoder and stream -------------------------------------------------------


def test_encode_json_repairs_a_lone_surrogate_instead_of_failing() -> None:
    encoded = encode_json({"jsonrpc": "2.0", "id": 1, "result": {"text": "x\ud800"}})
    assert json.loads(encoded) == {"jsonrpc": "2.0", "id": 1, "result": {"text": "x\ufffd"}}


def test_encode_json_never_writes_nan() -> None:
    assert json.loads(encode_json({"value": float("nan")})) == {"value": None}


class Collector:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.sent.append(message)


async def test_a_final_message_that_cannot_be_encoded_leaves_the_stream_open() -> None:
    """The bug behind issue 10 §1: the stream counted itself closed, then failed to encode,
    so the error response found it closed and nothing was ever sent."""
    send = Collector()
    stream = ResponseStream(send)
    with pytest.raises(TypeError):
        await stream.finish({"result": object()})
    assert not stream.closed and not send.sent
    await stream.finish({"error": {"code": -32603, "message": "Internal error"}}, status=500)
    assert send.sent[0]["status"] == 500
    assert json.loads(send.sent[1]["body"])["error"]["code"] == -32603

"""Shared expectations for the SDK-client tests of both eras: every elicitation response
type of ``tests.live_tools.tools.elicit_kind``, what the client is asked, what it answers and
what the tool receives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types


@dataclass(frozen=True)
class ElicitCase:
    kind: str
    schema: dict[str, Any]  # facts the requestedSchema must show (a subset, per property)
    required: list[str]
    answer: dict[str, Any]  # the client's accepted content
    data: Any  # what the tool received (JSON form)
    type_name: str  # the Python type the tool received


ELICIT_CASES = [
    ElicitCase("str", {"value": {"type": "string"}}, ["value"], {"value": "Ada"}, "Ada", "str"),
    ElicitCase("int", {"value": {"type": "integer"}}, ["value"], {"value": 42}, 42, "int"),
    ElicitCase("float", {"value": {"type": "number"}}, ["value"], {"value": 2.5}, 2.5, "float"),
    ElicitCase("bool", {"value": {"type": "boolean"}}, ["value"], {"value": True}, True, "bool"),
    ElicitCase(
        "enum",
        {"value": {"enum": ["red", "green", "blue"]}},
        ["value"],
        {"value": "green"},
        "green",
        "Color",
    ),
    ElicitCase(
        "literal",
        {"value": {"type": "string", "enum": ["small", "medium", "large"]}},
        ["value"],
        {"value": "medium"},
        "medium",
        "str",
    ),
    ElicitCase(
        "multi",
        {
            "value": {
                "type": "array",
                "items": {"type": "string", "enum": ["cheese", "ham", "olives"]},
            }
        },
        ["value"],
        {"value": ["cheese", "olives"]},
        ["cheese", "olives"],
        "list",
    ),
    ElicitCase(
        "model",
        {
            "name": {"type": "string", "description": "Full name"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
        },
        ["name", "age"],
        {"name": "Ada", "age": 36},
        {"name": "Ada", "age": 36},
        "Person",
    ),
    ElicitCase(
        "dataclass",
        {"city": {"type": "string"}, "express": {"type": "boolean", "default": False}},
        ["city"],
        {"city": "Oslo", "express": True},
        {"city": "Oslo", "express": True},
        "Shipping",
    ),
    ElicitCase(
        "typeddict",
        {"verbose": {"type": "boolean"}, "level": {"type": "integer"}},
        ["verbose", "level"],
        {"verbose": True, "level": 3},
        {"verbose": True, "level": 3},
        "dict",
    ),
    ElicitCase("none", {}, [], {}, None, "NoneType"),
]

CASE_BY_KIND = {case.kind: case for case in ELICIT_CASES}
KINDS = [case.kind for case in ELICIT_CASES]


def kind_of_message(message: str) -> str:
    """``elicit_kind`` asks "Please answer with a <kind>"."""
    return message.rsplit(" ", 1)[-1]


def check_requested_schema(case: ElicitCase, schema: dict[str, Any]) -> None:
    """The flat form schema the client was shown fits ``case``."""
    assert schema["type"] == "object"
    properties = schema.get("properties", {})
    assert set(properties) == set(case.schema), schema
    for name, facts in case.schema.items():
        for key, value in facts.items():
            if key == "items":
                for item_key, item_value in value.items():
                    assert properties[name]["items"][item_key] == item_value, schema
            else:
                assert properties[name][key] == value, schema
        assert properties[name].get("type", "string") in (
            "string",
            "number",
            "integer",
            "boolean",
            "array",
        )
    assert sorted(schema.get("required", [])) == sorted(case.required), schema
    # Elicitation schemas are flat: no references, no nested objects.
    assert "$defs" not in schema
    assert all("$ref" not in prop and prop.get("type") != "object" for prop in properties.values())


def elicitation_responder(
    action: Literal["accept", "decline", "cancel"], seen: list[dict[str, Any]] | None = None
) -> Any:
    """An SDK ``elicitation_callback`` answering ``elicit_kind`` with ``action``; it records
    each request's message and schema in ``seen``."""

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        schema = params.requested_schema
        schema = (
            schema
            if isinstance(schema, dict)
            else schema.model_dump(by_alias=True, exclude_none=True)
        )
        if seen is not None:
            seen.append({"message": params.message, "schema": schema})
        if action != "accept":
            return types.ElicitResult(action=action)
        case = CASE_BY_KIND[kind_of_message(params.message)]
        return types.ElicitResult(action="accept", content=case.answer)

    return callback

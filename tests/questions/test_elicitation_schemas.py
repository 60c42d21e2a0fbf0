"""Elicitation schemas (``mcp_tasks.authoring.elicitation.elicitation_spec``): the requested schema of
each response type, the types refused, and how an answer is parsed."""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from typing import Any, Literal

import pytest
import typing_extensions
from mcp_types._v2025_11_25 import PrimitiveSchemaDefinition
from pydantic import BaseModel, Field, TypeAdapter

from mcp_tasks import AcceptedElicitation, CancelledElicitation, DeclinedElicitation
from mcp_tasks.authoring.elicitation import elicitation_spec
from mcp_tasks.authoring.inputs import ElicitInput

# -- elicitation schemas ----------------------------------------------------------------------


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


class Person(BaseModel):
    name: str = Field(min_length=1, description="Full name")
    age: int = Field(ge=0)
    email: str = Field(default="", json_schema_extra={"format": "email"})


@dataclasses.dataclass
class Address:
    city: str
    zip_code: str = "0000"


class ExtFlags(typing_extensions.TypedDict):
    verbose: bool
    level: int


class StdFlags(typing.TypedDict):
    verbose: bool
    level: int


_PRIMITIVE = TypeAdapter(PrimitiveSchemaDefinition)


def properties_of(response_type: Any) -> dict[str, Any]:
    schema = elicitation_spec(response_type).requested_schema
    assert schema["type"] == "object"
    for prop in schema["properties"].values():
        _PRIMITIVE.validate_python(prop)  # each property is a spec PrimitiveSchemaDefinition
        assert "$ref" not in json.dumps(prop)
    assert "$defs" not in schema
    properties: dict[str, Any] = schema["properties"]
    return properties


@pytest.mark.parametrize(
    ("response_type", "json_type"),
    [(str, "string"), (int, "integer"), (float, "number"), (bool, "boolean")],
)
def test_scalar_is_asked_as_a_required_value(response_type: type, json_type: str) -> None:
    spec = elicitation_spec(response_type)
    assert spec.requested_schema["required"] == ["value"]
    assert properties_of(response_type) == {"value": {"type": json_type}}


def test_enum_is_a_single_select() -> None:
    assert properties_of(Size)["value"]["enum"] == ["small", "large"]


def test_literal_is_a_single_select() -> None:
    assert properties_of(Literal["a", "b"])["value"] == {"type": "string", "enum": ["a", "b"]}


def test_list_of_literal_is_a_multi_select() -> None:
    value = properties_of(list[Literal["x", "y"]])["value"]
    assert value["type"] == "array"
    assert value["items"]["enum"] == ["x", "y"]


def test_list_of_enum_is_a_multi_select() -> None:
    value = properties_of(list[Size])["value"]
    assert value["type"] == "array"
    assert value["items"]["enum"] == ["small", "large"]


def test_pydantic_model_is_asked_field_by_field() -> None:
    properties = properties_of(Person)
    assert properties["name"]["type"] == "string"
    assert properties["name"]["minLength"] == 1
    assert properties["name"]["description"] == "Full name"
    assert properties["age"] == {"type": "integer", "minimum": 0, "title": "Age"}
    assert properties["email"]["format"] == "email"
    assert elicitation_spec(Person).requested_schema["required"] == ["name", "age"]


def test_a_response_type_asked_again_gets_a_schema_of_its_own() -> None:
    # Specs are built once per type: a caller that changes its schema changes no other.
    first = elicitation_spec(Person).requested_schema
    first["properties"]["name"]["description"] = "changed"
    first["required"].append("extra")
    again = elicitation_spec(Person).requested_schema
    assert again["properties"]["name"]["description"] == "Full name"
    assert again["required"] == ["name", "age"]


def test_literals_equal_to_typing_keep_their_own_order() -> None:
    assert Literal["b", "a"] == Literal["a", "b"]  # typing's equality ignores the order
    assert properties_of(Literal["b", "a"])["value"]["enum"] == ["b", "a"]
    assert properties_of(Literal["a", "b"])["value"]["enum"] == ["a", "b"]


def test_an_unhashable_response_type_is_still_asked() -> None:
    class Unhashable(type):  # __eq__ without __hash__: its classes cannot be hashed
        def __eq__(cls, other: object) -> bool:
            return cls is other

    @dataclasses.dataclass
    class Answer(metaclass=Unhashable):
        count: int

    with pytest.raises(TypeError):
        hash(Answer)
    spec = elicitation_spec(Answer)
    assert spec.requested_schema["properties"]["count"]["type"] == "integer"
    answer = spec.parse({"action": "accept", "content": {"count": 3}})
    assert isinstance(answer, AcceptedElicitation) and answer.data == Answer(count=3)


def test_dataclass_is_asked_field_by_field() -> None:
    properties = properties_of(Address)
    assert properties["city"]["type"] == "string"
    assert properties["zip_code"]["default"] == "0000"
    assert elicitation_spec(Address).requested_schema["required"] == ["city"]


def test_typing_extensions_typeddict_is_asked_field_by_field() -> None:
    properties = properties_of(ExtFlags)
    assert properties["verbose"]["type"] == "boolean"
    assert properties["level"]["type"] == "integer"


def test_typing_typeddict_is_asked_field_by_field() -> None:
    properties = properties_of(StdFlags)
    assert properties["verbose"]["type"] == "boolean"
    assert properties["level"]["type"] == "integer"


def test_optional_model_field_is_an_optional_primitive() -> None:
    class Profile(BaseModel):
        name: str
        nickname: str | None = None

    properties = properties_of(Profile)
    assert properties["nickname"]["type"] == "string"
    assert elicitation_spec(Profile).requested_schema["required"] == ["name"]


def test_none_asks_for_a_bare_confirmation() -> None:
    spec = elicitation_spec(None)
    assert spec.requested_schema == {"type": "object", "properties": {}}
    assert spec.parse({"action": "accept", "content": {}}) == AcceptedElicitation(data=None)


def test_nested_model_is_refused() -> None:
    class Outer(BaseModel):
        inner: Person

    with pytest.raises(TypeError, match="flat"):
        elicitation_spec(Outer)


@pytest.mark.parametrize("response_type", [dict, list[str], bytes, Person | None])
def test_unsupported_response_type_is_refused(response_type: Any) -> None:
    with pytest.raises(TypeError):
        elicitation_spec(response_type)


@pytest.mark.parametrize(
    ("response_type", "content", "expected"),
    [
        (str, {"value": "hi"}, "hi"),
        (int, {"value": 3}, 3),
        (float, {"value": 1.5}, 1.5),
        (bool, {"value": False}, False),
        (Size, {"value": "large"}, Size.LARGE),
        (Literal["a", "b"], {"value": "b"}, "b"),
        (list[Literal["x", "y"]], {"value": ["y"]}, ["y"]),
        (Person, {"name": "Ada", "age": 36}, Person(name="Ada", age=36)),
        (Address, {"city": "Oslo"}, Address(city="Oslo")),
        (ExtFlags, {"verbose": True, "level": 2}, {"verbose": True, "level": 2}),
    ],
    ids=[
        "str",
        "int",
        "float",
        "bool",
        "enum",
        "literal",
        "multi",
        "model",
        "dataclass",
        "typeddict",
    ],
)
def test_accepted_content_is_parsed_into_the_response_type(
    response_type: Any, content: dict[str, Any], expected: Any
) -> None:
    parsed = elicitation_spec(response_type).parse({"action": "accept", "content": content})
    assert parsed == AcceptedElicitation(data=expected)
    assert type(parsed.data) is type(expected)


def test_accepted_content_of_the_wrong_type_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="does not match"):
        elicitation_spec(int).parse({"action": "accept", "content": {"value": "many"}})


@pytest.mark.parametrize(
    "schema", [str, Person, {"type": "object", "properties": {}}], ids=["str", "model", "form"]
)
def test_accepted_content_that_is_not_an_object_is_a_value_error(schema: Any) -> None:
    spec = ElicitInput.of("Which?", schema).spec()
    with pytest.raises(ValueError, match="must be an object"):
        spec.parse({"action": "accept", "content": ["ab"]})


def test_decline_and_cancel_are_parsed() -> None:
    spec = elicitation_spec(str)
    assert spec.parse({"action": "decline"}) == DeclinedElicitation()
    assert spec.parse({"action": "cancel"}) == CancelledElicitation()


def test_unknown_action_counts_as_cancel() -> None:
    assert elicitation_spec(str).parse({"action": "shrug"}) == CancelledElicitation()

"""Python response types ⇄ the flat schema of ``elicitation/create``: a scalar type (or a
list of Enum/Literal) is asked as one ``value`` property, a model, dataclass or TypedDict
field by field, ``None`` as a bare confirmation."""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import typing_extensions
from pydantic import BaseModel, TypeAdapter, ValidationError

T = TypeVar("T")
R = TypeVar("R")

_PRIMITIVES = {"string", "number", "integer", "boolean"}


@dataclass(frozen=True)
class AcceptedElicitation(Generic[T]):
    """The user accepted and supplied ``data`` (of the requested response type)."""

    data: T
    action: Literal["accept"] = "accept"


@dataclass(frozen=True)
class DeclinedElicitation:
    """The user explicitly declined to answer."""

    action: Literal["decline"] = "decline"


@dataclass(frozen=True)
class CancelledElicitation:
    """The question was dismissed, timed out or could not be asked."""

    action: Literal["cancel"] = "cancel"


ElicitationResult = AcceptedElicitation[Any] | DeclinedElicitation | CancelledElicitation


def _is_scalar(response_type: Any) -> bool:
    origin = typing.get_origin(response_type)
    if response_type in (str, int, float, bool) or origin is Literal:
        return True
    if isinstance(response_type, type) and issubclass(response_type, enum.Enum):
        return True
    if origin in (list, set, tuple):
        (item,) = typing.get_args(response_type)[:1] or (str,)
        return typing.get_origin(item) is Literal or (
            isinstance(item, type) and issubclass(item, enum.Enum)
        )
    return False


def _is_structured(response_type: Any) -> bool:
    if isinstance(response_type, type) and issubclass(response_type, BaseModel):
        return True
    if dataclasses.is_dataclass(response_type):
        return True
    return typing_extensions.is_typeddict(response_type)


def _pydantic_ready(response_type: Any) -> Any:
    """Before Python 3.12 pydantic needs ``typing_extensions.TypedDict``: rebuild a
    ``typing.TypedDict`` as one, keeping which keys are required."""
    if sys.version_info >= (3, 12) or not typing.is_typeddict(response_type):
        return response_type
    if type(response_type).__module__ == "typing_extensions":
        return response_type
    hints = typing.get_type_hints(response_type, include_extras=True)
    required = getattr(response_type, "__required_keys__", frozenset(hints))
    fields = {
        name: hint if name in required else typing_extensions.NotRequired[hint]
        for name, hint in hints.items()
    }
    return typing_extensions.TypedDict(response_type.__name__, fields)  # type: ignore[operator]


def _flatten(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$ref``s and drop what the elicitation schema does not allow."""
    defs = schema.pop("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        options = node.get("anyOf")
        if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            # Optional[X]: ask for X, not required (the SDK does the same).
            rest = {
                k: v for k, v in node.items() if k != "anyOf" and not (k == "default" and v is None)
            }
            (inner,) = [option for option in options if option != {"type": "null"}]
            return resolve({**inner, **rest})
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return resolve(merged)
        if "allOf" in node and len(node["allOf"]) == 1:
            rest = {k: v for k, v in node.items() if k != "allOf"}
            return resolve({**node["allOf"][0], **rest})
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            node = {**node, "items": resolve(node["items"])}
        return node

    properties = {name: resolve(prop) for name, prop in schema.get("properties", {}).items()}
    for name, prop in properties.items():
        kind = prop.get("type")
        if kind == "array":
            items = prop.get("items", {})
            if "enum" not in items and "anyOf" not in items and "oneOf" not in items:
                raise TypeError(f"elicitation field {name!r}: arrays must be of enum values")
        elif kind not in _PRIMITIVES and "enum" not in prop and "oneOf" not in prop:
            raise TypeError(
                f"elicitation field {name!r} has type {kind!r}; elicitation schemas are flat: "
                "use str, int, float, bool, an Enum/Literal, or a list of Enum/Literal values"
            )
    flat: dict[str, Any] = {"type": "object", "properties": properties}
    if schema.get("required"):
        flat["required"] = schema["required"]
    if schema.get("title"):
        flat["title"] = schema["title"]
    return flat


@dataclass(frozen=True)
class ElicitationSpec:
    """How to ask for a response type and how to read the answer back."""

    response_type: Any
    requested_schema: dict[str, Any]
    wrapped: bool

    def parse(self, result: dict[str, Any]) -> ElicitationResult:
        """An ``ElicitResult`` dict as an Accepted/Declined/Cancelled value; ``ValueError``
        when accepted content does not fit the response type."""
        action = result.get("action")
        if action == "decline":
            return DeclinedElicitation()
        if action != "accept":
            return CancelledElicitation()
        content = result.get("content") or {}
        if not isinstance(content, dict):
            raise ValueError(
                f"elicitation answer content must be an object, not {type(content).__name__}"
            )
        if self.response_type is None:
            return AcceptedElicitation(data=None)
        if self.response_type is dict:
            return AcceptedElicitation(data=dict(content))
        payload = content.get("value") if self.wrapped else content
        try:
            data = _adapter(self.response_type).validate_python(payload)
        except ValidationError as exc:
            raise ValueError(
                f"elicitation answer does not match the requested type: {exc}"
            ) from exc
        return AcceptedElicitation(data=data)


def _per_type(build: Callable[[Any], R]) -> Callable[[Any], R]:
    """``build(response_type)``, kept for the next call with the same type (building costs
    far more than using what was built). Keyed by the type with its ``repr``: typing's
    equality ignores order (``Literal["b", "a"] == Literal["a", "b"]``), the schema does
    not. An unhashable type is built each time."""
    cached = functools.lru_cache(maxsize=256)(lambda key: build(key[0]))

    def built(response_type: Any) -> R:
        try:
            hash(response_type)
        except TypeError:
            return build(response_type)
        return cached((response_type, repr(response_type)))

    return built


#: A pydantic ``TypeAdapter`` for a response type, built once per type.
_adapter: Callable[[Any], TypeAdapter[Any]] = _per_type(TypeAdapter)


def elicitation_spec(response_type: Any) -> ElicitationSpec:
    """Build the ``requestedSchema`` for ``response_type`` (see the module docstring).

    Built once per response type; each call gets its own copy of the schema."""
    spec = _spec(response_type)
    return dataclasses.replace(spec, requested_schema=copy.deepcopy(spec.requested_schema))


def _build_spec(response_type: Any) -> ElicitationSpec:
    if response_type is None or response_type is types.NoneType:
        return ElicitationSpec(None, {"type": "object", "properties": {}}, wrapped=False)
    if _is_scalar(response_type):
        inner = _adapter(response_type).json_schema()
        schema = {"type": "object", "properties": {"value": inner}, "required": ["value"]}
        if "$defs" in inner:  # e.g. list[SomeEnum]: hoist the definitions for _flatten
            schema["$defs"] = inner.pop("$defs")
        return ElicitationSpec(response_type, _flatten(schema), wrapped=True)
    if _is_structured(response_type):
        response_type = _pydantic_ready(response_type)
        schema = _adapter(response_type).json_schema()
        return ElicitationSpec(response_type, _flatten(schema), wrapped=False)
    raise TypeError(
        f"unsupported elicitation response type {response_type!r}: use None, str, int, float, "
        "bool, an Enum, a Literal, a list of Enum/Literal, a pydantic model, a dataclass or a "
        "TypedDict"
    )


_spec = _per_type(_build_spec)

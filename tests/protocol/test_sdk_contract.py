"""Contract of the mcp SDK helpers mcp_tasks relies on that are not documented public API.

mcp_tasks builds tool schemas and results with ``mcp.server.mcpserver.utilities.func_metadata``
(pinned ``mcp>=2.3,<2.4`` in pyproject.toml). If a new SDK release changes any of this, these
tests fail first, with a message naming what changed.
"""

from __future__ import annotations

from importlib.metadata import version

import mcp_types as types
import pytest
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from pydantic import BaseModel, ValidationError


class Point(BaseModel):
    x: int
    y: int


def typed(a: int, b: list[int], ctx: object = None) -> Point:
    return Point(x=a, y=sum(b))


def untyped(a, b):  # type: ignore[no-untyped-def]
    return f"{a}{b}"


def test_the_sdk_is_the_pinned_minor_release() -> None:
    assert version("mcp").startswith("2.3."), "mcp_tasks pins mcp 2.3.x; re-check this contract"


def test_func_metadata_returns_func_metadata_without_skipped_parameters() -> None:
    meta = func_metadata(typed, skip_names=["ctx"], structured_output=None)
    assert isinstance(meta, FuncMetadata)
    schema = meta.arg_model.model_json_schema(by_alias=True)
    assert set(schema["properties"]) == {"a", "b"}
    assert schema["required"] == ["a", "b"]


def test_validate_arguments_returns_keyword_arguments_and_parses_json_strings() -> None:
    meta = func_metadata(typed, skip_names=["ctx"])
    assert meta.validate_arguments({"a": 1, "b": "[2, 3]"}) == {"a": 1, "b": [2, 3]}


def test_validate_arguments_raises_pydantic_validation_errors_naming_the_field() -> None:
    meta = func_metadata(typed, skip_names=["ctx"])
    with pytest.raises(ValidationError) as raised:
        meta.validate_arguments({"a": "x", "b": []})
    assert raised.value.errors()[0]["loc"] == ("a",)


def test_typed_return_gives_output_schema_and_structured_content() -> None:
    meta = func_metadata(typed, skip_names=["ctx"])
    assert meta.output_schema is not None
    assert set(meta.output_schema["properties"]) == {"x", "y"}
    result = meta.convert_result(Point(x=1, y=5))
    assert isinstance(result, types.CallToolResult)
    assert result.structured_content == {"x": 1, "y": 5}
    assert result.content[0].type == "text"


def test_untyped_return_gives_unstructured_text_content() -> None:
    meta = func_metadata(untyped)
    assert meta.output_schema is None
    result = meta.convert_result("ab")
    assert isinstance(result, types.CallToolResult)
    assert result.structured_content is None
    assert result.content[0].text == "ab"  # type: ignore[union-attr]


def test_convert_result_passes_call_tool_results_through() -> None:
    meta = func_metadata(untyped)
    given = types.CallToolResult(
        content=[types.TextContent(type="text", text="as is")], is_error=True
    )
    assert meta.convert_result(given) is given

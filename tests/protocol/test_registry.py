"""``TaskConfig`` and the registry (``MCPServer``): task modes, names, duplicates, decorators
and the injected context parameter."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_tasks import Context, MCPServer, Retry, RetryTask, TaskConfig

#: Values that are no number of seconds a task can keep.
BAD_SECONDS = [math.nan, math.inf, -1, True, "60", 1e12]

# -- TaskConfig and the registry --------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "mode"),
    [
        (True, "optional"),
        (False, "forbidden"),
        (None, "forbidden"),
        ("required", "required"),
        ("optional", "optional"),
        ("forbidden", "forbidden"),
    ],
)
def test_task_config_coercion(task: Any, mode: str) -> None:
    assert TaskConfig.coerce(task).mode == mode


def test_task_config_passes_through_a_config() -> None:
    config = TaskConfig(mode="required", ttl=60, poll_interval=1.0, queue="q", timeout=30)
    assert TaskConfig.coerce(config) is config


@pytest.mark.parametrize("task", ["sometimes", 3, ["optional"]])
def test_task_config_rejects_anything_else(task: Any) -> None:
    with pytest.raises(ImproperlyConfigured):
        TaskConfig.coerce(task)


@pytest.mark.parametrize(
    "field", [{"ttl": v} for v in BAD_SECONDS] + [{"poll_interval": v} for v in BAD_SECONDS]
)
def test_task_config_refuses_a_ttl_or_poll_interval_that_is_no_seconds(
    field: dict[str, Any],
) -> None:
    with pytest.raises(ImproperlyConfigured, match=next(iter(field))):
        TaskConfig(**field)


def test_task_config_takes_a_ttl_up_to_a_century_and_a_poll_interval_a_row_holds() -> None:
    config = TaskConfig(ttl=100 * 365 * 86400, poll_interval=2_147_483.647)
    assert (config.ttl, config.poll_interval) == (100 * 365 * 86400, 2_147_483.647)
    with pytest.raises(ImproperlyConfigured, match="ttl"):
        TaskConfig(ttl=100 * 365 * 86400 + 1)  # its expiry: a date past year 9999 soon after
    with pytest.raises(ImproperlyConfigured, match="poll_interval"):
        TaskConfig(poll_interval=30 * 86400)  # 2.6e9 ms: past PostgreSQL's integer


@pytest.mark.parametrize("delay", [-1.0, math.nan, math.inf])
def test_retry_task_refuses_a_delay_that_is_no_finite_number_of_seconds(delay: float) -> None:
    with pytest.raises(ValueError, match="finite number of seconds"):
        RetryTask(delay=delay)
    assert RetryTask(delay=0).delay == 0 and RetryTask(delay=2.5).delay == 2.5


@pytest.mark.parametrize("field", ["delay", "max_delay", "backoff"])
def test_retry_refuses_nan(field: str) -> None:
    fields: dict[str, Any] = {field: math.nan}
    with pytest.raises(ImproperlyConfigured, match=field):
        Retry(**fields)
    assert Retry(max_delay=math.inf).delay_before(3) == 2.0  # no cap is fine


def test_tool_task_argument_is_stored_as_task_config() -> None:
    registry = MCPServer()

    @registry.tool(task=True)
    async def background() -> str:
        return ""

    @registry.tool()
    def inline() -> str:
        return ""

    assert registry.tools["background"].task == TaskConfig(mode="optional")
    assert registry.tools["inline"].task.mode == "forbidden"


def test_duplicate_tool_name_is_improperly_configured() -> None:
    registry = MCPServer()

    @registry.tool(name="same")
    def first() -> str:
        return "1"

    with pytest.raises(ImproperlyConfigured, match="same"):

        @registry.tool(name="same")
        def second() -> str:
            return "2"


def test_reregistering_the_same_function_is_harmless() -> None:
    registry = MCPServer()

    def tool() -> str:
        return ""

    registry.tool()(tool)
    registry.tool()(tool)
    assert list(registry.tools) == ["tool"]


def test_duplicate_prompt_name_is_improperly_configured() -> None:
    registry = MCPServer()

    @registry.prompt(name="p")
    def one() -> str:
        return ""

    with pytest.raises(ImproperlyConfigured):

        @registry.prompt(name="p")
        def two() -> str:
            return ""


@pytest.mark.parametrize("name", ["has space", "", "x" * 129, "slash/name"])
def test_invalid_tool_name_is_improperly_configured(name: str) -> None:
    registry = MCPServer()
    with pytest.raises(ImproperlyConfigured):
        registry.tool(name=name)(lambda: "")


def test_tool_decorator_without_parentheses_is_a_type_error() -> None:
    registry = MCPServer()
    with pytest.raises(TypeError, match="parentheses"):
        registry.tool(lambda: "")  # type: ignore[arg-type]


def test_resource_template_variables_must_match_the_parameters() -> None:
    registry = MCPServer()
    with pytest.raises(ImproperlyConfigured):

        @registry.resource("unit://items/{item_id}")
        def item(other: str) -> str:
            return other


def test_context_parameter_is_injected_and_left_out_of_the_schema() -> None:
    registry = MCPServer()

    @registry.tool()
    async def with_context(query: str, context: Context) -> str:
        return query

    spec = registry.tools["with_context"]
    assert spec.context_param == "context"
    assert set(spec.input_schema["properties"]) == {"query"}


def test_a_tool_builds_its_models_on_first_use() -> None:
    server = MCPServer()

    @server.tool()
    def lazy(n: int) -> int:
        return n

    spec = server.tools["lazy"]
    assert "metadata" not in vars(spec)  # nothing built at registration
    assert spec.input_schema["properties"]["n"]["type"] == "integer"
    assert "metadata" in vars(spec)


def test_e021_reports_a_signature_that_cannot_be_described() -> None:
    from mcp_tasks.authoring.registry import mcp
    from mcp_tasks.checks.tools import check_tools

    assert check_tools() == []  # every tool of the suite's project describes itself

    @mcp.tool(name="e021_probe")
    def probe(_hidden: int) -> int:  # registers: the models are built later
        return _hidden

    try:
        (message,) = check_tools()
    finally:
        del mcp.tools["e021_probe"]
    assert message.id == "mcp_tasks.E021"
    assert "'e021_probe'" in message.msg and "_hidden" in message.msg

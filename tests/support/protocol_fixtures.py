"""What the protocol-layer unit tests share (``tests/protocol/test_framing.py``,
``tests/protocol/test_dispatch.py``, ``tests/signin/test_permissions.py``): fakes of the sink
and the legacy session, request builders, :func:`run` (one request through a
:class:`Dispatcher`), and :func:`make_server`, the registry of test tools, prompts and resources
that the ``server`` fixture of ``tests/protocol/conftest.py`` returns (``test_permissions.py``
has a registry of its own)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from mcp_tasks import AcceptedElicitation, Context, MCPServer, ToolError
from mcp_tasks.auth import ANONYMOUS
from mcp_tasks.protocol import Dispatcher, RequestInfo
from mcp_tasks.tasks.engine import Engine

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ELICITATION: dict[str, Any] = {"elicitation": {"form": {}}}
SECRET = "stack trace says password=hunter2"

# -- fakes ------------------------------------------------------------------------------------


class FakeSink:
    """Records what the protocol layer sends; answers server requests from ``replies``."""

    def __init__(self, replies: Mapping[str, dict[str, Any]] | None = None) -> None:
        self.replies = dict(replies or {})
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.published: list[tuple[str, dict[str, Any]]] = []

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((method, params))
        return self.replies[method]

    async def publish(self, method: str, params: dict[str, Any]) -> None:
        self.published.append((method, params))

    async def close_stream(self) -> None:
        return None

    async def watch_task(self, task_id: str) -> None:
        return None

    async def wait_for_task(self, task_id: str, timeout: float) -> None:
        return None

    def methods(self) -> list[str]:
        return [method for method, _ in self.notifications]


class FakeSession:
    def __init__(self, session_id: str = "s1") -> None:
        self.id = session_id
        self.protocol_version = LEGACY
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] = {}
        self.log_level: str | None = None
        self.subscriptions: list[str] = []

    async def set_log_level(self, level: str) -> None:
        self.log_level = level

    async def subscribe(self, uri: str) -> None:
        self.subscriptions.append(uri)

    async def unsubscribe(self, uri: str) -> None:
        self.subscriptions.remove(uri)


def modern_info(
    *,
    capabilities: dict[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
    principal: Any = ANONYMOUS,
    headers: Mapping[str, str | list[str]] | None = None,
) -> RequestInfo:
    return RequestInfo(
        era="modern",
        protocol_version=MODERN,
        principal=principal,
        request_id=1,
        client_capabilities=capabilities or {},
        log_level=log_level,
        progress_token=progress_token,
        headers=headers or {},
    )


def legacy_info(
    *,
    capabilities: dict[str, Any] | None = None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
    session: FakeSession | None = None,
) -> RequestInfo:
    return RequestInfo(
        era="legacy",
        protocol_version=LEGACY,
        principal=ANONYMOUS,
        request_id=1,
        client_capabilities=capabilities or {},
        log_level=log_level,
        progress_token=progress_token,
        session=session or FakeSession(),
    )


def request(
    method: str, params: dict[str, Any] | None = None, request_id: int = 1
) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments or {}, **extra})


async def run(
    server: MCPServer, message: dict[str, Any], info: RequestInfo, sink: FakeSink | None = None
) -> dict[str, Any]:
    """One request through the site's method tables (the task engine included)."""
    return await Dispatcher(server, Engine()).handle(message, info, sink or FakeSink())


def result_of(response: dict[str, Any]) -> dict[str, Any]:
    assert "result" in response, response
    result: dict[str, Any] = response["result"]
    return result


def error_code(response: dict[str, Any]) -> int:
    assert "error" in response, response
    code: int = response["error"]["code"]
    return code


def text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


# -- a registry of test tools -----------------------------------------------------------------


AB: Any = Literal["a", "b"]


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    x: int
    y: int


def make_server() -> MCPServer:
    """A fresh registry of the test tools, prompts, resources and completion."""
    registry = MCPServer()

    @registry.tool(annotations={"readOnlyHint": True})
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @registry.tool()
    def make_point(x: int, y: int) -> Point:
        return Point(x=x, y=y)

    @registry.tool()
    def refuse() -> str:
        raise ToolError("not today")

    @registry.tool()
    def explode() -> str:
        raise RuntimeError(SECRET)

    @registry.tool()
    async def chatty(ctx: Context) -> str:
        await ctx.report_progress(1, 2, "half")
        await ctx.report_progress(2, 2, "done")
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, f"{level} line", logger_name="unit")
        return "ok"

    @registry.tool()
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", str)
        if isinstance(answer, AcceptedElicitation):
            return f"hello {answer.data}"
        return answer.action

    @registry.tool()
    async def ask_about(topic: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Anything about {topic}?", str)
        return answer.action

    @registry.tool()
    async def ask_two(ctx: Context) -> str:
        first = await ctx.elicit("Colour?", Color)
        second = await ctx.elicit("Point?", Point)
        assert isinstance(first, AcceptedElicitation) and isinstance(second, AcceptedElicitation)
        return f"{first.data.value} at {second.data.x},{second.data.y}"

    @registry.tool()
    async def ask_model(ctx: Context) -> str:
        result = await ctx.sample("2+2?", max_tokens=5)
        return f"{result.model}: {result.content.text}"  # type: ignore[union-attr]

    @registry.tool()
    async def roots(ctx: Context) -> list[str]:
        return [str(root.uri) for root in await ctx.list_roots()]

    @registry.tool()
    async def identity(ctx: Context) -> dict[str, Any]:
        token = ctx.get_access_token()
        return {"client": token.client_id if token else None, "request_id": ctx.request_id}

    @registry.tool(task="required")
    async def only_as_task() -> str:
        return "never inline"

    @registry.tool()
    def regional(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], size: int = 1
    ) -> str:
        return f"{region}:{size}"

    @registry.prompt()
    def greet(name: Annotated[str, Field(description="Who")], formal: bool = False) -> str:
        """A greeting prompt."""
        return f"{'Good day' if formal else 'Hi'}, {name}"

    @registry.prompt()
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Sure?", bool)
        return f"confirmed={isinstance(answer, AcceptedElicitation) and answer.data}"

    @registry.resource("unit://readme", mime_type="text/plain")
    def readme() -> str:
        return "read me"

    @registry.resource("unit://users/{user_id}/avatar", mime_type="image/png")
    def avatar(user_id: str) -> bytes:
        return f"png-{user_id}".encode()

    @registry.resource("unit://asked")
    async def asked(ctx: Context) -> str:
        answer = await ctx.elicit("Which?", AB)
        return f"picked {answer.data}" if isinstance(answer, AcceptedElicitation) else "none"

    @registry.completion("ref/prompt", "greet")
    def complete_name(
        argument_name: str, value: str, context_arguments: dict[str, Any]
    ) -> list[str]:
        return [name for name in ("Ada", "Alan", "Grace") if name.startswith(value)]

    return registry

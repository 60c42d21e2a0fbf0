"""Tools, prompts and resources that only the live-server tests use.

Each one exercises one part of the authoring API against a real client: sampling, roots,
logging at every level, progress, cancellation (observable through marker files), every
elicitation response type, the two kinds of tool failure, a sync tool using the ORM, and
the caller's identity.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import mcp_types as types
from django.contrib.auth import get_user_model
from pydantic import BaseModel, Field, TypeAdapter
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from mcp_tasks import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    ToolError,
    mcp,
)
from mcp_tasks.authoring.context import LOG_LEVELS

# -- elicitation response types ------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Person(BaseModel):
    name: str = Field(description="Full name")
    age: int = Field(ge=0, le=150)


@dataclasses.dataclass
class Shipping:
    city: str
    express: bool = False


class Flags(TypedDict):
    verbose: bool
    level: int


Size = Literal["small", "medium", "large"]
Topping = Literal["cheese", "ham", "olives"]

#: kind name → the response type ``elicit_kind`` asks for.
RESPONSE_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "enum": Color,
    "literal": Size,
    "multi": list[Topping],
    "model": Person,
    "dataclass": Shipping,
    "typeddict": Flags,
    "none": None,
}

ElicitKind = Literal[
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
    "none",
]


class ElicitOutcome(BaseModel):
    """What the tool got back from ``ctx.elicit``."""

    action: str
    data: Any = None
    type_name: str | None = None


@mcp.tool()
async def elicit_kind(kind: ElicitKind, ctx: Context) -> ElicitOutcome:
    """Ask the user for a value of one response type and report what came back."""
    result = await ctx.elicit(f"Please answer with a {kind}", RESPONSE_TYPES[kind])
    match result:
        case AcceptedElicitation(data=data):
            return ElicitOutcome(
                action="accept",
                data=TypeAdapter(Any).dump_python(data, mode="json"),
                type_name=type(data).__name__,
            )
        case DeclinedElicitation():
            return ElicitOutcome(action="decline")
        case CancelledElicitation():
            return ElicitOutcome(action="cancel")
    raise AssertionError(f"unexpected elicitation result {result!r}")


@mcp.tool()
async def elicit_twice(ctx: Context) -> str:
    """Two questions in one call (two MRTR rounds in the modern era)."""
    first = await ctx.elicit("First name?", str)
    second = await ctx.elicit("Age?", int)
    if isinstance(first, AcceptedElicitation) and isinstance(second, AcceptedElicitation):
        return f"{first.data} is {second.data}"
    return "incomplete"


# -- sampling, roots --------------------------------------------------------------------------


@mcp.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Ask the client's LLM (sampling/createMessage) and return its answer."""
    result = await ctx.sample(
        question, system_prompt="Answer briefly.", max_tokens=64, temperature=0.0
    )
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else f"<{content.type}>"
    return f"{result.model} said: {text}"


@mcp.tool()
async def client_roots(ctx: Context) -> list[str]:
    """The client's roots (roots/list), as URIs."""
    return [str(root.uri) for root in await ctx.list_roots()]


# -- notifications ----------------------------------------------------------------------------


@mcp.tool()
async def log_every_level(ctx: Context) -> str:
    """Send one log message at each of the eight MCP levels."""
    for level in LOG_LEVELS:
        await ctx.log(level, f"{level} message", logger_name="live")
    return "logged"


@mcp.tool()
async def progress_steps(steps: Annotated[int, Field(ge=1, le=50)], ctx: Context) -> str:
    """Report progress ``steps`` times."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"done {steps} steps"


@mcp.tool()
async def wait_for_cancel(marker_dir: str, ctx: Context, seconds: float = 120.0) -> str:
    """Write ``started`` in ``marker_dir``, then wait ``seconds`` to be cancelled.

    A cancellation writes ``cancelled``; running to the end writes ``finished``.
    """
    directory = Path(marker_dir)
    (directory / "started").write_text(str(ctx.request_id))
    try:
        for _ in range(int(seconds * 10)):
            await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        (directory / "cancelled").write_text(str(ctx.request_id))
        raise
    (directory / "finished").write_text(str(ctx.request_id))
    return "finished without being cancelled"


@mcp.tool()
async def wait_for_gate(marker_dir: str, name: str) -> str:
    """Write ``started-<name>`` in ``marker_dir``, then wait (60 s at most) for a ``gate``
    file there."""
    directory = Path(marker_dir)
    (directory / f"started-{name}").write_text(name)
    for _ in range(1200):
        if (directory / "gate").exists():
            return f"{name} passed the gate"
        await asyncio.sleep(0.05)
    return f"{name} gave up waiting"


@mcp.tool()
async def spin(ms: Annotated[float, Field(ge=0, le=1000)]) -> float:
    """Keep the event loop busy for ``ms`` milliseconds of CPU (load tests: a call that
    costs the process that much; a sync tool would hold the GIL against the loop)."""
    deadline = time.thread_time() + ms / 1000
    while time.thread_time() < deadline:
        pass
    return ms


# -- failures -------------------------------------------------------------------------------


@mcp.tool()
def fail_for_client(reason: str) -> str:
    """Raise a ToolError: its message is meant for the client."""
    raise ToolError(f"cannot do that: {reason}")


SECRET_DETAIL = "db password is hunter2"


@mcp.tool()
def fail_internally() -> str:
    """Raise a plain exception whose details must not reach the client."""
    raise RuntimeError(SECRET_DETAIL)


# -- ORM, identity ----------------------------------------------------------------------------


class UserCount(BaseModel):
    username: str
    total_users: int
    in_thread: bool


@mcp.tool()
def register_user(username: Annotated[str, Field(min_length=1, max_length=150)]) -> UserCount:
    """A sync tool using the ORM: create a user and count them."""
    User = get_user_model()
    User.objects.create_user(username=username)
    return UserCount(
        username=User.objects.get(username=username).username,
        total_users=User.objects.count(),
        in_thread=threading.current_thread() is not threading.main_thread(),
    )


class Identity(BaseModel):
    anonymous: bool
    client_id: str | None = None
    subject: str | None = None
    scopes: list[str] = []
    claims: dict[str, Any] = {}
    username: str | None = None


@mcp.tool()
async def whoami(ctx: Context) -> Identity:
    """The access token and Django user this call runs as."""
    token = ctx.get_access_token()
    user = ctx.user
    if token is None:
        return Identity(anonymous=user is None, username=getattr(user, "username", None))
    return Identity(
        anonymous=False,
        client_id=token.client_id,
        subject=token.subject,
        scopes=list(token.scopes),
        claims=dict(token.claims),
        username=getattr(user, "username", None),
    )


class Sum(BaseModel):
    total: float
    count: int


@mcp.tool(annotations={"readOnlyHint": True})
def summarize(
    values: Annotated[list[float], Field(min_length=1, description="Numbers to add")],
) -> Sum:
    """Structured output: the total and count of ``values``."""
    return Sum(total=sum(values), count=len(values))


# -- prompts ----------------------------------------------------------------------------------


@mcp.prompt(title="Live greeting")
def live_greeting(
    name: Annotated[str, Field(description="Who to greet")], style: str = "plain"
) -> str:
    """Greet someone."""
    return f"Write a {style} greeting for {name}."


@mcp.prompt()
async def confirm_examples(topic: str, ctx: Context) -> list[types.PromptMessage]:
    """A prompt that asks the user a question while it is rendered."""
    answer = await ctx.elicit("Include examples?", bool)
    examples = isinstance(answer, AcceptedElicitation) and answer.data
    return [
        types.PromptMessage(
            role="user",
            content=types.TextContent(
                type="text", text=f"Explain {topic}" + (" with examples." if examples else ".")
            ),
        )
    ]


# -- resources --------------------------------------------------------------------------------


@mcp.resource("live://static/info", mime_type="text/plain", title="Live info")
def live_info() -> str:
    """A fixed resource."""
    return "live tools are here"


@mcp.resource("live://items/{item_id}", mime_type="application/json", title="An item")
def live_item(item_id: str) -> dict[str, str]:
    """A resource template: an item by id."""
    return {"id": item_id, "label": f"item {item_id}"}


@mcp.resource("live://bytes/logo", mime_type="image/png")
def live_logo() -> bytes:
    """A binary resource."""
    return b"\x89PNG\r\n\x1a\nfake"


# -- server-wide notifications ----------------------------------------------------------------


@mcp.tool()
async def announce(
    kind: Literal["tools", "prompts", "resources"], ctx: Context, uri: str | None = None
) -> str:
    """Publish ``notifications/<kind>/list_changed`` (and ``resources/updated`` for ``uri``)."""
    await ctx.send_list_changed(kind)
    if uri is not None:
        await ctx.send_resource_updated(uri)
    return "announced"


@mcp.tool()
def start_django_session(username: str) -> str:
    """Create a user and a logged-in Django session for it; return the session key.

    Lets a test call the endpoint with ``Cookie: sessionid=<key>`` as that user.
    """
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    user, _ = get_user_model().objects.get_or_create(username=username)
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return str(session.session_key)

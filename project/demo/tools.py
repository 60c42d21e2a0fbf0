"""Demo tools, a prompt and resources: what a Django app registers in its ``ready()``."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from mcp_tasks import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    Retry,
    RetryTask,
    TaskConfig,
    mcp,
)


@mcp.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool(annotations={"readOnlyHint": True})
async def slow_count(
    n: Annotated[int, Field(ge=1, le=100, description="How many steps to count")],
    ctx: Context,
    delay: Annotated[float, Field(ge=0, le=5, description="Seconds per step")] = 0.2,
) -> str:
    """Count to n slowly, reporting progress after every step."""
    for i in range(1, n + 1):
        await asyncio.sleep(delay)
        await ctx.report_progress(i, n, f"step {i}")
    await ctx.info(f"counted to {n}")
    return f"counted to {n}"


@mcp.tool()
async def greet_with_question(ctx: Context) -> str:
    """Ask the user for their name (elicitation), then greet them."""
    answer = await ctx.elicit("What is your name?", str)
    match answer:
        case AcceptedElicitation(data=name):
            return f"Hello, {name}!"
        case DeclinedElicitation():
            return "Hello, whoever you are."
        case CancelledElicitation():
            return "Greeting cancelled."
    raise AssertionError(f"unexpected elicitation result {answer!r}")


class Forecast(BaseModel):
    """A (made-up) weather forecast."""

    city: str
    date: dt.date
    temperature: float = Field(description="Degrees in the requested unit")
    unit: Literal["celsius", "fahrenheit"]
    conditions: Literal["sunny", "cloudy", "rain", "snow"]


@mcp.tool(title="Weather forecast", annotations={"readOnlyHint": True, "openWorldHint": False})
def forecast(
    city: Annotated[str, Field(min_length=1, description="City name")],
    unit: Literal["celsius", "fahrenheit"] = "celsius",
) -> Forecast:
    """A deterministic pretend forecast: structured output with an outputSchema."""
    seed = sum(map(ord, city.lower()))
    celsius = float(seed % 35 - 5)
    conditions: list[Literal["sunny", "cloudy", "rain", "snow"]] = [
        "sunny",
        "cloudy",
        "rain",
        "snow" if celsius < 2 else "cloudy",
    ]
    return Forecast(
        city=city,
        date=dt.date.today(),
        temperature=celsius if unit == "celsius" else round(celsius * 9 / 5 + 32, 1),
        unit=unit,
        conditions=conditions[seed % 4],
    )


@mcp.prompt(title="Review some code")
def review_code(code: str, focus: str = "correctness") -> str:
    """A prompt asking the model to review a piece of code."""
    return f"Please review this code with a focus on {focus}:\n\n{code}"


@mcp.resource("demo://readme", mime_type="text/markdown", title="About this demo")
def readme() -> str:
    """What this demo server offers."""
    return (
        "# django-mcp-tasks demo\n\n"
        "Tools: `add`, `slow_count` (progress), `greet_with_question` (elicitation), "
        "`forecast` (structured output).\n"
        "Prompt: `review_code`. Resources: `demo://readme`, `demo://greeting/{name}`.\n"
    )


@mcp.resource("demo://greeting/{name}", mime_type="text/plain", title="A greeting")
def greeting(name: str) -> str:
    """A resource template: a greeting for ``name``."""
    return f"Hello, {name}!"


@mcp.tool(scopes=["account:read"], annotations={"readOnlyHint": True})
def account_info(ctx: Context) -> str:
    """Who the caller is signed in as. Needs the `account:read` scope: a token with only the
    default scope gets HTTP 403 insufficient_scope, and the client asks the user again."""
    token = ctx.access_token
    if token is None:
        return "You are signed in with a browser session, not an access token."
    return f"Client {token.client_id}, subject {token.subject}, scopes: {' '.join(token.scopes)}."


@mcp.tool(task=True)
async def long_report(quarter: str, ctx: Context, steps: int = 3) -> str:
    """A background task: reports progress, may ask whether to include draft figures."""
    for step in range(1, steps + 1):
        await asyncio.sleep(0.1)
        await ctx.report_progress(step, steps, f"section {step} of {steps}")
    answer = await ctx.elicit("Include draft figures?", bool)
    drafts = isinstance(answer, AcceptedElicitation) and answer.data
    return f"Report for {quarter}: {steps} sections{' with drafts' if drafts else ''}."


@mcp.tool(task=TaskConfig(mode="optional", concurrency=2, concurrency_key="album"))
async def render_thumbnails(album: str, ctx: Context, count: int = 3) -> str:
    """A concurrency limit: at most two renders of one album run at once, across every
    worker; the others wait ("Waiting for a free slot") holding no worker slot."""
    for done in range(1, count + 1):
        await asyncio.sleep(0.5)
        await ctx.report_progress(done, count, f"thumbnail {done} of {count}")
    return f"Rendered {count} thumbnails of {album}."


@mcp.tool(task=TaskConfig(mode="optional", retries=Retry(attempts=3, delay=0.5)))
async def fetch_exchange_rate(currency: str, ctx: Context, failures: int = 1) -> str:
    """Retries: the first ``failures`` attempts fail as if the rate service were down
    (``RetryTask``); each next attempt waits longer, and questions already answered are not
    asked again. With ``failures`` of 3 or more every attempt fails."""
    attempt = ctx.attempt
    if attempt <= failures:
        raise RetryTask(f"the rate service did not answer (attempt {attempt})")
    return f"1 EUR = 1.08 {currency.upper()} (attempt {attempt})"

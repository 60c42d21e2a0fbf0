"""Tools for the hostile-input tests (``tests/transport/test_hostile_wire.py``): tools whose
own output cannot be sent or stored as it is, and one that breaks its request past every
handler."""

from __future__ import annotations

from mcp_tasks import Context, mcp

#: A NUL and a lone surrogate: neither can be stored, the surrogate cannot even be sent.
UNSTORABLE = "a\x00b\ud800c"
#: What the rule makes of :data:`UNSTORABLE` wherever it is stored (U+FFFD for each).
STORED = "a\ufffdb\ufffdc"


class SimulatedFault(BaseException):
    """Not an ``Exception``: it gets past the tool runner and the method dispatcher, as a bug
    in the server would, so only the transport's catch-all can answer the request."""


@mcp.tool(task=True)
async def unstorable_output(ctx: Context) -> str:
    """Logs, reports progress and returns text with a NUL and a lone surrogate."""
    await ctx.info({"line": UNSTORABLE}, logger_name=f"logger{UNSTORABLE}")
    await ctx.report_progress(1, 2, f"progress {UNSTORABLE}")
    return UNSTORABLE


@mcp.tool()
async def unsendable_output() -> str:
    """A plain tool (never a task) whose text has a NUL and a lone surrogate."""
    return UNSTORABLE


@mcp.tool(task=True)
async def unstorable_question(ctx: Context) -> str:
    """Asks a question whose text holds a NUL and a lone surrogate."""
    answer = await ctx.elicit(f"question {UNSTORABLE}", str)
    return f"answered {answer.action}"


@mcp.tool()
def infinite_number() -> float:
    """Returns a number JSON cannot carry."""
    return float("inf")


@mcp.tool()
async def break_request(ctx: Context, stream_first: bool = False) -> str:
    """Raises :class:`SimulatedFault`; with ``stream_first``, after a progress notification
    has started the SSE stream."""
    if stream_first:
        await ctx.report_progress(1, 2, "about to fail")
    raise SimulatedFault("a simulated internal fault")

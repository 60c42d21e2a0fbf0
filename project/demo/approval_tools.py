"""Demo tools that wait for staff: an approval before the tool runs, four eyes, and a
question only staff may answer. Try them with ``./scripts/dev``: call one from a client
that supports tasks, then decide under Admin → MCP tasks → Approvals."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from mcp_tasks import AcceptedElicitation, Approval, Context, mcp


class Refund(BaseModel):
    """A refund as it was paid out."""

    customer: str
    amount: float
    note: str


@mcp.tool(
    task=True,
    approval=Approval(summary="Refund {amount} EUR to {customer}", editable=("amount", "note")),
)
async def refund(
    customer: Annotated[str, Field(min_length=1, description="The customer's account")],
    amount: Annotated[float, Field(gt=0, le=1000, description="EUR, at most 1000")],
    ctx: Context,
    note: Annotated[str, Field(max_length=200, description="Shown on the statement")] = "",
) -> Refund:
    """Refund a customer (an operator approves, and may lower the amount, first)."""
    await ctx.report_progress(1, 1, f"refunding {amount:.2f} EUR to {customer}")
    return Refund(customer=customer, amount=amount, note=note)


@mcp.tool(
    task=True,
    approval=Approval(summary="Delete every record of {customer}", approvers=2),
)
async def erase_customer(customer: str, ctx: Context) -> str:
    """Erase a customer's records (two different operators must approve)."""
    await ctx.report_progress(1, 1, f"erasing {customer}")
    return f"Erased the records of {customer}."


@mcp.tool(task="required")
async def publish_notice(text: str, ctx: Context) -> str:
    """Publish a notice on the status page; staff choose where (the client cannot)."""
    answer = await ctx.ask_staff(
        f"Where should this notice go? {text!r}",
        {
            "type": "object",
            "properties": {
                "page": {"type": "string", "enum": ["status", "blog"], "title": "Page"},
            },
            "required": ["page"],
        },
    )
    if not isinstance(answer, AcceptedElicitation):
        return "Not published: staff declined."
    return f"Published on the {answer.data['page']} page: {text}"

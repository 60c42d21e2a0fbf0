"""E021: a tool whose signature cannot become its argument model and input schema (built
lazily by tools, so this check builds them all at start-up)."""

from __future__ import annotations

from django.core.checks import CheckMessage, Error

from ..authoring.registry import mcp


def check_tools() -> list[CheckMessage]:
    """Build every registered tool's argument and output models and its input schema."""
    messages: list[CheckMessage] = []
    for tool in mcp.tools.values():
        try:
            tool.metadata  # noqa: B018 - built and kept for the process
            tool.input_schema  # noqa: B018
        except Exception as exc:  # noqa: BLE001 - each failure is reported, not raised
            messages.append(
                Error(
                    f"Tool {tool.name!r}: its signature cannot be described ({exc}).",
                    hint=(
                        "Give every parameter a type pydantic can validate (ctx: Context is "
                        "left out), and no name that starts with an underscore."
                    ),
                    obj=tool.fn,
                    id="mcp_tasks.E021",
                )
            )
    return messages

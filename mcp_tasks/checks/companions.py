"""E020: the companion tools' names (``COMPANION_TOOLS``) for clients without tasks."""

from __future__ import annotations

import re

from django.core.checks import CheckMessage, Error

from ..authoring.registry import mcp
from ..conf import get_config

#: A tool name as the MCP specification allows it (2025-11-25: 1 to 128 of these).
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


def check_companions() -> list[CheckMessage]:
    """Each companion tool's name is a valid tool name, distinct, and not a registered
    tool's (that tool would be hidden from clients without tasks)."""
    config = get_config()
    if not config.TASKS_FOR_ALL_CLIENTS:
        return []
    names = config.COMPANION_TOOLS.model_dump()
    problems: list[str] = []
    for role, name in names.items():
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            problems.append(
                f"{role}: {name!r} is not a tool name (1 to 128 letters, digits, '_', '-', '.')"
            )
        elif name in mcp.tools:
            problems.append(f"{role}: {name!r} is also the name of a registered tool")
    if len(set(map(str, names.values()))) < len(names):
        problems.append("two companion tools share a name")
    return [
        Error(
            f"MCP_TASKS['COMPANION_TOOLS']: {problem}.",
            hint=(
                "Give the companion tools names of their own, e.g. "
                "{'check': 'check_report_task'}; or turn TASKS_FOR_ALL_CLIENTS off."
            ),
            id="mcp_tasks.E020",
        )
        for problem in problems
    ]

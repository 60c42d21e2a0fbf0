"""The ``MCP_TASKS`` table of ``docs/reference/settings.md``, written from the settings' own
definition (``mcp_tasks.conf.McpTasksSettings``: each field's default and text) between the
page's markers. ``python docs/_ext/settings_table.py`` writes it again;
``tests/suite/test_docs.py`` fails when it is not current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SETTINGS_PAGE = Path(__file__).resolve().parents[1] / "reference" / "settings.md"
TABLE_BEGIN = "<!-- settings-table: begin (written by docs/_ext/settings_table.py) -->"
TABLE_END = "<!-- settings-table: end -->"


def _literal(value: Any) -> str:
    """A default as a Python literal a reader would write (lists for tuples)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def settings_table() -> str:
    """The ``MCP_TASKS`` table: a row per setting, its default and its text."""
    from mcp_tasks.conf import DEFAULTS, McpTasksSettings

    rows = ["| key | default | meaning |", "| --- | --- | --- |"]
    for key, field in McpTasksSettings.model_fields.items():
        text = str(field.description).replace("|", "\\|")
        rows.append(f"| `{key}` | `{_literal(DEFAULTS[key])}` | {text} |")
    return "\n".join(rows)


def with_settings_table(page: str) -> str:
    """``page`` with the table between its markers written afresh."""
    before, rest = page.split(TABLE_BEGIN, 1)
    _, after = rest.split(TABLE_END, 1)
    return f"{before}{TABLE_BEGIN}\n{settings_table()}\n{TABLE_END}{after}"


if __name__ == "__main__":
    sys.path.insert(0, str(SETTINGS_PAGE.parents[2]))
    import django
    from django.conf import settings

    settings.configure(INSTALLED_APPS=["mcp_tasks"])
    django.setup()
    SETTINGS_PAGE.write_text(with_settings_table(SETTINGS_PAGE.read_text()))

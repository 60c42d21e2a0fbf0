"""The README documents every setting once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcp_tasks.conf import DEFAULTS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_every_setting_is_in_the_readme_table(key: str) -> None:
    rows = re.findall(rf"^\| `{key}` \|", README, flags=re.MULTILINE)
    assert len(rows) == 1, f"add one row for MCP_TASKS[{key!r}] to the README's settings table"


def test_the_readme_documents_no_unknown_setting() -> None:
    section = README.split("## Settings", 1)[1].split("\n## ", 1)[0]
    table = section.split("The example project reads", 1)[0]
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", table, flags=re.MULTILINE))
    assert documented <= set(DEFAULTS), f"not in DEFAULTS: {sorted(documented - set(DEFAULTS))}"


def test_every_system_check_id_is_in_the_readme_table() -> None:
    package = Path(__file__).resolve().parent.parent / "mcp_tasks"
    source = "".join(path.read_text() for path in sorted(package.glob("*checks.py")))
    ids = set(re.findall(r'id="(mcp_tasks\.[EW]\d{3})"', source))
    documented = set(re.findall(r"^\| `(mcp_tasks\.[EW]\d{3})` \|", README, flags=re.MULTILINE))
    assert ids == documented


def test_every_test_file_is_in_one_row_of_the_readme_map() -> None:
    section = README.split("## Tests", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`test_" in line]
    named = [name for row in rows for name in re.findall(r"`(test_[a-z0-9_]+\.py)`", row)]
    files = sorted(path.name for path in Path(__file__).resolve().parent.glob("test_*.py"))
    assert sorted(named) == files

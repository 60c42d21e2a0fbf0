"""The README documents every setting and system check once, and says where each test file
lives."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcp_tasks.conf import DEFAULTS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


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
    package = Path(__file__).resolve().parents[2] / "mcp_tasks"
    source = "".join(path.read_text() for path in sorted(package.glob("checks/*.py")))
    ids = set(re.findall(r'id="(mcp_tasks\.[EW]\d{3})"', source))
    documented = set(re.findall(r"^\| `(mcp_tasks\.[EW]\d{3})` \|", README, flags=re.MULTILINE))
    assert ids == documented


def test_every_test_file_is_in_one_row_of_the_readme_map() -> None:
    """Each row names a folder of ``tests/`` and exactly the test files in it; no test file
    sits at the top of ``tests/`` or in a folder without a row."""
    section = README.split("## Tests", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`test_" in line]
    listed: dict[str, list[str]] = {}
    for row in rows:
        folder = re.match(r"^\| `tests/([a-z_]+)/` \|", row)
        assert folder, f"a row of the README's test map names no tests/<folder>/: {row[:80]}"
        assert folder[1] not in listed, f"two rows for tests/{folder[1]}/"
        listed[folder[1]] = sorted(re.findall(r"`(test_[a-z0-9_]+\.py)`", row))
    tests = Path(__file__).resolve().parents[1]
    assert not sorted(path.name for path in tests.glob("test_*.py")), "test files outside a folder"
    on_disk = {
        path.parent.name: sorted(file.name for file in path.parent.glob("test_*.py"))
        for path in tests.glob("*/test_*.py")
    }
    assert listed == on_disk


def test_the_pypi_description_links_nothing_relative() -> None:
    """PyPI shows pyproject's readme, where a link or an image relative to the repository
    breaks: every one in it is absolute."""
    import re
    import tomllib

    root = Path(__file__).resolve().parents[2]
    readme = tomllib.loads((root / "pyproject.toml").read_text())["project"]["readme"]
    text = (root / readme).read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets, "the test reads links"
    assert [t for t in targets if not t.startswith(("https://", "http://"))] == []

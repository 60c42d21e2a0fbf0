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


def test_the_pypi_description_links_the_projects_urls() -> None:
    """The repository the PyPI page sends readers to is a link, the one of
    ``[project.urls]``; so are its README and changelog."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    urls = project["urls"]
    assert set(urls) >= {"Repository", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith(urls["Repository"]) for url in urls.values())
    text = (root / project["readme"]).read_text()
    for name in ("Repository", "Documentation", "Changelog"):
        assert f"]({urls[name]})" in text, f"docs/pypi.md does not link the {name} URL"
    assert "the project's repository" not in text


def test_only_the_users_extras_are_published() -> None:
    """The repository's own dependencies are dependency groups, never extras; every extra
    is in the README's list."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    assert not extras & {"test", "example", "dev"}
    assert set(pyproject["dependency-groups"]) >= {"test", "example"}
    listed = README.split("The extras:", 1)[1].split("```", 1)[0]
    assert {extra for extra in extras if f"`{extra}`" not in listed} == set()


def test_the_readme_python_blocks_import_what_they_use() -> None:
    """Each ```python block of the README uses no module it does not import (the
    production settings used ``os`` without importing it)."""
    import ast
    import re
    import sys

    modules = set(sys.stdlib_module_names) | {"django", "mcp_tasks", "pydantic", "pytest"}
    for block in re.findall(r"^```python\n(.*?)^```", README, re.MULTILINE | re.DOTALL):
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue  # a fragment ("...", a signature alone)
        imported = {
            (alias.asname or alias.name).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        used = {
            node.value.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        }
        assigned = {
            node.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
        }
        missing = sorted((used & modules) - imported - assigned)
        assert not missing, f"a README block uses {missing} without importing it:\n{block[:300]}"

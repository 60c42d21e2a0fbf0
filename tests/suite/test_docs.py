"""The documentation (``docs/``, the site's sources, and the README) documents every setting
once with its default, every system check, every public name and command, and says where
each test file lives. The site's build itself (``nox -s docs``) fails on a broken internal
link, a missing page or an unresolved reference."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcp_tasks.conf import DEFAULTS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def load_module(path: Path) -> Any:
    """A module of the docs' tools, by its path (``docs/_ext`` is not a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


README = (ROOT / "README.md").read_text()
#: Where each table lives now (the README had them all until the site).
SETTINGS = DOCS / "reference" / "settings.md"
SETTINGS_TABLE = load_module(DOCS / "_ext" / "settings_table.py")
CHECKS = DOCS / "reference" / "checks.md"
TEST_MAP = DOCS / "contributing.md"
API = DOCS / "reference" / "api.md"
TESTING_API = DOCS / "reference" / "testing.md"
COMMANDS = DOCS / "reference" / "commands.md"
#: The README shows what a visitor needs first; the rest is the site's.
README_MAX_LINES = 400


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a whole line) up to the next heading of its level."""
    text = path.read_text()
    level = heading.split(" ", 1)[0]
    assert f"\n{heading}\n" in f"\n{text}", f"{path.relative_to(ROOT)} has no {heading!r}"
    rest = f"\n{text}".split(f"\n{heading}\n", 1)[1]
    return re.split(rf"^{level} ", rest, maxsplit=1, flags=re.MULTILINE)[0]


def settings_rows() -> dict[str, list[str]]:
    """``MCP_TASKS`` table: key → the raw default cells of its rows."""
    table = section(SETTINGS, "## `MCP_TASKS`")
    rows: dict[str, list[str]] = {}
    for key, default in re.findall(r"^\| `([A-Z_]+)` \| (.*?) \| ", table, flags=re.MULTILINE):
        rows.setdefault(key, []).append(default)
    return rows


def test_the_settings_table_is_written_from_the_settings_definition() -> None:
    """The table is the settings' own defaults and texts (``mcp_tasks.conf``): run
    ``python docs/_ext/settings_table.py`` after changing a setting."""
    page = SETTINGS.read_text()
    assert page == SETTINGS_TABLE.with_settings_table(page), (
        "docs/reference/settings.md is not current: run python docs/_ext/settings_table.py"
    )


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_every_setting_has_one_row(key: str) -> None:
    assert len(settings_rows().get(key, [])) == 1, key


def test_the_settings_table_documents_no_unknown_setting() -> None:
    documented = set(settings_rows())
    assert documented <= set(DEFAULTS), f"not in DEFAULTS: {sorted(documented - set(DEFAULTS))}"


def test_every_system_check_id_has_one_row() -> None:
    """The ids the code emits (``mcp_tasks/checks/``) are exactly the table's, once each."""
    source = "".join(path.read_text() for path in sorted((ROOT / "mcp_tasks").glob("checks/*.py")))
    ids = set(re.findall(r'id="(mcp_tasks\.[EW]\d{3})"', source))
    rows = re.findall(r"^\| `(mcp_tasks\.[EW]\d{3})` \|", CHECKS.read_text(), flags=re.MULTILINE)
    assert sorted(rows) == sorted(set(rows)), "a check id has two rows"
    assert ids == set(rows)


def test_every_test_file_is_in_one_row_of_the_test_map() -> None:
    """Each row names a folder of ``tests/`` and exactly the test files in it; no test file
    sits at the top of ``tests/`` or in a folder without a row."""
    rows = [
        line
        for line in section(TEST_MAP, "## Tests").splitlines()
        if line.startswith("| ") and "`test_" in line
    ]
    listed: dict[str, list[str]] = {}
    for row in rows:
        folder = re.match(r"^\| `tests/([a-z_]+)/` \|", row)
        assert folder, f"a row of the test map names no tests/<folder>/: {row[:80]}"
        assert folder[1] not in listed, f"two rows for tests/{folder[1]}/"
        listed[folder[1]] = sorted(re.findall(r"`(test_[a-z0-9_]+\.py)`", row))
    tests = ROOT / "tests"
    assert not sorted(path.name for path in tests.glob("test_*.py")), "test files outside a folder"
    on_disk = {
        path.parent.name: sorted(file.name for file in path.parent.glob("test_*.py"))
        for path in tests.glob("*/test_*.py")
    }
    assert listed == on_disk


def documented_objects(path: Path) -> set[str]:
    """The dotted names the page's autodoc (and ``py:``) directives document."""
    return set(re.findall(r"^\.\. (?:auto\w+|py:\w+):: ([\w.]+)", path.read_text(), re.MULTILINE))


def test_the_api_reference_documents_every_public_name() -> None:
    import mcp_tasks

    documented = documented_objects(API)
    assert {f"mcp_tasks.{name}" for name in mcp_tasks.__all__} <= documented


def test_the_testing_reference_documents_every_public_name() -> None:
    import mcp_tasks.testing

    documented = documented_objects(TESTING_API)
    assert {f"mcp_tasks.testing.{name}" for name in mcp_tasks.testing.__all__} <= documented


def test_every_management_command_is_in_the_reference() -> None:
    commands = sorted(p.stem for p in (ROOT / "mcp_tasks/management/commands").glob("[!_]*.py"))
    assert commands, "the test reads the commands"
    documented = re.findall(r"^```\{django-command\} (\w+)$", COMMANDS.read_text(), re.MULTILINE)
    assert documented == commands


def test_the_readme_is_short() -> None:
    lines = len(README.splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move the detail to docs/"


def test_the_readmes_relative_links_lead_to_files() -> None:
    """A relative link of the README (``docs/how-to/production.md#…``) names a file of the
    repository, and its ``#anchor`` a heading of that page."""
    targets = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [t for t in targets if not t.startswith(("https://", "http://", "#"))]
    assert local, "the test reads links"
    for target in local:
        path, _, anchor = target.partition("#")
        assert (ROOT / path).exists(), f"README links {target}, which does not exist"
        if anchor:
            headings = re.findall(r"^#{1,3} (.+)$", (ROOT / path).read_text(), re.MULTILINE)
            assert anchor in {slug(heading) for heading in headings}, f"no heading for {target}"


def slug(heading: str) -> str:
    """A heading's anchor as MyST (and GitHub) make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_pypi_description_links_nothing_relative() -> None:
    """PyPI shows pyproject's readme, where a link or an image relative to the repository
    breaks: every one in it is absolute."""
    readme = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["readme"]
    text = (ROOT / readme).read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets, "the test reads links"
    assert [t for t in targets if not t.startswith(("https://", "http://"))] == []


def test_the_pypi_description_links_the_projects_urls() -> None:
    """The PyPI page sends readers to the documentation site, the repository and the
    changelog, the links of ``[project.urls]``; each page of the site it links is one of
    ``docs/``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    urls = project["urls"]
    assert set(urls) >= {"Repository", "Documentation", "Changelog", "Issues"}
    repository = urls["Repository"]
    assert all(url.startswith(repository) for name, url in urls.items() if name != "Documentation")
    text = (ROOT / project["readme"]).read_text()
    for name in ("Repository", "Documentation", "Changelog"):
        assert f"]({urls[name]})" in text, f"docs/pypi.md does not link the {name} URL"
    assert "the project's repository" not in text
    site = urls["Documentation"]
    for page in re.findall(rf"\]\({re.escape(site)}en/latest/([^)#\s]+)\.html", text + README):
        assert (DOCS / f"{page}.md").exists(), f"a link to the site's {page}.html, not in docs/"


def test_only_the_users_extras_are_published() -> None:
    """The repository's own dependencies are dependency groups, never extras; every extra
    is in the README's list."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"])
    assert not extras & {"test", "example", "dev", "docs"}
    assert set(pyproject["dependency-groups"]) >= {"test", "example", "docs"}
    listed = README.split("The extras:", 1)[1].split("```", 1)[0]
    assert {extra for extra in extras if f"`{extra}`" not in listed} == set()


def python_blocks() -> list[tuple[str, str]]:
    """``(file, code)`` of every ```python block of the README and of the site's pages."""
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    return [
        (str(page.relative_to(ROOT)), block)
        for page in pages
        for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), re.M | re.S)
    ]


def test_the_python_blocks_import_what_they_use() -> None:
    """Each ```python block of the README and the docs uses no module it does not import
    (the production settings used ``os`` without importing it)."""
    modules = set(sys.stdlib_module_names) | {"django", "mcp_tasks", "pydantic", "pytest"}
    blocks = python_blocks()
    assert len(blocks) > 20, "the test reads the blocks"
    for where, block in blocks:
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
        assert not missing, (
            f"a block of {where} uses {missing} without importing it:\n{block[:300]}"
        )

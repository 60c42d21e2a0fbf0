"""The package stays in small units: no module over 600 lines and no class over 300
(migrations aside). A unit past that plays several roles: split it by role."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mcp_tasks"
MODULE_LINES_AT_MOST = 600
CLASS_LINES_AT_MOST = 300

MODULES = sorted(path for path in PACKAGE.rglob("*.py") if "migrations" not in path.parts)


def relative(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


@pytest.mark.parametrize("path", MODULES, ids=relative)
def test_a_module_has_at_most_600_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MODULE_LINES_AT_MOST, f"{relative(path)} has {lines} lines"


@pytest.mark.parametrize("path", MODULES, ids=relative)
def test_a_class_has_at_most_300_lines(path: Path) -> None:
    tree = ast.parse(path.read_text())
    too_long = {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > CLASS_LINES_AT_MOST
    }
    assert not too_long, f"{relative(path)}: {too_long}"


def test_the_rule_sees_the_package() -> None:
    assert len(MODULES) > 100  # not an empty glob that would pass anything

"""Paths documented before the package's layer folders (0.2) keep working until 0.3, with a
DeprecationWarning that names the new path, and give the very same objects."""

from __future__ import annotations

import importlib
import sys

import pytest


def fresh_import(name: str) -> object:
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[loaded]
    return importlib.import_module(name)


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("mcp_tasks.verifiers.dot", "mcp_tasks.auth.verifiers.dot", ["verify"]),
        ("mcp_tasks.verifiers.jwks", "mcp_tasks.auth.verifiers.jwks", ["verify"]),
        ("mcp_tasks.transport.uvicorn_http", "mcp_tasks.contrib.uvicorn_http", ["H11Protocol"]),
    ],
)
def test_an_old_path_warns_and_gives_the_new_objects(old: str, new: str, names: list[str]) -> None:
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = fresh_import(old)
    current = importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(current, name)


def test_the_old_verifier_setting_verifies_through_the_new_module() -> None:
    from django.utils.module_loading import import_string

    from mcp_tasks.auth.verifiers import dot

    with pytest.warns(DeprecationWarning):
        fresh_import("mcp_tasks.verifiers")
        assert import_string("mcp_tasks.verifiers.dot.verify") is dot.verify

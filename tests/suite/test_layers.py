"""The package's layering (``docs/architecture.md``), read from the import statements of
every module of ``mcp_tasks``: no import runs up a layer, the protocol and the task engine
never import each other, and no function-level import hides a cycle."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mcp_tasks"

#: Lowest first: each layer is a folder of the package (a few base and persistence modules,
#: and the composition, sit at its root). A module belongs to the layer of its longest listed
#: prefix. A module may import its own layer and the layers of a lower rank; layers of one
#: rank are siblings that never import each other.
LAYERS: dict[str, tuple[int, frozenset[str]]] = {
    "base": (0, frozenset({"core", "conf", "exceptions", "jsontext", "layers"})),
    "auth": (1, frozenset({"auth"})),
    "persistence": (2, frozenset({"models", "migrations", "sessions", "signals", "stream_events"})),
    "authoring": (3, frozenset({"authoring"})),
    "protocol": (4, frozenset({"protocol"})),
    "task engine": (4, frozenset({"tasks"})),
    "transport": (5, frozenset({"transport"})),
    "contrib": (6, frozenset({"contrib"})),
    "admin": (6, frozenset({"admin", "templatetags"})),
    # metrics: hears the engine and the transport through core.metrics_hook, reads the models
    "metrics": (6, frozenset({"metrics"})),
    # tracing: opens the spans of the transport and the engine through core.trace_hook
    "tracing": (6, frozenset({"tracing"})),
    "composition": (
        7,
        frozenset({"__init__", "apps", "asgi", "checks", "management", "testing"}),
    ),
}

#: At most this many modules at the package's root: the rest live in their layer's folder.
ROOT_MODULES_AT_MOST = 14

#: Modules whose imports inside functions are there for Django's start-up order, not to
#: hide a cycle: ``AppConfig.ready`` imports what needs the app registry; ``asgi.py`` is
#: imported by a project's ``asgi.py``, whose order of set-up it cannot know; pytest imports
#: the plugin (and so ``mcp_tasks.testing``) before pytest-django sets Django up.
LATE_IMPORTS_ALLOWED = frozenset(
    {"mcp_tasks.apps", "mcp_tasks.asgi", "mcp_tasks.testing", "mcp_tasks.testing.plugin"}
)


@dataclasses.dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    in_function: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _imports(path: Path, text: str | None = None) -> Iterator[Import]:
    """The imports of package modules in the module at ``path`` (``text``: its source)."""
    source = _module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    functions = [
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    in_functions = {id(inner) for function in functions for inner in ast.walk(function)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [
                f"{module}.{alias.name}" if _is_module(f"{module}.{alias.name}") else module
                for alias in node.names
            ]
        else:
            continue
        for target in dict.fromkeys(targets):
            if target.split(".")[0] == "mcp_tasks" and target != source:
                yield Import(source, target, node.lineno, id(node) in in_functions)


def _all_imports() -> list[Import]:
    return [found for path in sorted(PACKAGE.rglob("*.py")) for found in _imports(path)]


def layer_of(module: str) -> str:
    parts = module.split(".")[1:] or ["__init__"]
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        for name, (_, members) in LAYERS.items():
            if prefix in members:
                return name
    raise LookupError(f"{module} is in no layer: add it to LAYERS")


def violations(imports: list[Import]) -> list[str]:
    """Every import that runs up a layer or across siblings."""
    found = []
    for item in imports:
        source, target = layer_of(item.source), layer_of(item.target)
        if source == target:
            continue
        if LAYERS[target][0] >= LAYERS[source][0]:
            found.append(f"{item.source}:{item.line} ({source}) imports {item.target} ({target})")
    return found


def test_every_module_is_in_a_layer() -> None:
    modules = {_module_name(path) for path in PACKAGE.rglob("*.py")}
    for module in modules:
        layer_of(module)  # raises for a module no layer claims
    assert len(modules) > 50  # the scan saw the package


def test_the_root_holds_few_modules() -> None:
    root = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert 0 < len(root) <= ROOT_MODULES_AT_MOST, root


def test_no_import_runs_up_a_layer_or_across_siblings() -> None:
    imports = _all_imports()
    assert any(item.target == "mcp_tasks.core.jsonrpc" for item in imports)  # the scan sees imports
    assert violations(imports) == []


def test_no_function_level_import_inside_the_package() -> None:
    late = [
        f"{item.source}:{item.line} imports {item.target}"
        for item in _all_imports()
        if item.in_function and item.source not in LATE_IMPORTS_ALLOWED
    ]
    assert late == []


@pytest.mark.parametrize(
    ("source", "target"),
    [
        ("mcp_tasks.protocol.dispatch", "mcp_tasks.tasks.engine"),  # siblings
        ("mcp_tasks.tasks.worker.job", "mcp_tasks.protocol.constants"),  # siblings
        ("mcp_tasks.models", "mcp_tasks.authoring.registry"),  # up
        ("mcp_tasks.protocol.handlers", "mcp_tasks.transport.http"),  # up
        (
            "mcp_tasks.tasks.state.lifecycle",
            "mcp_tasks.admin.events",
        ),  # up: the engine knows no admin
        ("mcp_tasks.core.db", "mcp_tasks.auth"),  # up
    ],
)
def test_the_check_refuses_an_upward_or_sideways_import(source: str, target: str) -> None:
    assert violations([Import(source, target, 1, in_function=False)]) != []


def test_the_scan_finds_function_level_imports() -> None:
    text = "from ..queues import queue\n\ndef later():\n    from ...authoring.registry import mcp\n"
    found = _imports(PACKAGE / "tasks" / "state" / "service.py", text)
    assert [(item.target, item.in_function) for item in found] == [
        ("mcp_tasks.tasks.queues.queue", False),
        ("mcp_tasks.authoring.registry", True),
    ]


#: The task engine's own layers: what runs jobs, what changes task state, what queues
#: work; ``engine`` (the port the protocol is handed) sits on the state.
TASK_LAYERS = {"worker": 3, "engine": 2, "state": 1, "queues": 0}
#: At most this many modules in one of its folders.
TASK_FOLDER_MODULES_AT_MOST = 14


def task_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["mcp_tasks", "tasks"] and len(parts) > 2 else None


def task_violations(imports: list[Import]) -> list[str]:
    """Imports inside the task engine that run up its layers (queues < state < worker)."""
    found = []
    for item in imports:
        source, target = task_layer(item.source), task_layer(item.target)
        if source is None or target is None or source == target:
            continue
        if TASK_LAYERS[target] >= TASK_LAYERS[source]:
            found.append(f"{item.source}:{item.line} ({source}) imports {item.target} ({target})")
    return found


def test_the_task_engine_runs_worker_then_state_then_queues() -> None:
    imports = _all_imports()
    assert any(task_layer(item.source) == "worker" for item in imports)  # the scan sees them
    assert task_violations(imports) == []
    assert task_violations(
        [Import("mcp_tasks.tasks.queues.queue", "mcp_tasks.tasks.state.rows", 1, False)]
    )


def test_every_task_module_is_in_one_of_its_layers() -> None:
    tasks = PACKAGE / "tasks"
    loose = sorted(
        path.name for path in tasks.glob("*.py") if path.stem not in ("__init__", "engine")
    )
    assert loose == []
    for folder in ("worker", "state", "queues"):
        modules = [path for path in (tasks / folder).glob("*.py") if path.stem != "__init__"]
        assert 0 < len(modules) <= TASK_FOLDER_MODULES_AT_MOST, folder


def test_the_architecture_page_names_files_that_exist() -> None:
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text))
    assert len(named) > 10
    missing = [
        name
        for name in sorted(named)
        if not (PACKAGE / name).exists() and not (PACKAGE.parent / name).exists()
    ]
    assert missing == []


def test_the_task_service_tells_others_only_through_its_outbox() -> None:
    """One after-commit way out (``tasks/state/outbox.py``): no other module of the task
    service registers an on-commit hook, publishes, announces or signals after commit."""
    hooks = re.compile(r"transaction\.on_commit|announce_on_commit|send_on_commit")
    state = PACKAGE / "tasks" / "state"
    found = [
        f"{path.name}:{number}"
        for path in sorted(state.glob("*.py"))
        if path.name != "outbox.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if hooks.search(line)
    ]
    assert found == []

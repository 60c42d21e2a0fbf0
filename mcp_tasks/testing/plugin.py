"""The pytest plugin of mcp_tasks: a project's tests call its tools with no fixture of
their own. pytest loads it by itself (the ``pytest11`` entry point ``mcp_tasks``, like
pytest-django's); ``-p no:mcp_tasks`` turns it off. Its fixtures need pytest-django.

- ``mcp_client``: an in-process :class:`~mcp_tasks.testing.McpClient` of the project's
  ASGI application.
- ``mcp_tasks_worker``: the test runs task tools on the embedded worker, in threads of the
  test process: ``MCP_TASKS["EMBEDDED_WORKER"]`` on, quick polls (:data:`WORKER_SETTINGS`),
  the rows in the database for every thread to see (``transactional_db``),
  ``mcp_tasks.layers.InProcessChannelLayer`` unless the project's layer serves other threads
  already (channels_redis), the worker started for the test and stopped after it with its
  connections closed.
- ``mcp_tasks_settings``: what ``mcp_tasks_worker`` adds to ``MCP_TASKS`` besides (``{}``);
  override it in a module or a ``conftest.py``.

Two things happen on their own. In a session that collects a test using ``mcp_tasks_worker``,
an in-memory SQLite test database (Django's default for SQLite) becomes a file in a
temporary directory, with the ``OPTIONS`` a worker thread needs: in memory, SQLite fails a
write beside another connection's at once ("database table is locked"). And in the pytest
process, requests no longer start the embedded worker on their own: only
``mcp_tasks_worker`` runs it, around the tests that ask for it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conf import get_config
from ..tasks.queues import embedded
from .client import McpClient

#: The fixture that runs the embedded worker: a session using it gets database files.
WORKER_FIXTURE = "mcp_tasks_worker"
#: What ``mcp_tasks_worker`` sets in ``MCP_TASKS`` before ``mcp_tasks_settings``: quick
#: polls that each answer at once (a held ``tasks/get`` answers at the *next* change, so a
#: poller would miss the state a task was already in), so a state that lasts longer than a
#: poll reaches ``on_progress``.
WORKER_SETTINGS = {"EMBEDDED_WORKER": True, "TASK_POLL_INTERVAL": 0.05, "TASK_GET_HOLD": 0}
#: Channel layers the embedded worker's thread cannot share (check mcp_tasks.W008).
_ONE_LOOP_LAYERS = (None, "channels.layers.InMemoryChannelLayer")
_IN_PROCESS_LAYER = {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}
_DIRECTORY = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Requests of this process leave the embedded worker to ``mcp_tasks_worker``."""
    embedded.no_autostart()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Before any test database exists: files for the sessions that collected a test of the
    worker (before ``-k`` deselects any: the same database whatever runs)."""
    if not any(WORKER_FIXTURE in getattr(item, "fixturenames", ()) for item in items):
        return
    from django.apps import apps
    from django.conf import settings

    if not (settings.configured and apps.ready):
        return
    from .worker import move_test_databases_to_files

    directory = Path(tempfile.mkdtemp(prefix="mcp_tasks-test-db-"))
    config.stash[_DIRECTORY] = directory
    move_test_databases_to_files(directory)


def pytest_unconfigure(config: pytest.Config) -> None:
    directory = config.stash.get(_DIRECTORY, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def mcp_client() -> Iterator[McpClient]:
    """An in-process client of ``settings.ASGI_APPLICATION`` (no server)."""
    with McpClient.in_process() as client:
        yield client


@pytest.fixture
def mcp_tasks_settings() -> dict[str, Any]:
    """``MCP_TASKS`` keys ``mcp_tasks_worker`` sets for its test: override this fixture."""
    return {}


@pytest.fixture
def mcp_tasks_worker(
    transactional_db: None, settings: Any, mcp_tasks_settings: dict[str, Any]
) -> Iterator[None]:
    """Task tools run in this test, on the embedded worker (see the module docstring)."""
    from .worker import task_worker

    settings.MCP_TASKS = {
        **(getattr(settings, "MCP_TASKS", None) or {}),
        **WORKER_SETTINGS,
        **mcp_tasks_settings,
    }
    alias = get_config().CHANNEL_LAYER
    layers = dict(getattr(settings, "CHANNEL_LAYERS", None) or {})
    if (layers.get(alias) or {}).get("BACKEND") in _ONE_LOOP_LAYERS:
        settings.CHANNEL_LAYERS = {**layers, alias: _IN_PROCESS_LAYER}
    with task_worker():
        yield

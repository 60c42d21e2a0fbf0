"""The pytest plugin of ``mcp_tasks.testing``: ``mcp_client``, ``mcp_tasks_worker`` and
``mcp_tasks_settings``, the test database a worker thread can share, the embedded worker
started only by the fixture, and the staff decisions of ``approve``/``reject``.

What a project's own test session sees is run as one: ``pytest`` in a subprocess, on a test
file written here, with the suite's settings (``tests.settings``) and the example project's
tools."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import TransactionTestCase, override_settings

from mcp_tasks.core.db import in_memory_sqlite
from mcp_tasks.models import Task
from mcp_tasks.tasks.worker import embedded_worker
from mcp_tasks.testing import McpClient, McpClientError, approve, reject, task_worker
from tests.conftest import ROOT, _with_database

worker = pytest.mark.usefixtures("mcp_tasks_worker")

#: Long enough that a lost wake-up shows: without the answer's wake-up a waiting task goes
#: on only at its hold window's end or its next heartbeat.
SLOW = {"INPUT_HOLD_WINDOW": 30.0, "TASK_HEARTBEAT_INTERVAL": 30.0}


def run_pytest(
    tmp_path: Path, test_file: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``pytest`` on ``test_file`` in a project of its own (``tmp_path``), as a user runs it."""
    (tmp_path / "pytest.ini").write_text(
        f"[pytest]\nDJANGO_SETTINGS_MODULE = tests.settings\npythonpath = {ROOT}\n"
        "asyncio_default_fixture_loop_scope = function\n"
    )
    (tmp_path / "test_tools.py").write_text(test_file)
    clean = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "PYTEST_ADDOPTS", "DJANGO_SETTINGS_MODULE")
        and not key.startswith(("MCP_TASKS", "PYTEST_XDIST"))
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )


#: A project's tests: tasks that ask a question, each test changing CHANNEL_LAYERS as the
#: README's fixture once did (the worker keeps listening on the layer it started with), and
#: a slow hold window and heartbeat: an answer reaches the task only by its wake-up.
USERS_TESTS = f"""
import time

import pytest
from django.db import connection

LAYERS = {{"default": {{"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}}}


@pytest.fixture
def mcp_tasks_settings():
    return {SLOW!r}


def test_a_plain_tool(mcp_client):
    assert mcp_client.call("add", {{"a": 1, "b": 2}})["structuredContent"] == {{"result": 3}}


@pytest.mark.parametrize("n", range(4))
def test_a_question_answered_goes_on_at_once(mcp_client, mcp_tasks_worker, settings, n):
    settings.CHANNEL_LAYERS = LAYERS
    if connection.vendor == "sqlite":
        assert not connection.is_in_memory_db(), connection.settings_dict["NAME"]
    run = mcp_client.start("long_report", {{"quarter": f"Q{{n}}", "steps": 1}})
    started = time.monotonic()
    task = run.wait(answer={{"Include draft figures?": True}})
    assert task["status"] == "completed", task
    assert run.text == f"Report for Q{{n}}: 1 sections with drafts."
    assert time.monotonic() - started < 10
"""


def test_a_projects_task_tests_pass_on_the_default_test_database(tmp_path: Path) -> None:
    """Django's default SQLite test database is in memory: the plugin moves it to a file,
    one per xdist worker."""
    result = run_pytest(tmp_path, USERS_TESTS, "-n", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout


@pytest.mark.postgres
def test_a_projects_task_tests_leave_no_postgres_test_database(
    tmp_path: Path, postgres_url: str
) -> None:
    """The worker's connections are closed after each test: the test database is dropped."""
    import psycopg

    name = f"mcp_tasks_plugin_{uuid.uuid4().hex[:8]}"
    result = run_pytest(
        tmp_path, USERS_TESTS, env={"DATABASE_URL": _with_database(postgres_url, name)}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout
    with psycopg.connect(_with_database(postgres_url, "postgres"), autocommit=True) as conn:
        left = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (f"test_{name}",))
        assert left.fetchone() is None, "the test database was not dropped"


def test_without_the_plugin_the_worker_refuses_an_in_memory_database(tmp_path: Path) -> None:
    tests = """
import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_tasks.testing import McpClient


@pytest.mark.django_db(transaction=True)
def test_a_task(settings):
    settings.MCP_TASKS = {"EMBEDDED_WORKER": True}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}
    with McpClient.in_process() as client, pytest.raises(ImproperlyConfigured) as raised:
        client.start("long_report", {"quarter": "Q1"})
    assert "in-memory SQLite" in str(raised.value)
    assert "mcp_tasks_worker" in str(raised.value)
    assert "TEST" in str(raised.value)
"""
    result = run_pytest(tmp_path, tests, "-p", "no:mcp_tasks")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


# -- in this session ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_task_without_a_worker_fails_at_once_naming_the_fixture(
    settings: Any, mcp_client: McpClient
) -> None:
    """In the pytest process requests never start the worker: only the fixture does."""
    settings.MCP_TASKS = {"EMBEDDED_WORKER": True}
    run = mcp_client.start("long_report", {"quarter": "Q1"})
    assert not embedded_worker.workers()
    started = time.monotonic()
    with pytest.raises(McpClientError, match="mcp_tasks_worker"):
        run.wait()
    assert time.monotonic() - started < 1
    assert Task.objects.get(pk=run.task_id).status == "working"  # queued, never started


@pytest.fixture
def channels_in_memory(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture
def channels_redis(settings: Any, redis_url: str) -> dict[str, Any]:
    layer = {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [redis_url], "prefix": f"test-plugin-{uuid.uuid4().hex[:8]}"},
    }
    settings.CHANNEL_LAYERS = {"default": layer}
    return layer


def test_the_worker_replaces_a_layer_of_one_event_loop(
    channels_in_memory: None, mcp_tasks_worker: None, settings: Any
) -> None:
    backend = settings.CHANNEL_LAYERS["default"]["BACKEND"]
    assert backend == "mcp_tasks.layers.InProcessChannelLayer"


def test_the_worker_keeps_a_layer_every_thread_can_use(
    channels_redis: dict[str, Any], mcp_tasks_worker: None, settings: Any, mcp_client: McpClient
) -> None:
    assert settings.CHANNEL_LAYERS["default"] == channels_redis
    run = mcp_client.start("long_report", {"quarter": "Q2", "steps": 1})
    assert run.wait(answer={"Include draft figures?": False})["status"] == "completed"


@worker
def test_the_worker_turns_embedded_mode_on_with_quick_polls(settings: Any) -> None:
    assert settings.MCP_TASKS["EMBEDDED_WORKER"] is True
    assert settings.MCP_TASKS["TASK_POLL_INTERVAL"] == 0.05
    assert settings.MCP_TASKS["TASK_GET_HOLD"] == 0
    assert not in_memory_sqlite()


@pytest.fixture
def mcp_tasks_settings() -> dict[str, Any]:
    return {"TASK_CONCURRENCY": 3}


@worker
def test_mcp_tasks_settings_reach_the_worker() -> None:
    (worker,) = embedded_worker.workers()
    assert worker.slots.size == 3


@worker
def test_an_idle_worker_stops_at_once() -> None:
    started = time.monotonic()
    embedded_worker.stop_workers()
    assert time.monotonic() - started < 0.5
    assert not embedded_worker.workers()


# -- staff decisions --------------------------------------------------------------------------


@worker
def test_approve_runs_the_task_with_the_approved_arguments(
    mcp_client: McpClient, admin_user: Any
) -> None:
    run = mcp_client.start("refund", {"customer": "ada", "amount": 120.0})
    approve(run, admin_user, edits={"amount": 100.0})
    assert run.wait()["status"] == "completed"
    assert run.structured == {"customer": "ada", "amount": 100.0, "note": ""}


@worker
def test_reject_ends_the_task_with_the_reason(mcp_client: McpClient, admin_user: Any) -> None:
    run = mcp_client.start("refund", {"customer": "ada", "amount": 120.0})
    reject(run, admin_user, "no receipt")
    assert run.wait()["status"] == "completed"
    assert run.result["isError"] is True
    assert "no receipt" in run.text


@worker
def test_approve_says_when_no_approval_comes(mcp_client: McpClient, admin_user: Any) -> None:
    run = mcp_client.start("long_report", {"quarter": "Q3"})
    with pytest.raises(McpClientError, match="asked for no approval"):
        approve(run, admin_user, timeout=0.2)
    run.cancel()


# -- without pytest's fixtures ----------------------------------------------------------------

IN_PROCESS_LAYER = {"default": {"BACKEND": "mcp_tasks.layers.InProcessChannelLayer"}}


class TaskWorkerInATransactionTestCase(TransactionTestCase):
    """Django's test runner: ``task_worker()`` around the test's code."""

    @override_settings(
        MCP_TASKS={"EMBEDDED_WORKER": True, "TASK_POLL_INTERVAL": 0.05},
        CHANNEL_LAYERS=IN_PROCESS_LAYER,
    )
    def test_a_task_runs_inside_task_worker(self) -> None:
        with task_worker(), McpClient.in_process() as client:
            run = client.start("long_report", {"quarter": "Q1", "steps": 1})
            run.wait(answer={"Include draft figures?": True})
        self.assertEqual(run.text, "Report for Q1: 1 sections with drafts.")
        self.assertEqual(embedded_worker.workers(), [])

    def test_task_worker_needs_embedded_mode(self) -> None:
        with self.assertRaisesMessage(ImproperlyConfigured, "MCP_TASKS['EMBEDDED_WORKER']"):
            with task_worker():
                pass

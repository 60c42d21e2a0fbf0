"""Log lines about a task carry ``task_id``, ``tool`` and ``principal`` as record attributes
(``mcp_tasks.core.log_fields``): passed as ``extra`` by mcp_tasks, and added by the
``TaskFields`` handler filter to every line written while a task's job runs, the tool's
own logging included. The JSON logging setup of ``docs/how-to/observability.md`` shows
them as fields."""

from __future__ import annotations

import json
import logging
import logging.config
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from mcp_tasks import Context
from mcp_tasks.authoring.registry import MCPServer
from mcp_tasks.core import log_fields, task_contract
from mcp_tasks.models import Task, TaskStatus
from mcp_tasks.tasks.worker.job import run_task
from tests.support.rows import new_task

tool_logger = logging.getLogger("tests.tool_code")


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """What is logged at INFO and above, through a handler with the filter added."""
    caplog.handler.addFilter(log_fields.TaskFields())
    with caplog.at_level(logging.INFO):
        yield caplog
    caplog.handler.filters.clear()


@pytest.fixture
def noisy_server() -> MCPServer:
    server = MCPServer()

    @server.tool(task=True)
    async def noisy(ctx: Context) -> str:
        tool_logger.info("the tool's own line")
        raise RuntimeError("boom")

    return server


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    return {name: getattr(record, name, None) for name in log_fields.FIELDS}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("embedded_queue", "orm_thread_closed")
def test_a_jobs_lines_and_the_tools_own_carry_the_tasks_fields(
    logged: pytest.LogCaptureFixture, noisy_server: MCPServer
) -> None:
    task = new_task("noisy", principal_scope="user:42")
    run_task(task.id, server=noisy_server)
    assert Task.objects.get(pk=task.pk).status == TaskStatus.COMPLETED  # isError result
    own = next(r for r in logged.records if r.getMessage() == "the tool's own line")
    raised = next(r for r in logged.records if r.getMessage() == "tool 'noisy' raised")
    expected = {"task_id": task.id, "tool": "noisy", "principal": "user:42"}
    assert fields_of(own) == expected
    assert fields_of(raised) == expected
    assert raised.exc_info is not None


def test_lines_outside_a_job_get_no_fields(logged: pytest.LogCaptureFixture) -> None:
    tool_logger.warning("about nothing")
    assert fields_of(logged.records[-1]) == dict.fromkeys(log_fields.FIELDS)


def test_a_lines_own_fields_win_over_the_running_jobs() -> None:
    class Row:
        id, tool_name, principal_scope = "t-running", "outer", "user:1"

    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    record.task_id = "t-other"
    with log_fields.running(Row()):
        log_fields.TaskFields().filter(record)
    assert fields_of(record) == {"task_id": "t-other", "tool": "outer", "principal": "user:1"}


@pytest.mark.django_db
@pytest.mark.usefixtures("embedded_queue")
@override_settings(MCP_TASKS={"EMBEDDED_WORKER": True, "MAX_ACTIVE_TASKS": 1})
def test_a_refused_task_is_logged_with_its_tool_and_caller(
    logged: pytest.LogCaptureFixture,
) -> None:
    new_task("build_report", principal_scope="user:7")
    with pytest.raises(task_contract.QuotaExceeded):
        new_task("build_report", principal_scope="user:7")
    refused = next(r for r in logged.records if "refused" in r.getMessage())
    assert fields_of(refused) == {"task_id": None, "tool": "build_report", "principal": "user:7"}


def test_the_readmes_json_logging_setup_prints_the_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = documented_logging_config()
    logging.config.dictConfig(config)
    try:
        with log_fields.running(_task("t-1", "build_report", "user:7")):
            logging.getLogger("mcp_tasks.tasks").warning("slow answer")
        logging.getLogger("mcp_tasks.tasks").warning("no task")
    finally:
        logging.getLogger("mcp_tasks").handlers.clear()
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first["message"] == "slow answer"
    assert (first["task_id"], first["tool"], first["principal"]) == (
        "t-1",
        "build_report",
        "user:7",
    )
    assert second["message"] == "no task" and "task_id" not in second


def _task(task_id: str, tool: str, principal: str) -> Any:
    class Row:
        id, tool_name, principal_scope = task_id, tool, principal

    return Row()


def documented_logging_config() -> dict[str, Any]:
    """The ``LOGGING`` dict of the "Logging" section of ``docs/how-to/observability.md``,
    as written there."""
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "observability.md"
    text = page.read_text()
    section = text[text.index("## Logging") :]
    code = section[section.index("```python") + len("```python") : section.index("```\n", 10)]
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the page's own example
    config: dict[str, Any] = namespace["LOGGING"]
    return config

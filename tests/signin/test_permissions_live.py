"""Per-tool permissions end to end: a live server and a real ``manage.py rqworker``.

The worker checks the task's caller again before every job: a permission revoked while the
task waits in the queue, or while it is parked on an unanswered question, fails the task
with a clear message instead of running the tool. Permissions are granted and revoked from
another process (``django_shell``), as an operator does in the admin. Nothing is mocked, and
no assertion depends on wall-clock time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.conftest import LiveServer
from tests.support.results import task_text_of as text_of
from tests.support.task_driver import TaskDriver, django_shell, task_capabilities, wait_released
from tests.support.worker_fixtures import RqWorker

pytestmark = [pytest.mark.live, pytest.mark.redis]

PERM = "view_task"
REFUSED = "may no longer use tool"

_SET_PERMISSION = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
user, _ = get_user_model().objects.get_or_create(username=username)
permission = Permission.objects.get(content_type__app_label="mcp_tasks", codename=codename)
if grant:
    user.user_permissions.add(permission)
else:
    user.user_permissions.remove(permission)
result = sorted(user.get_all_permissions())
"""


async def set_permission(server: LiveServer, username: str, *, grant: bool) -> None:
    await django_shell(server, _SET_PERMISSION, username=username, codename=PERM, grant=grant)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=120) as client:
        yield client


def driver(http: httpx.AsyncClient, server: LiveServer, username: str) -> TaskDriver:
    return TaskDriver(
        http,
        server.mcp_url,
        capabilities=task_capabilities("elicitation"),
        token=f"user-{username}",
    )


async def tool_names(client: TaskDriver) -> list[str]:
    result = await client.result_of("tools/list", {})
    return [tool["name"] for tool in result["tools"]]


async def test_only_a_permitted_user_lists_and_runs_the_tool(
    task_server: Callable[..., LiveServer],
    rq_worker: Callable[..., RqWorker],
    http: httpx.AsyncClient,
) -> None:
    server = task_server()
    rq_worker(server)
    await set_permission(server, "ada", grant=True)
    ada, bob = driver(http, server, "ada"), driver(http, server, "bob")
    assert "guarded_task" in await tool_names(ada)
    assert "guarded_task" not in await tool_names(bob)
    refused = await bob.rpc(
        "tools/call", {"name": "guarded_task", "arguments": {}}, name="guarded_task"
    )
    unknown = await bob.rpc(
        "tools/call", {"name": "no_such_tool", "arguments": {}}, name="no_such_tool"
    )
    assert refused["error"]["code"] == unknown["error"]["code"]
    assert refused["error"]["message"] == "Unknown tool: guarded_task"
    task_id = await ada.call("guarded_task")
    assert text_of(await ada.run(task_id)) == "guarded done"


async def test_permission_revoked_before_the_task_starts_fails_it(
    task_server: Callable[..., LiveServer],
    rq_worker: Callable[..., RqWorker],
    http: httpx.AsyncClient,
) -> None:
    server = task_server()  # no worker yet: the task stays queued
    await set_permission(server, "ada", grant=True)
    ada = driver(http, server, "ada")
    task_id = await ada.call("guarded_task")
    await set_permission(server, "ada", grant=False)
    rq_worker(server)
    task = await ada.run(task_id)
    assert task["status"] == "failed", task
    assert REFUSED in task["statusMessage"]


async def test_permission_revoked_while_parked_fails_the_task_on_resume(
    task_server: Callable[..., LiveServer],
    rq_worker: Callable[..., RqWorker],
    http: httpx.AsyncClient,
) -> None:
    server = task_server({"MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "0.5"})
    rq_worker(server)
    await set_permission(server, "ada", grant=True)
    ada = driver(http, server, "ada")
    task_id = await ada.call("guarded_question")
    waiting = await ada.wait_for_input(task_id)
    (key,) = waiting["inputRequests"]
    await wait_released(server, [task_id])  # its job ended: the answer resumes it on a new one
    await set_permission(server, "ada", grant=False)
    await ada.update(task_id, {key: {"action": "accept", "content": {"value": True}}})
    task = await ada.run(task_id)
    assert task["status"] == "failed", task
    assert REFUSED in task["statusMessage"]
    assert "guarded_question" in task["statusMessage"]


async def test_parked_task_of_a_still_permitted_user_resumes(
    task_server: Callable[..., LiveServer],
    rq_worker: Callable[..., RqWorker],
    http: httpx.AsyncClient,
) -> None:
    server = task_server({"MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "0.5"})
    rq_worker(server)
    await set_permission(server, "ada", grant=True)
    ada = driver(http, server, "ada")
    task_id = await ada.call("guarded_question")
    waiting = await ada.wait_for_input(task_id)
    (key,) = waiting["inputRequests"]
    await wait_released(server, [task_id])
    await ada.update(task_id, {key: {"action": "accept", "content": {"value": True}}})
    assert text_of(await ada.run(task_id)) == "answered: accept"

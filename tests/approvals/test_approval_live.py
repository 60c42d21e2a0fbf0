"""Staff sign-off end to end: a live server, a real ``manage.py rqworker`` on a private
Redis, a client speaking the tasks extension over HTTP, and the operator's decisions made
through the task service from another process (as the admin makes them).

The hold window is short, so each task is let go by its worker while staff decide and a
new job resumes it: the path every real approval takes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from mcp_tasks.authoring.approval import WAITING_FOR_STAFF
from tests.support.task_driver import TaskDriver, django_shell, structured_of, task_capabilities
from tests.support.worker_fixtures import RedisProcess, TaskStack, module_task_stack

pytestmark = [pytest.mark.live, pytest.mark.redis]


@pytest.fixture(scope="module")
def module_stack(request: pytest.FixtureRequest, stack_redis: RedisProcess) -> Iterator[TaskStack]:
    env = {"MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "0.3"}
    yield from module_task_stack(request, stack_redis, env, label="approvals")


@pytest.fixture
def stack(request: pytest.FixtureRequest, module_stack: TaskStack) -> TaskStack:
    module_stack.attach(request)
    return module_stack


@pytest.fixture
async def client(stack: TaskStack) -> AsyncIterator[TaskDriver]:
    async with httpx.AsyncClient(timeout=60) as http:
        yield TaskDriver(http, stack.url, capabilities=task_capabilities())


_DECIDE = """
from django.contrib.auth.models import Permission, User
from mcp_tasks.models import InputRequest, Task
from mcp_tasks.tasks.state import approvals
result = []
for username in usernames:
    user, _ = User.objects.get_or_create(username=username, defaults={"is_staff": True})
    user.user_permissions.add(Permission.objects.get(codename="answer_inputrequest"))
    user = User.objects.get(pk=user.pk)  # fresh permission cache
    question = InputRequest.objects.get(task_id=task_id, key="approval")
    decision = approvals.decide(question.pk, user, approve=approve, reason=reason, edits=edits)
    result.append([decision and decision.final, Task.objects.get(pk=task_id).status_message])
"""


async def decide(
    stack: TaskStack, task_id: str, *usernames: str, **how: Any
) -> list[tuple[bool | None, str]]:
    """Each user decides in turn (one process); after each: (final?, the status message)."""
    how = {"approve": True, "reason": "", "edits": {}, **how}
    found = await django_shell(
        stack.server, _DECIDE, task_id=task_id, usernames=list(usernames or ["ann"]), **how
    )
    return [(final, message) for final, message in found]


def waiting_for_staff(task: dict[str, Any]) -> bool:
    message = str(task.get("statusMessage", ""))
    return task["status"] == "working" and message.startswith(WAITING_FOR_STAFF)


async def test_an_approved_refund_runs_with_the_edited_amount(
    client: TaskDriver, stack: TaskStack
) -> None:
    task_id = await client.call("refund", {"customer": "acme", "amount": 120})
    task = await client.wait_for(task_id, waiting_for_staff)
    assert "inputRequests" not in task
    # The client cannot answer it: refused exactly like an unknown key (an empty ack).
    ack = await client.update(task_id, {"approval": {"action": "accept", "content": {}}})
    assert set(ack) <= {"resultType", "_meta"}
    assert waiting_for_staff(await client.get(task_id))
    assert (await decide(stack, task_id, edits={"amount": 80.0}))[0][0] is True
    done = await client.wait_for(task_id, lambda t: t["status"] == "completed")
    assert structured_of(done) == {"customer": "acme", "amount": 80.0, "note": ""}


async def test_a_rejected_refund_completes_with_the_reason(
    client: TaskDriver, stack: TaskStack
) -> None:
    task_id = await client.call("refund", {"customer": "acme", "amount": 10})
    await client.wait_for(task_id, waiting_for_staff)
    await decide(stack, task_id, approve=False, reason="duplicate claim")
    done = await client.wait_for(task_id, lambda t: t["status"] == "completed")
    assert done["result"]["isError"] is True
    assert done["result"]["content"][0]["text"] == "Rejected by staff: duplicate claim"


async def test_four_eyes_run_after_the_second_approver(
    client: TaskDriver, stack: TaskStack
) -> None:
    task_id = await client.call("erase_customer", {"customer": "acme"})
    await client.wait_for(task_id, waiting_for_staff)
    (first, second) = await decide(stack, task_id, "ann", "bob")
    assert first == (False, f"{WAITING_FOR_STAFF} (1 of 2 approvals)")
    assert second[0] is True
    done = await client.wait_for(task_id, lambda t: t["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "Erased the records of acme."


async def test_a_staff_question_is_answered_in_the_admin_not_by_the_client(
    client: TaskDriver, stack: TaskStack
) -> None:
    task_id = await client.call("publish_notice", {"text": "maintenance"})
    await client.wait_for(task_id, waiting_for_staff)
    answered = await django_shell(
        stack.server,
        """
        from django.contrib.auth.models import User
        from mcp_tasks.tasks.state import service
        key = service.find_task(task_id).input_requests.get().key
        staff, _ = User.objects.get_or_create(username="root", defaults={"is_superuser": True, "is_staff": True})
        result = service.answer(task_id, key, {"action": "accept", "content": {"page": "blog"}},
                                principal_scope=None, answered_by="admin:root", user=staff)
        """,
        task_id=task_id,
    )
    assert answered is True
    done = await client.wait_for(task_id, lambda t: t["status"] == "completed")
    assert done["result"]["content"][0]["text"] == "Published on the blog page: maintenance"

"""Rows and users for the approval tests: tasks of the demo's approval tools, recorded
the way the worker records them (through the task service)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User

from mcp_tasks.authoring.approval import StaffAudience
from mcp_tasks.authoring.registry import mcp
from mcp_tasks.models import InputRequest, Task, TaskSnapshot, TaskStatus
from mcp_tasks.tasks.state import approvals, service

_ids = itertools.count(1)
BROWSE = ("mcp_tasks.view_task", "mcp_tasks.view_inputrequest")
ANSWER = "mcp_tasks.answer_inputrequest"


def make_task(tool: str, arguments: dict[str, Any], owner: str = "anonymous") -> Task:
    task = Task.objects.create(
        id=f"a_{next(_ids):04d}-" + "y" * 36,
        principal_scope=owner,
        tool_name=tool,
        status=TaskStatus.WORKING,
        arguments=arguments,
    )
    TaskSnapshot.objects.create(task=task, era="modern", protocol_version="2026-07-28")
    return task


def wait_for_approval(task: Task) -> InputRequest:
    """The task's approval question, as the worker's first job records it."""
    tool = mcp.tools[task.tool_name]
    assert tool.approval is not None
    params = {
        "message": tool.approval.render(task.arguments),
        "tool": tool.name,
        "arguments": task.arguments,
        "editable": list(tool.approval.editable),
        "approvers": tool.approval.approvers,
    }
    return approvals.ask_approval(task.id, params, tool.approval.audience, "worker-1")


def ask_staff(task: Task, staff: StaffAudience) -> InputRequest:
    params = {
        "mode": "form",
        "message": "Which region?",
        "requestedSchema": {
            "type": "object",
            "properties": {"value": {"type": "string"}},
            "required": ["value"],
        },
    }
    return service.ask(task.id, 1, "elicitation/create", params, "", staff=staff)


def make_user(username: str, *perms: str, groups: tuple[str, ...] = ()) -> User:
    user = User.objects.create_user(username, is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def refund_task() -> Task:
    return make_task("refund", {"customer": "acme", "amount": 120.0})


@pytest.fixture
def approver() -> User:
    return make_user("ann", *BROWSE, ANSWER)


@pytest.fixture
def second_approver() -> User:
    return make_user("bob", *BROWSE, ANSWER)


@pytest.fixture
def onlooker() -> User:
    return make_user("otto", *BROWSE)

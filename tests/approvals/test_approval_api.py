"""The authoring side: ``Approval`` and ``ctx.ask_staff`` refuse what cannot work, an
approval tool runs only as a task, check mcp_tasks.E018 reports one that could not, and
W015 one whose permission no installed model declares."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator

import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_tasks import Approval, Context, TaskConfig, ToolError
from mcp_tasks.authoring.approval import StaffAudience
from mcp_tasks.authoring.registry import MCPServer, mcp
from mcp_tasks.authoring.tool_call import run_tool
from mcp_tasks.checks.approvals import check_approvals


def test_approval_refuses_bad_arguments() -> None:
    with pytest.raises(ImproperlyConfigured, match="approvers"):
        Approval(summary="x", approvers=0)
    with pytest.raises(ImproperlyConfigured, match="tuple of argument names"):
        Approval(summary="x", editable="amount")  # type: ignore[arg-type]
    with pytest.raises(ImproperlyConfigured, match=r"app_label\.codename"):
        Approval(summary="x", permission="approve")


@pytest.mark.parametrize("timeout", [0, -1, math.nan, math.inf, 1e12])
def test_a_staff_timeout_that_is_no_deadline_is_refused(timeout: float) -> None:
    with pytest.raises(ImproperlyConfigured, match="timeout"):
        Approval(summary="x", timeout=timeout)
    with pytest.raises(ImproperlyConfigured, match="timeout"):
        StaffAudience(timeout=timeout)
    assert StaffAudience(timeout=100 * 365 * 86400).timeout == 100 * 365 * 86400


def test_approval_names_only_arguments_of_the_tool() -> None:
    server = MCPServer()
    with pytest.raises(ImproperlyConfigured, match=r"editable=\.\.\.\) names amont"):

        @server.tool(task=True, approval=Approval(summary="x", editable=("amont",)))
        async def pay(amount: float) -> str:
            return ""

    with pytest.raises(ImproperlyConfigured, match=r"summary=\.\.\.\) names who"):

        @server.tool(task=True, approval=Approval(summary="Pay {who}"))
        async def pay_too(amount: float) -> str:
            return ""


def test_an_approval_tool_runs_only_as_a_task() -> None:
    assert mcp.tools["refund"].task.mode == "required"
    assert Approval(summary="Refund {amount}").render({"amount": 5}) == "Refund 5"
    assert Approval(summary="Refund {amount}").render({}) == "Refund {amount}"


@pytest.fixture
def optional_approval_tool() -> Iterator[str]:
    @mcp.tool(
        name="approval_check_probe",
        task=TaskConfig(mode="optional"),
        approval=Approval(summary="probe"),
    )
    async def probe() -> str:
        return "ran"

    yield "approval_check_probe"
    del mcp.tools["approval_check_probe"]


def test_e018_an_approval_tool_that_may_run_plainly(optional_approval_tool: str) -> None:
    (message,) = check_approvals()
    assert message.id == "mcp_tasks.E018"
    assert optional_approval_tool in message.msg


def test_the_demo_project_has_no_e018() -> None:
    assert check_approvals() == []


@pytest.fixture
def approval_with_permission() -> Iterator[Callable[[str], str]]:
    names: list[str] = []

    def declare(permission: str) -> str:
        name = f"approval_permission_probe_{len(names)}"

        @mcp.tool(name=name, task=True, approval=Approval(summary="probe", permission=permission))
        async def probe() -> str:
            return "ran"

        names.append(name)
        return name

    yield declare
    for name in names:
        del mcp.tools[name]


def test_w014_an_approval_permission_of_an_app_that_does_not_exist(
    approval_with_permission: Callable[[str], str],
) -> None:
    tool = approval_with_permission("billing.approve_refund")
    (message,) = check_approvals()
    assert message.id == "mcp_tasks.W015"
    assert tool in message.msg and "'billing.approve_refund'" in message.msg
    assert "only superusers could approve" in message.msg
    assert "'billing' is not an installed app's label" in (message.hint or "")


def test_w014_a_mistyped_permission_hints_at_the_apps_own(
    approval_with_permission: Callable[[str], str],
) -> None:
    approval_with_permission("mcp_tasks.answer_inputrequests")
    (message,) = check_approvals()
    assert message.id == "mcp_tasks.W015"
    assert (message.hint or "").startswith("Did you mean 'mcp_tasks.answer_inputrequest'")


def test_permissions_models_declare_pass(approval_with_permission: Callable[[str], str]) -> None:
    approval_with_permission("auth.change_user")  # a default permission
    approval_with_permission("mcp_tasks.answer_inputrequest")  # Meta.permissions
    assert check_approvals() == []


def test_an_approval_tool_called_plainly_does_not_run(optional_approval_tool: str) -> None:
    tool = mcp.tools[optional_approval_tool]
    result = asyncio.run(run_tool(tool, {}, Context()))
    assert result["isError"] is True
    assert "needs a staff approval" in result["content"][0]["text"]


def test_ask_staff_outside_a_task_says_why() -> None:
    with pytest.raises(ToolError, match="needs a background task"):
        asyncio.run(Context().ask_staff("Which region?", str))

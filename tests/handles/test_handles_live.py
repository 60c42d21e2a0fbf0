"""Clients without the tasks extension (README "Clients without tasks"): the ``mcp`` 2.3 SDK
``Client`` in both eras (2026-07-28, and 2025-11-25 sessions without the ``tasks``
capability) against a live server with a real rq worker on a real Redis. Each task tool
call becomes a task; the call answers within its window (1 s here) with the result or a
handle, and the companion tools carry the client to the result.

The module's tests share one server and worker (``stack``): every task a test starts ends
before it does (or is cancelled)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from tests.support.live import (
    final_message,
    legacy_headers,
    legacy_initialize,
    modern_headers,
    modern_request,
    sdk_client,
)
from tests.support.task_driver import django_shell
from tests.support.worker_fixtures import (
    TASKS_EXTENSION,
    RedisProcess,
    TaskStack,
    db_rows,
    module_task_stack,
    wait_for_path,
)

pytestmark = [pytest.mark.live, pytest.mark.redis]

WINDOW = 1.0
CHECK_WAIT = 2.0
#: The SDK client's own request timeout: every tool below runs longer than that.
CLIENT_TIMEOUT = 4.0


@pytest.fixture(scope="module")
def module_stack(request: pytest.FixtureRequest, stack_redis: RedisProcess) -> Iterator[TaskStack]:
    env = {
        "MCP_TASKS_TEST_INLINE_WINDOW": str(WINDOW),
        "MCP_TASKS_TEST_CHECK_WAIT": str(CHECK_WAIT),
        "MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "0.3",
        # daphne hears a client close a request's connection at its next write.
        "MCP_TASKS_TEST_SSE_KEEPALIVE": "0.3",
    }
    yield from module_task_stack(request, stack_redis, env, label="handles")


@pytest.fixture
def stack(request: pytest.FixtureRequest, module_stack: TaskStack) -> TaskStack:
    module_stack.attach(request)
    return module_stack


@pytest.fixture
def url(stack: TaskStack) -> str:
    return stack.url


@pytest.fixture(params=["modern", "legacy"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def connect(era: str, url: str, **kwargs: Any) -> Any:
    """The SDK client of ``era``, its request timeout shorter than the tools below run."""
    kwargs.setdefault("read_timeout_seconds", CLIENT_TIMEOUT)
    if era == "legacy":
        kwargs["mode"] = "legacy"
    return sdk_client(url, **kwargs)


def text(result: types.CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, types.TextContent))


def is_handle(result: types.CallToolResult) -> bool:
    structured = result.structured_content or {}
    return not result.is_error and "taskId" in structured and "next" in structured


async def follow(client: Any, result: types.CallToolResult, limit: int = 40) -> Any:
    """Make the call each handle names until a result that is not a handle comes."""
    for _ in range(limit):
        if not is_handle(result):
            return result
        step = (result.structured_content or {})["next"]
        assert step["tool"] == "check_task", result
        result = await client.call_tool(step["tool"], step["arguments"])
    raise AssertionError(f"no result after {limit} checks: {text(result)}")


# -- the call and its window ------------------------------------------------------------------


async def test_a_tool_longer_than_the_clients_timeout_reaches_its_result(
    era: str, url: str
) -> None:
    async with connect(era, url) as client:
        started = time.monotonic()
        handle = await client.call_tool("slow_compute", {"seconds": 6, "label": "long"})
        assert time.monotonic() - started < CLIENT_TIMEOUT
        assert is_handle(handle), text(handle)
        structured = handle.structured_content
        assert structured["status"] == "working"
        assert structured["tool"] == "slow_compute"
        assert structured["next"] == {
            "tool": "check_task",
            "arguments": {"task_id": structured["taskId"]},
        }
        assert "goes on in the background" in text(handle)
        done = await follow(client, handle)
    assert done.is_error is False
    assert text(done) == "slow_compute long finished after 6s"  # exactly what the tool returns


async def test_a_quick_task_answers_its_result_in_the_window(era: str, url: str) -> None:
    async with connect(era, url) as client:
        result = await client.call_tool("trivial_task", {"n": 4})
    assert not is_handle(result)
    assert result.structured_content == {"result": 4}


async def test_progress_goes_to_a_client_that_asks_for_it(
    era: str, url: str, tmp_path: Path
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(era, url) as client:
        handle = await client.call_tool(
            "gated_task", {"marker_dir": str(tmp_path)}, progress_callback=on_progress
        )
        assert is_handle(handle)
        assert seen == [(2.0, 5.0, "two of five")]
        (tmp_path / "gate").write_text("open")
        done = await follow(client, handle)
    assert text(done) == "gate opened after two of five"


# -- questions --------------------------------------------------------------------------------


async def test_a_client_that_can_answer_is_asked_inline(era: str, url: str) -> None:
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"value": True})

    async with connect(era, url, elicitation_callback=answer) as client:
        result = await client.call_tool("long_report", {"quarter": "Q1", "steps": 1})
    assert asked == ["Include draft figures?"]
    assert text(result) == "Report for Q1: 1 sections with drafts."


async def test_a_question_is_answered_through_the_answer_tool(era: str, url: str) -> None:
    async with connect(era, url) as client:
        handle = await client.call_tool("long_report", {"quarter": "Q2", "steps": 1})
        assert is_handle(handle)
        structured = handle.structured_content
        (question,) = structured["questions"]
        assert question["message"] == "Include draft figures?"
        assert question["requestedSchema"]["properties"] == {"value": {"type": "boolean"}}
        assert structured["next"]["tool"] == "answer_task"
        task_id = structured["taskId"]
        wrong = await client.call_tool("answer_task", {"task_id": task_id, "answer": "maybe"})
        assert wrong.is_error is True
        assert "does not fit the question" in text(wrong)
        assert "'maybe' is not of type 'boolean'" in text(wrong)
        answered = await client.call_tool("answer_task", {"task_id": task_id, "answer": True})
        done = await follow(client, answered)
        assert text(done) == "Report for Q2: 1 sections with drafts."
        late = await client.call_tool("answer_task", {"task_id": task_id, "answer": False})
    assert late.is_error is True
    assert "has ended (completed)" in text(late)


async def test_a_declined_question_reaches_the_tool_as_declined(url: str) -> None:
    async with connect("modern", url) as client:
        handle = await client.call_tool("long_report", {"quarter": "Q3", "steps": 1})
        task_id = handle.structured_content["taskId"]
        done = await follow(
            client,
            await client.call_tool("answer_task", {"task_id": task_id, "action": "decline"}),
        )
    assert text(done) == "Report for Q3: 1 sections."


# -- approvals ----------------------------------------------------------------------------------


_STAFF = """
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from mcp_tasks.models import InputRequest
user, _ = User.objects.get_or_create(username="approver", defaults={"is_staff": True})
user.is_staff = True
user.set_password("pw-approver")
user.save()
user.user_permissions.add(Permission.objects.get(codename="answer_inputrequest"))
question = InputRequest.objects.get(task_id=task_id, key="approval")
result = reverse("admin:mcp_tasks_inputrequest_decide", args=[question.pk])
"""


async def approve_in_the_admin(stack: TaskStack, task_id: str) -> None:
    """An operator signs in to the admin and presses Approve on the task's approval."""
    decide = await django_shell(stack.server, _STAFF, task_id=task_id)
    base = stack.server.url
    async with httpx.AsyncClient(base_url=base, timeout=30, follow_redirects=True) as admin:
        await admin.get("/admin/login/")
        login = await admin.post(
            "/admin/login/?next=/admin/",
            data={
                "username": "approver",
                "password": "pw-approver",
                "csrfmiddlewaretoken": admin.cookies["csrftoken"],
            },
            headers={"Referer": f"{base}/admin/login/"},
        )
        assert login.status_code == 200 and "sessionid" in admin.cookies, login.text[:500]
        await admin.get(decide)
        response = await admin.post(
            decide,
            data={  # the form as the page fills it: the editable arguments as they are
                "_approve": "1",
                "approval-amount": "12",
                "approval-note": "",
                "csrfmiddlewaretoken": admin.cookies["csrftoken"],
            },
            headers={"Referer": f"{base}{decide}"},
        )
        assert response.status_code == 200, response.text[:500]
        assert "Approved: the task runs." in response.text


async def test_an_approval_approved_in_the_admin_reaches_its_result(
    era: str, stack: TaskStack
) -> None:
    async with connect(era, stack.url) as client:
        handle = await client.call_tool("refund", {"customer": "acme", "amount": 12})
        assert is_handle(handle)
        structured = handle.structured_content
        assert structured["waitingFor"] == "staff"
        assert "waits for a decision by staff" in text(handle)
        task_id = structured["taskId"]
        refused = await client.call_tool("answer_task", {"task_id": task_id, "answer": True})
        assert refused.is_error is True
        assert "waits for staff of this server, not for you" in text(refused)
        await approve_in_the_admin(stack, task_id)
        done = await follow(client, await client.call_tool("check_task", {"task_id": task_id}))
    assert done.is_error is False
    assert done.structured_content == {"customer": "acme", "amount": 12.0, "note": ""}


# -- cancel and list ------------------------------------------------------------------------------


@pytest.mark.cancel
async def test_cancel_task_stops_the_task(era: str, url: str, stack: TaskStack) -> None:
    async with connect(era, url) as client:
        handle = await client.call_tool("slow_compute", {"seconds": 60})
        task_id = handle.structured_content["taskId"]
        cancelled = await client.call_tool("cancel_task", {"task_id": task_id})
        assert cancelled.is_error is False
        assert cancelled.structured_content == {
            "taskId": task_id,
            "status": "cancelled",
            "cancelled": True,
        }
        checked = await client.call_tool("check_task", {"task_id": task_id})
        again = await client.call_tool("cancel_task", {"task_id": task_id})
    assert checked.is_error is True
    assert "was cancelled" in text(checked)
    assert again.structured_content["cancelled"] is False
    status = db_rows(
        stack.server.database_url, "SELECT status FROM mcp_tasks_task WHERE id = %s", (task_id,)
    )
    assert status == [("cancelled",)]


async def test_list_tasks_shows_the_callers_unfinished_tasks_only(url: str, tmp_path: Path) -> None:
    async with (
        connect("modern", url, token="valid-lister") as mine,
        connect("modern", url, token="valid-other") as other,
    ):
        handle = await mine.call_tool("gated_task", {"marker_dir": str(tmp_path)})
        task_id = handle.structured_content["taskId"]
        listed = await mine.call_tool("list_tasks", {})
        theirs = await other.call_tool("list_tasks", {})
        (tmp_path / "gate").write_text("open")
        await follow(mine, handle)
        after = await mine.call_tool("list_tasks", {})
    assert [task["taskId"] for task in listed.structured_content["tasks"]] == [task_id]
    assert task_id in text(listed)
    assert theirs.structured_content == {"tasks": []}
    assert after.structured_content == {"tasks": []}


# -- what a model reads -------------------------------------------------------------------------


_NEXT_CALL = re.compile(r"call `([A-Za-z0-9_.-]+)` with (\{[^{}]*\})")


async def test_a_model_follows_the_words_from_the_first_call_to_the_result(url: str) -> None:
    """Only what a model reads: the tools' descriptions and the results' text. The next call
    is the one the text names, with the arguments it gives; a question is answered as the
    text says it should be. No ids are made up or parsed by their format."""
    async with connect("modern", url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        description = tools["long_report"].description or ""
        (first_tool,) = re.findall(r"call `([A-Za-z0-9_.-]+)` with that task_id", description)
        assert first_tool in tools  # the description names a tool the model can see
        result = await client.call_tool("long_report", {"quarter": "Q4", "steps": 15})
        calls = ["long_report"]
        for _ in range(30):
            words = text(result)
            if "has not finished" not in words:
                break
            tool, arguments = _NEXT_CALL.findall(words)[0]
            arguments = json.loads(arguments)
            if 'plus "answer"' in words:
                assert "Answer with true or false" in words  # what the question wants
                arguments["answer"] = True
            assert tool in tools
            calls.append(tool)
            result = await client.call_tool(tool, arguments)
    assert text(result) == "Report for Q4: 15 sections with drafts."
    assert calls[:2] == ["long_report", "check_task"]  # 1.5 s of work: longer than the window
    assert "answer_task" in calls


# -- bad input --------------------------------------------------------------------------------


async def test_an_unknown_task_is_not_found_by_every_companion(url: str) -> None:
    async with connect("modern", url) as client:
        found = [
            await client.call_tool(tool, {"task_id": "no-such-task", "answer": 1})
            for tool in ("check_task", "answer_task", "cancel_task")
        ]
    for result in found:
        assert result.is_error is True
        assert text(result).startswith("Task not found: no task 'no-such-task' of yours exists")


async def test_another_principals_task_is_not_found(url: str, tmp_path: Path) -> None:
    async with (
        connect("modern", url, token="valid-owner") as owner,
        connect("modern", url, token="valid-intruder") as intruder,
    ):
        handle = await owner.call_tool("gated_task", {"marker_dir": str(tmp_path)})
        task_id = handle.structured_content["taskId"]
        tries = [
            await intruder.call_tool(tool, {"task_id": task_id, "answer": 1})
            for tool in ("check_task", "answer_task", "cancel_task")
        ]
        unknown = await intruder.call_tool("check_task", {"task_id": task_id[::-1]})
        (tmp_path / "gate").write_text("open")
        done = await follow(owner, handle)
    assert text(done) == "gate opened after two of five"  # untouched by the intruder
    for result in tries:
        assert result.is_error is True
        assert text(result) == text(unknown).replace(task_id[::-1], task_id)


async def test_a_finished_task_checked_twice_gives_its_result_twice(url: str) -> None:
    async with connect("modern", url) as client:
        handle = await client.call_tool("slow_compute", {"seconds": 1.5, "label": "twice"})
        task_id = handle.structured_content["taskId"]
        first = await follow(client, handle)
        second = await client.call_tool("check_task", {"task_id": task_id})
    assert text(first) == text(second) == "slow_compute twice finished after 1.5s"


async def test_answering_a_task_that_waits_for_no_answer_says_so(url: str, tmp_path: Path) -> None:
    async with connect("modern", url) as client:
        handle = await client.call_tool("gated_task", {"marker_dir": str(tmp_path)})
        task_id = handle.structured_content["taskId"]
        result = await client.call_tool("answer_task", {"task_id": task_id, "answer": True})
        missing = await client.call_tool("check_task", {})
        (tmp_path / "gate").write_text("open")
        await follow(client, handle)
    assert result.is_error is True
    assert "is not waiting for an answer now" in text(result)
    assert missing.is_error is True
    assert 'Pass "task_id"' in text(missing)


# -- who sees the companions ------------------------------------------------------------------


async def test_a_client_without_tasks_sees_companions_and_no_output_schemas(
    era: str, url: str
) -> None:
    async with connect(era, url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {"check_task", "answer_task", "cancel_task", "list_tasks"} <= set(tools)
    assert tools["refund"].output_schema is None  # it may answer with a handle
    assert tools["summarize"].output_schema is not None  # not a task tool: as it was
    assert "check_task" in (tools["slow_compute"].description or "")


async def test_clients_that_speak_tasks_see_no_change(url: str) -> None:
    """The modern tasks extension declared, or a 2025-11-25 session whose client declared
    the ``tasks`` capability: no companion tools, the output schemas as they are."""
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            url,
            json=modern_request("tools/list", capabilities={"extensions": {TASKS_EXTENSION: {}}}),
            headers=modern_headers("tools/list"),
        )
        modern = {tool["name"]: tool for tool in final_message(response)["result"]["tools"]}
        tasks: dict[str, Any] = {
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        }
        session_id = await legacy_initialize(http, url, capabilities=tasks)
        response = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers=legacy_headers(session_id),
        )
        legacy = {tool["name"]: tool for tool in final_message(response)["result"]["tools"]}
    for tools in (modern, legacy):
        assert not {"check_task", "answer_task", "cancel_task", "list_tasks"} & set(tools)
        assert "outputSchema" in tools["refund"]
    assert legacy["refund"]["execution"] == {"taskSupport": "required"}


@pytest.mark.cancel
async def test_a_first_call_cancelled_by_its_client_cancels_its_task(
    url: str, stack: TaskStack, tmp_path: Path
) -> None:
    """The client gave up before it learned the task's id: the task is cancelled with the
    call, as the tool's inline run would have been (modern era: a closed stream)."""
    arguments = {"marker_dir": str(tmp_path)}
    async with httpx.AsyncClient(timeout=30) as http:
        request = modern_request("tools/call", {"name": "patient_task", "arguments": arguments})
        headers = modern_headers("tools/call", "patient_task")
        async with http.stream("POST", url, json=request, headers=headers) as response:
            assert response.status_code == 200
            assert await asyncio.to_thread(wait_for_path, tmp_path / "started")
    assert await asyncio.to_thread(wait_for_path, tmp_path / "cancelled")  # the tool stopped
    rows = db_rows(
        stack.server.database_url,
        "SELECT status FROM mcp_tasks_task WHERE tool_name = %s",
        ("patient_task",),
    )
    assert rows == [("cancelled",)]


async def test_a_tool_with_no_window_answers_a_handle_at_once(url: str) -> None:
    async with connect("modern", url) as client:
        handle = await client.call_tool("eager_handle_task", {"n": 3})
        assert is_handle(handle)
        done = await follow(client, handle)
    assert done.structured_content == {"result": 3}

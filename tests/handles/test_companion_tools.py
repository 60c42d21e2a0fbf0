"""Clients without the tasks extension, in the protocol layer (no server, no worker): what
``tools/list`` shows them, the handle a task call answers with when its window is over, the
companion tools' checks of their input, the settings and check ``mcp_tasks.E020``.

Tasks are created through the real task service on the embedded queue; no worker runs them,
so every task here is still waiting (a window of 0 answers at once)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, cast

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured

from mcp_tasks import MCPServer, TaskConfig
from mcp_tasks.authoring.registry import mcp
from mcp_tasks.checks import check_mcp_tasks as run_checks
from mcp_tasks.checks.companions import check_companions
from mcp_tasks.core.task_contract import QuotaExceeded
from mcp_tasks.models import InputRequest
from mcp_tasks.protocol import request_state
from mcp_tasks.protocol.handle_shapes import expected_answer
from mcp_tasks.protocol.task_handles import TaskHandles
from mcp_tasks.protocol.task_methods import ToolCall
from mcp_tasks.tasks.state import service
from tests.support.protocol_fixtures import (
    FakeSink,
    call,
    error_code,
    legacy_info,
    make_server,
    modern_info,
    request,
    result_of,
    run,
    text,
)

COMPANIONS = {"check_task", "answer_task", "cancel_task", "list_tasks"}
TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
LEGACY_TASKS: dict[str, Any] = {
    "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
}


@pytest.fixture
def server() -> MCPServer:
    """A fresh registry of the protocol tests' tools (``protocol_fixtures.make_server``)."""
    return make_server()


@pytest.fixture
def no_wait(settings: Any, embedded_queue: Any) -> Iterator[None]:
    """Handles at once (nothing runs the tasks), on the embedded queue."""
    settings.MCP_TASKS = {"EMBEDDED_WORKER": True, "INLINE_WINDOW": 0, "CHECK_WAIT": 0}
    yield


async def listed(server: MCPServer, info: Any) -> dict[str, dict[str, Any]]:
    result = result_of(await run(server, request("tools/list"), info))
    return {tool["name"]: tool for tool in result["tools"]}


# -- tools/list --------------------------------------------------------------------------------


@pytest.mark.parametrize("info", [modern_info(), legacy_info()], ids=["modern", "legacy"])
async def test_a_client_without_tasks_sees_the_companions(server: MCPServer, info: Any) -> None:
    tools = await listed(server, info)
    assert COMPANIONS <= set(tools)
    note = tools["only_as_task"]["description"]
    assert "Runs in the background" in note and "`check_task`" in note
    if not info.modern:  # clients refuse to call a "required" tool plainly; here they may
        assert tools["only_as_task"]["execution"] == {"taskSupport": "optional"}
    assert tools["check_task"]["annotations"]["readOnlyHint"] is True
    assert tools["cancel_task"]["annotations"]["destructiveHint"] is True
    assert tools["answer_task"]["inputSchema"]["required"] == ["task_id"]


async def test_a_task_tool_lists_no_output_schema_to_them(server: MCPServer) -> None:
    @server.tool(task=True)
    def counted(n: int) -> int:
        return n

    plain, speaking = (
        await listed(server, modern_info()),
        await listed(server, modern_info(capabilities=TASKS)),
    )
    assert "outputSchema" not in plain["counted"]  # a handle would not fit it
    assert "outputSchema" in speaking["counted"]
    assert plain["make_point"]["outputSchema"] == speaking["make_point"]["outputSchema"]


@pytest.mark.parametrize(
    "info",
    [modern_info(capabilities=TASKS), legacy_info(capabilities=LEGACY_TASKS)],
    ids=["modern-extension", "legacy-tasks-capability"],
)
async def test_a_client_that_speaks_tasks_sees_no_change(server: MCPServer, info: Any) -> None:
    tools = await listed(server, info)
    assert not COMPANIONS & set(tools)
    assert "Runs in the background" not in tools["only_as_task"].get("description", "")


async def test_a_tool_that_opts_out_is_listed_and_refused_as_before(server: MCPServer) -> None:
    """``TaskConfig(for_all_clients=False)``: no handle for that tool, whatever the site says;
    the companions stay for the site's other task tools."""

    @server.tool(task=TaskConfig(mode="required", for_all_clients=False))
    async def strict() -> int:
        return 1

    tools = await listed(server, legacy_info())
    assert tools["strict"]["execution"] == {"taskSupport": "required"}
    assert "outputSchema" in tools["strict"]
    assert "Runs in the background" not in tools["strict"].get("description", "")
    assert COMPANIONS <= set(tools)  # only_as_task still has them
    assert error_code(await run(server, call("strict"), modern_info())) == -32021


async def test_no_companions_without_a_task_tool(server: MCPServer) -> None:
    del server.tools["only_as_task"]
    assert not COMPANIONS & set(await listed(server, modern_info()))


async def test_the_names_come_from_the_setting(server: MCPServer, settings: Any) -> None:
    settings.MCP_TASKS = {"COMPANION_TOOLS": {"check": "report_status"}}
    tools = await listed(server, modern_info())
    assert "report_status" in tools and "check_task" not in tools
    assert "`report_status`" in tools["only_as_task"]["description"]


async def test_opted_out_a_plain_client_sees_the_list_as_before(
    server: MCPServer, settings: Any
) -> None:
    settings.MCP_TASKS = {"TASKS_FOR_ALL_CLIENTS": False}
    assert not COMPANIONS & set(await listed(server, modern_info()))
    response = await run(server, call("check_task", {"task_id": "x"}), modern_info())
    assert error_code(response) == -32602  # an unknown tool, like any other


# -- the handle ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_the_handle_says_what_to_call_next(server: MCPServer, no_wait: None) -> None:
    result = result_of(await run(server, call("only_as_task"), modern_info()))
    structured = result["structuredContent"]
    task_id = structured["taskId"]
    assert "isError" not in result
    assert structured["status"] == "working"
    assert structured["next"] == {"tool": "check_task", "arguments": {"task_id": task_id}}
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert f'call `check_task` with {{"task_id": "{task_id}"}}' in text(result)
    assert "`cancel_task`" in text(result)
    checked = result_of(await run(server, call("check_task", {"task_id": task_id}), modern_info()))
    assert checked["structuredContent"]["taskId"] == task_id
    listed_tasks = result_of(await run(server, call("list_tasks"), modern_info()))
    assert [task["taskId"] for task in listed_tasks["structuredContent"]["tasks"]] == [task_id]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "arguments",
    [{}, {"task_id": 5}, {"task_id": None}],
    ids=["missing", "a number", "null"],
)
async def test_a_companion_without_a_task_id_says_what_to_pass(
    server: MCPServer, no_wait: None, arguments: dict[str, Any]
) -> None:
    for tool in ("check_task", "answer_task", "cancel_task"):
        result = result_of(await run(server, call(tool, arguments), modern_info()))
        assert result["isError"] is True
        assert text(result).startswith('Pass "task_id"')


@pytest.mark.django_db(transaction=True)
async def test_check_refuses_a_wait_that_is_not_a_number(server: MCPServer, no_wait: None) -> None:
    handle = result_of(await run(server, call("only_as_task"), modern_info()))
    task_id = handle["structuredContent"]["taskId"]
    result = result_of(
        await run(
            server, call("check_task", {"task_id": task_id, "wait_seconds": "soon"}), modern_info()
        )
    )
    assert result["isError"] is True
    assert "wait_seconds must be a number" in text(result)


@pytest.mark.django_db(transaction=True)
async def test_a_sealed_state_only_goes_on_with_the_call_it_was_made_for(
    server: MCPServer, no_wait: None
) -> None:
    handle = result_of(await run(server, call("only_as_task"), modern_info()))
    task_id = handle["structuredContent"]["taskId"]
    for_check = request_state.seal(
        {},
        principal="anonymous",
        method="tools/call",
        target="check_task",
        arguments={"task_id": task_id},
        task_id=task_id,
    )
    misused = call("only_as_task", requestState=for_check, inputResponses={})
    assert error_code(await run(server, misused, modern_info())) == -32602
    gone = request_state.seal(
        {},
        principal="anonymous",
        method="tools/call",
        target="only_as_task",
        arguments={},
        task_id="no-such-task",
    )
    response = await run(server, call("only_as_task", requestState=gone), modern_info())
    assert error_code(response) == -32602
    assert response["error"]["message"] == "Task not found"


# -- settings and checks ------------------------------------------------------------------------


def test_a_negative_window_is_refused_at_declaration() -> None:
    with pytest.raises(ImproperlyConfigured, match="inline_window"):
        TaskConfig(inline_window=-1)
    with pytest.raises(ImproperlyConfigured, match="inline_window"):
        TaskConfig(inline_window=True)
    assert TaskConfig(inline_window=0).inline_window == 0
    with pytest.raises(ImproperlyConfigured, match="for_all_clients"):
        TaskConfig(for_all_clients="no")  # type: ignore[arg-type]


def test_e020_passes_by_default() -> None:
    assert check_companions() == []


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        ({"check": "add"}, "is also the name of a registered tool"),
        ({"check": "check task"}, "is not a tool name"),
        ({"check": "x", "answer": "x"}, "two companion tools share a name"),
    ],
)
def test_e020_reports_a_bad_name(settings: Any, names: dict[str, str], problem: str) -> None:
    settings.MCP_TASKS = {"COMPANION_TOOLS": names}
    messages = check_companions()
    assert [message.id for message in messages] == ["mcp_tasks.E020"]
    assert problem in messages[0].msg
    assert "add" in mcp.tools


def test_an_unknown_companion_is_a_wrong_value(settings: Any) -> None:
    settings.MCP_TASKS = {"COMPANION_TOOLS": {"peek": "peek_task"}}
    messages = [message for message in run_checks() if str(message.id).startswith("mcp_tasks.")]
    assert [message.id for message in messages] == ["mcp_tasks.E015"]
    assert "COMPANION_TOOLS" in messages[0].msg


def test_e020_is_silent_when_tasks_are_not_for_all(settings: Any) -> None:
    settings.MCP_TASKS = {"TASKS_FOR_ALL_CLIENTS": False, "COMPANION_TOOLS": {"check": "add"}}
    assert check_companions() == []


# -- questions in words ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"properties": {"value": {"type": "boolean"}}}, "true or false"),
        (
            {"properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5}}},
            "an integer from 1 to 5 (its 'n' field)",
        ),
        ({"properties": {"value": {"type": "string", "enum": ["a", "b"]}}}, 'one of "a", "b"'),
        (
            {
                "properties": {"name": {"type": "string"}, "age": {"type": "number"}},
                "required": ["name"],
            },
            'an object with "name": a string, "age": a number (optional)',
        ),
        ({"properties": {}}, "{} (nothing to fill in: accepting is the answer)"),
    ],
)
def test_what_a_question_expects_in_words(schema: dict[str, Any], words: str) -> None:
    params = {"message": "?", "requestedSchema": {"type": "object", **schema}}
    assert expected_answer("elicitation/create", params) == words


@pytest.mark.django_db(transaction=True)
async def test_the_model_answers_a_sampling_question_with_its_text(
    server: MCPServer, no_wait: None
) -> None:
    """A worker's ``ctx.sample`` waits like a form: the text the model writes is the reply."""
    handle = result_of(await run(server, call("only_as_task"), modern_info()))
    task_id = handle["structuredContent"]["taskId"]
    sampling = {"messages": [{"role": "user", "content": {"type": "text", "text": "Haiku?"}}]}
    await sync_to_async(service.ask)(task_id, 1, "sampling/createMessage", sampling, "w", "s1")
    waiting = result_of(await run(server, call("check_task", {"task_id": task_id}), modern_info()))
    (question,) = waiting["structuredContent"]["questions"]
    assert question["expects"] == "the text of the reply the messages ask for"
    arguments = {"task_id": task_id, "answer": "Old pond, a frog jumps"}
    await run(server, call("answer_task", arguments), modern_info())
    stored = await sync_to_async(InputRequest.objects.get)(task_id=task_id, key="s1")
    assert (stored.response or {}).get("content") == {
        "type": "text",
        "text": "Old pond, a frog jumps",
    }
    assert stored.answered_by == "client"


@pytest.mark.django_db(transaction=True)
async def test_an_answer_with_a_nul_is_refused_and_nothing_is_stored(
    server: MCPServer, no_wait: None
) -> None:
    """``answer_task`` stores its answer: a NUL in it (PostgreSQL stores none) is the same
    ``-32602`` naming the field as in ``tasks/update``, and the question still waits."""
    handle = result_of(await run(server, call("only_as_task"), modern_info()))
    task_id = handle["structuredContent"]["taskId"]
    sampling = {"messages": [{"role": "user", "content": {"type": "text", "text": "Haiku?"}}]}
    await sync_to_async(service.ask)(task_id, 1, "sampling/createMessage", sampling, "w", "s1")
    arguments = {"task_id": task_id, "answer": "Old pond\x00"}
    response = await run(server, call("answer_task", arguments), modern_info())
    assert error_code(response) == -32602
    assert "params.arguments.answer" in response["error"]["message"]
    assert "NUL" in response["error"]["message"]
    stored = await sync_to_async(InputRequest.objects.get)(task_id=task_id, key="s1")
    assert stored.status == "pending"
    assert stored.response is None


# -- a cancel during the task's creation -------------------------------------------------------


@pytest.mark.cancel
async def test_a_call_cancelled_while_its_task_is_refused_stays_cancelled() -> None:
    # The creation runs on when the call is cancelled (a task made meanwhile is then
    # abandoned); if it fails instead, the cancel must still reach the caller.
    server = MCPServer()

    @server.tool(task=True)
    async def later() -> str:
        return "done"

    release = asyncio.Event()

    class RefusingTasks:
        engine: Any = None

        async def create(self, call: ToolCall, caller: Any) -> Any:
            await release.wait()
            raise QuotaExceeded("MAX_ACTIVE_TASKS", 1, "this caller")

    handles = TaskHandles(cast(Any, RefusingTasks()))
    params: dict[str, Any] = {"name": "later", "arguments": {}}
    tool_call = ToolCall(server.tools["later"], {}, modern_info(), FakeSink(), params)
    running = asyncio.ensure_future(handles.call(tool_call))
    await asyncio.sleep(0)  # the creation has started and waits
    running.cancel()
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await running

"""``mcp_tasks.testing.McpClient`` in-process: the example project's tools called through
its ASGI application (``httpx.ASGITransport``), plainly and as tasks on the embedded
worker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_tasks.testing import (
    InputRequiredError,
    McpClient,
    McpClientError,
    McpError,
    NotATaskError,
    Progress,
    Question,
    TaskRun,
    text_of,
)

tasks = pytest.mark.usefixtures("mcp_tasks_worker")
database = pytest.mark.django_db(transaction=True)


# -- plain calls ------------------------------------------------------------------------------


def test_plain_call_returns_the_call_tool_result(mcp_client: McpClient) -> None:
    result = mcp_client.call("add", {"a": 1, "b": 2})
    assert result["isError"] is False
    assert result["structuredContent"] == {"result": 3}
    assert text_of(result) == "3"


def test_list_tools_lists_the_projects_tools(mcp_client: McpClient) -> None:
    names = {tool["name"] for tool in mcp_client.list_tools()}
    assert {"add", "slow_count", "long_report", "greet_with_question"} <= names


def test_plain_call_reports_its_progress(mcp_client: McpClient) -> None:
    seen: list[Progress] = []
    result = mcp_client.call("slow_count", {"n": 3, "delay": 0}, on_progress=seen.append)
    assert text_of(result) == "counted to 3"
    assert seen == [Progress("working", f"step {i}", i, 3) for i in (1, 2, 3)]


def test_a_question_of_a_plain_call_goes_to_the_answer_callback(mcp_client: McpClient) -> None:
    asked: list[Question] = []

    def answer(question: Question) -> str:
        asked.append(question)
        return "Ada"

    result = mcp_client.call("greet_with_question", answer=answer)
    assert text_of(result) == "Hello, Ada!"
    assert [(q.method, q.message, list(q.fields)) for q in asked] == [
        ("elicitation/create", "What is your name?", ["value"])
    ]


def test_a_mapping_answers_a_question_by_its_message(mcp_client: McpClient) -> None:
    result = mcp_client.call("greet_with_question", answer={"What is your name?": "Grace"})
    assert text_of(result) == "Hello, Grace!"


def test_an_answer_with_an_action_is_sent_as_it_is(mcp_client: McpClient) -> None:
    result = mcp_client.call("greet_with_question", answer=lambda question: {"action": "decline"})
    assert text_of(result) == "Hello, whoever you are."


def test_a_question_without_an_answer_raises_input_required(mcp_client: McpClient) -> None:
    with pytest.raises(InputRequiredError) as raised:
        mcp_client.call("greet_with_question")
    assert [question.message for question in raised.value.questions] == ["What is your name?"]
    assert raised.value.task_id is None


def test_a_tool_error_is_a_result_not_an_exception(mcp_client: McpClient) -> None:
    result = mcp_client.call("test_error_handling")
    assert result["isError"] is True
    assert text_of(result) == "This tool intentionally returns an error for testing"


def test_an_unknown_tool_raises_the_json_rpc_error(mcp_client: McpClient) -> None:
    with pytest.raises(McpError) as raised:
        mcp_client.call("no_such_tool")
    assert (raised.value.code, raised.value.message) == (-32602, "Unknown tool: no_such_tool")
    assert raised.value.status == 400


@tasks
def test_a_task_only_tool_called_plainly_answers_in_its_window(mcp_client: McpClient) -> None:
    # A task all the same (its prepare asks first), which ends inside the window.
    result = mcp_client.call("test_tool_with_task", answer={"name": "Ada"})
    assert text_of(result) == "Hello from the background, Ada!"


def test_a_task_only_tool_called_plainly_raises_missing_capability_when_opted_out(
    mcp_client: McpClient, settings: Any
) -> None:
    settings.MCP_TASKS = {"TASKS_FOR_ALL_CLIENTS": False}
    with pytest.raises(McpError) as raised:
        mcp_client.call("test_tool_with_task", answer={"name": "Ada"})
    assert raised.value.code == -32021
    assert (
        "io.modelcontextprotocol/tasks" in raised.value.data["requiredCapabilities"]["extensions"]
    )


def test_a_wrong_host_is_refused_with_what_to_do() -> None:
    with McpClient.in_process(host="evil.example") as client, pytest.raises(McpError) as raised:
        client.call("add", {"a": 1, "b": 2})
    assert raised.value.status == 421
    assert "add it to ALLOWED_HOSTS" in raised.value.message


# -- tasks ------------------------------------------------------------------------------------


@tasks
@database
def test_task_reports_progress_and_its_question_goes_to_the_callback(mcp_client: McpClient) -> None:
    seen: list[Progress] = []
    asked: list[str] = []

    def answer(question: Question) -> bool:
        asked.append(question.message)
        return True

    run = mcp_client.start("long_report", {"quarter": "Q3", "steps": 20})
    assert run.status == "working"
    task = run.wait(answer=answer, on_progress=seen.append)
    assert task["status"] == "completed"
    assert run.text == "Report for Q3: 20 sections with drafts."
    assert run.structured == {"result": "Report for Q3: 20 sections with drafts."}
    assert asked == ["Include draft figures?"]
    messages = [progress.message or "" for progress in seen]
    assert any(message.startswith("section ") for message in messages), messages
    assert Progress("input_required", "Include draft figures?") in seen
    assert seen[-1].status == "completed"


@tasks
@database
def test_unanswered_task_question_raises_and_an_answer_resumes_it(mcp_client: McpClient) -> None:
    run = mcp_client.start("confirm_delete", {"filename": "a.txt"})
    with pytest.raises(InputRequiredError) as raised:
        run.wait()
    (question,) = raised.value.questions
    assert raised.value.task_id == run.task_id
    assert question.message == "Delete a.txt?" and question.required == ["confirm"]
    run.answer(question.key, {"confirm": True})
    assert run.wait()["status"] == "completed"
    assert run.text == "Deleted a.txt."


@tasks
@database
def test_form_fields_in_a_mapping_answer_each_question(mcp_client: McpClient) -> None:
    run = mcp_client.start("multi_input")
    run.wait(answer={"name": "Bob", "confirm": False})
    assert run.text == "multi_input: name=Bob, confirm=False"


@tasks
@database
def test_start_answers_the_questions_asked_before_the_task_exists(mcp_client: McpClient) -> None:
    run = mcp_client.start("test_tool_with_task", answer={"name": "Ada"})
    run.wait()
    assert run.text == "Hello from the background, Ada!"


@pytest.mark.cancel
@tasks
@database
def test_cancel_ends_the_task(mcp_client: McpClient) -> None:
    run = mcp_client.start("confirm_delete", {"filename": "a.txt"})
    with pytest.raises(InputRequiredError):
        run.wait()
    run.cancel()
    assert run.wait()["status"] == "cancelled"
    with pytest.raises(McpClientError, match="is cancelled, not completed"):
        run.result  # noqa: B018


@tasks
@database
def test_a_tool_error_in_a_task_is_a_completed_error_result(mcp_client: McpClient) -> None:
    run = mcp_client.start("failing_job")
    assert run.wait()["status"] == "completed"
    assert run.result["isError"] is True
    assert run.text == "failing_job failed on purpose"


@tasks
@database
def test_a_failed_task_raises_its_json_rpc_error(mcp_client: McpClient) -> None:
    run = mcp_client.start("protocol_error_job")
    assert run.wait()["status"] == "failed"
    with pytest.raises(McpError) as raised:
        run.result  # noqa: B018
    assert raised.value.code == -32603
    assert raised.value.message == "protocol_error_job: simulated internal failure"


@tasks
@database
def test_wait_gives_up_after_its_timeout(mcp_client: McpClient) -> None:
    run = mcp_client.start("failing_job")  # a second asleep
    with pytest.raises(TimeoutError, match="still working"):
        run.wait(timeout=0.2)


@tasks
@database
def test_start_of_a_tool_that_runs_inline_raises_not_a_task(mcp_client: McpClient) -> None:
    with pytest.raises(NotATaskError) as raised:
        mcp_client.start("greet", {"name": "Ada"})
    assert text_of(raised.value.result) == "Hello, Ada!"


@database
def test_an_unknown_task_is_not_found(mcp_client: McpClient) -> None:
    run = TaskRun(mcp_client, "long_report", {"taskId": "no-such-task", "status": "working"})
    with pytest.raises(McpError) as raised:
        run.get()
    assert (raised.value.code, raised.value.message) == (-32602, "Task not found")


# -- the example project's retries and concurrency limits -------------------------------------


@tasks
def test_a_transient_failure_runs_again_and_the_tool_sees_its_attempt(
    mcp_client: McpClient,
) -> None:
    run = mcp_client.start("fetch_exchange_rate", {"currency": "usd", "failures": 1})
    assert run.wait()["status"] == "completed"
    assert run.text == "1 EUR = 1.08 USD (attempt 2)"


@tasks
def test_every_attempt_failing_ends_the_task_with_the_last_error(mcp_client: McpClient) -> None:
    run = mcp_client.start("fetch_exchange_rate", {"currency": "usd", "failures": 5})
    assert run.wait()["status"] == "completed"
    assert run.result["isError"] is True
    assert run.text == "the rate service did not answer (attempt 3)"


@tasks
def test_a_limited_tool_runs_to_its_result(mcp_client: McpClient) -> None:
    runs = [mcp_client.start("render_thumbnails", {"album": "trip", "count": 1}) for _ in range(3)]
    assert [run.wait()["status"] for run in runs] == ["completed"] * 3
    assert {run.text for run in runs} == {"Rendered 1 thumbnails of trip."}


# -- async ------------------------------------------------------------------------------------


@tasks
@database
async def test_the_async_twins_call_and_run_a_task() -> None:
    async def answer(question: Question) -> bool:
        return False

    async with McpClient.in_process() as client:
        assert (await client.acall("add", {"a": 2, "b": 3}))["structuredContent"] == {"result": 5}
        run = await client.astart("long_report", {"quarter": "Q4", "steps": 1})
        task = await run.await_done(answer=answer)
    assert task["status"] == "completed"
    assert run.text == "Report for Q4: 1 sections."


async def test_the_sync_api_refuses_to_block_an_event_loop(mcp_client: McpClient) -> None:
    with pytest.raises(McpClientError, match="await acall"):
        mcp_client.call("add", {"a": 1, "b": 2})


def test_without_httpx_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(ImportError, match=r"django-mcp-tasks\[testing\]"):
        McpClient("http://127.0.0.1:9/mcp").call("add")


# -- a server that breaks the protocol --------------------------------------------------------


async def asks_for_nothing(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An MCP endpoint that answers every request ``input_required`` with no questions."""
    message = await receive()
    request = json.loads(message.get("body") or b"{}")
    result = {"resultType": "input_required", "inputRequests": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": result}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
    await send({"type": "http.response.body", "body": body})


JSON_HEADERS = [(b"content-type", b"application/json")]


def test_input_required_without_questions_is_a_clear_client_error() -> None:
    calls: list[Question] = []
    with McpClient.in_process(asks_for_nothing) as client:
        with pytest.raises(McpClientError, match="input_required without inputRequests"):
            client.call("add", {"a": 1, "b": 2}, answer=calls.append)
    assert calls == []

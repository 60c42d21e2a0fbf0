"""Traces end to end: a live server and a real ``manage.py rqworker``, both with
``MCP_TASKS["TRACING"]`` on and the SDK writing each finished span to one file
(``tests.support.trace_export``). One ``tools/call`` of a task tool that asks a question,
answered after its worker let the task go (a short hold window), makes one trace: the
request's span (a child of the client's ``params._meta`` ``traceparent``), the task's
creation, both jobs in the worker (children of the request, across the process boundary),
the tool's runs, the question and the wait for its answer. Also: a legacy session's task
(``mcp.session.id``), and the HTTP ``traceparent`` header as parent when ``_meta`` has none."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live import (
    LEGACY,
    final_message,
    legacy_headers,
    legacy_initialize,
    modern_headers,
    modern_request,
)
from tests.support.task_driver import TaskDriver, task_capabilities
from tests.support.trace_export import read_spans
from tests.support.worker_fixtures import WAIT, RedisProcess, TaskStack, module_task_stack

pytestmark = [pytest.mark.live, pytest.mark.redis]

Span = dict[str, Any]


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces") / "spans.jsonl"


@pytest.fixture(scope="module")
def module_stack(
    request: pytest.FixtureRequest, stack_redis: RedisProcess, trace_file: Path
) -> Iterator[TaskStack]:
    env = {"MCP_TASKS_TEST_TRACE_FILE": str(trace_file), "MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "0.3"}
    yield from module_task_stack(request, stack_redis, env, label="tracing")


@pytest.fixture
def stack(request: pytest.FixtureRequest, module_stack: TaskStack) -> TaskStack:
    module_stack.attach(request)
    return module_stack


@pytest.fixture
async def client(stack: TaskStack) -> AsyncIterator[TaskDriver]:
    async with httpx.AsyncClient(timeout=60) as http:
        yield TaskDriver(http, stack.url, capabilities=task_capabilities("elicitation"))


def spans_until(path: Path, ready: Callable[[list[Span]], bool]) -> list[Span]:
    """The spans written to ``path`` once ``ready(spans)`` holds (they are written as they end)."""
    deadline = time.monotonic() + WAIT
    spans = read_spans(path)
    while not ready(spans):
        assert time.monotonic() < deadline, spans
        time.sleep(0.02)
        spans = read_spans(path)
    return spans


def of_task(spans: list[Span], task_id: str, prefix: str) -> list[Span]:
    return [
        span
        for span in spans
        if span["name"].startswith(prefix)
        and span["attributes"].get("mcp_tasks.task.id") == task_id
    ]


def traceparent() -> tuple[str, str, str]:
    """A client's ``traceparent``, its trace id and its span id."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


async def post(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], name: str | None = None, **headers: str
) -> dict[str, Any]:
    response = await http.post(
        url, json=body, headers={**modern_headers(body["method"], name), **headers}
    )
    return final_message(response)


async def test_one_trace_runs_from_tools_call_through_the_worker_to_the_tools_end(
    stack: TaskStack, client: TaskDriver, trace_file: Path
) -> None:
    parent, client_trace, client_span = traceparent()
    body = modern_request(
        "tools/call",
        {"name": "bench_ask", "arguments": {}},
        request_id="call-1",
        capabilities=task_capabilities("elicitation"),
    )
    body["params"]["_meta"]["traceparent"] = parent
    message = await post(client.http, stack.url, body, "bench_ask")
    task_id = message["result"]["taskId"]
    task = await client.wait_for_input(task_id)
    (key,) = task["inputRequests"]
    # The worker lets the task go once the hold window has passed: its first job ends.
    spans_until(trace_file, lambda spans: bool(of_task(spans, task_id, "task job")))
    await client.update(task_id, {key: {"action": "accept", "content": {"value": "Ada"}}})
    done = await client.wait_for(task_id, lambda task: task["status"] == "completed")
    assert done["result"]["structuredContent"] == {"result": "Ada"}
    spans = spans_until(trace_file, lambda spans: len(of_task(spans, task_id, "task job")) == 2)

    (request,) = [
        span
        for span in spans
        if span["name"] == "tools/call bench_ask"
        and span["attributes"].get("jsonrpc.request.id") == "call-1"
    ]
    assert (request["trace_id"], request["parent_id"]) == (client_trace, client_span)
    assert request["kind"] == "SERVER"
    assert request["attributes"] == {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": request["attributes"]["mcp.protocol.version"],
        "jsonrpc.request.id": "call-1",
        "gen_ai.tool.name": "bench_ask",
        "gen_ai.operation.name": "execute_tool",
        "network.protocol.name": "http",
        "mcp_tasks.era": "modern",
    }
    (creation,) = of_task(spans, task_id, "create task bench_ask")
    assert creation["parent_id"] == request["span_id"]
    assert creation["pid"] == request["pid"]

    first, second = sorted(
        of_task(spans, task_id, "task job"), key=lambda s: s["attributes"]["mcp_tasks.task.run"]
    )
    for job in (first, second):
        assert job["trace_id"] == client_trace
        assert job["parent_id"] == request["span_id"]  # across the process boundary
        assert job["pid"] == stack.worker.pid != request["pid"]
        assert job["attributes"]["gen_ai.tool.name"] == "bench_ask"
    assert (
        first["attributes"]["mcp_tasks.task.resumed"],
        second["attributes"]["mcp_tasks.task.resumed"],
    ) == (False, True)

    tools = of_task(spans, task_id, "execute_tool bench_ask")
    by_job = {tool["parent_id"]: tool for tool in tools}
    assert set(by_job) == {first["span_id"], second["span_id"]}
    assert by_job[first["span_id"]]["attributes"]["mcp_tasks.interrupted"] == "TaskSuspended"
    assert "mcp_tasks.interrupted" not in by_job[second["span_id"]]["attributes"]
    assert by_job[second["span_id"]]["status"] != "ERROR"

    questions = of_task(spans, task_id, "task question")
    first_tool, second_tool = by_job[first["span_id"]], by_job[second["span_id"]]
    assert {question["parent_id"] for question in questions} == {
        first_tool["span_id"],
        second_tool["span_id"],  # replayed: the answer is already there, no wait
    }
    asked = next(q for q in questions if q["parent_id"] == first_tool["span_id"])
    assert asked["attributes"]["mcp_tasks.question.methods"] == "elicitation/create"
    (wait,) = of_task(spans, task_id, "task wait for answers")
    assert wait["parent_id"] == asked["span_id"]
    assert wait["attributes"]["mcp_tasks.interrupted"] == "TaskSuspended"
    assert all(span["trace_id"] == client_trace for span in [creation, *tools, *questions, wait])


async def test_without_meta_the_http_traceparent_is_the_parent_and_errors_mark_the_span(
    stack: TaskStack, client: TaskDriver, trace_file: Path
) -> None:
    parent, trace_id, span_id = traceparent()
    body = modern_request("no/such-method", {}, request_id="missing-1")
    message = await post(client.http, stack.url, body, traceparent=parent)
    assert message["error"]["code"] == -32601
    spans = spans_until(
        trace_file,
        lambda spans: any(s["attributes"].get("jsonrpc.request.id") == "missing-1" for s in spans),
    )
    (span,) = [s for s in spans if s["attributes"].get("jsonrpc.request.id") == "missing-1"]
    assert (span["trace_id"], span["parent_id"]) == (trace_id, span_id)
    assert span["name"] == "no/such-method"
    assert span["status"] == "ERROR"
    assert (
        span["attributes"]["error.type"]
        == span["attributes"]["rpc.response.status_code"]
        == "-32601"
    )


async def test_a_legacy_sessions_task_joins_the_clients_trace_too(
    stack: TaskStack, client: TaskDriver, trace_file: Path
) -> None:
    http = client.http
    session_id = await legacy_initialize(http, stack.url)
    parent, trace_id, span_id = traceparent()
    body = {
        "jsonrpc": "2.0",
        "id": "legacy-1",
        "method": "tools/call",
        "params": {
            "name": "trivial_task",
            "arguments": {"n": 3},
            "task": {},
            "_meta": {"traceparent": parent},
        },
    }
    response = await http.post(stack.url, json=body, headers=legacy_headers(session_id))
    task_id = final_message(response)["result"]["task"]["taskId"]
    # The job span ends (and is written) last, after the tool's.
    spans = spans_until(trace_file, lambda spans: bool(of_task(spans, task_id, "task job")))

    (request,) = [s for s in spans if s["attributes"].get("jsonrpc.request.id") == "legacy-1"]
    assert (request["trace_id"], request["parent_id"]) == (trace_id, span_id)
    assert request["name"] == "tools/call trivial_task"
    assert request["attributes"]["mcp_tasks.era"] == "legacy"
    assert request["attributes"]["mcp.session.id"] == session_id
    assert request["attributes"]["mcp.protocol.version"] == LEGACY
    (job,) = of_task(spans, task_id, "task job")
    assert (job["trace_id"], job["parent_id"]) == (trace_id, request["span_id"])
    (tool,) = of_task(spans, task_id, "execute_tool")
    assert tool["parent_id"] == job["span_id"]

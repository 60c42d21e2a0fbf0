"""The experimental tasks of 2025-11-25 (SEP-1686) on the wire, checked exactly with raw httpx.

Sessions at 2025-11-25 against the example project with the test tools of
``tests.live_tools.legacy_task_tools`` (embedded mode: in-process queue and worker), and one
two-process flow on Redis with a real ``manage.py rqworker``: the task's status pushed from
the worker reaches a GET stream served by the other process, and the client's reply to a
question relayed by ``tasks/result`` is POSTed to the other process.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer
from tests.live_tools.legacy_task_tools import PROTOCOL_ERROR_CODE
from tests.support.live import (
    LEGACY,
    final_message,
    legacy_headers,
    sse_messages,
)

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]

RELATED_TASK = "io.modelcontextprotocol/related-task"
TERMINAL = {"completed", "failed", "cancelled"}
STATUSES = {"working", "input_required", *TERMINAL}
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
#: Longest a test waits for something the server does (a safety net, never a measurement).
WAIT = 60.0
CLIENT_CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}}


# -- raw 2025-11-25 sessions ---------------------------------------------------------------------


class Stream:
    """A session's GET stream read in the background: every message it delivered."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.opened = asyncio.Event()
        self.status: int | None = None
        self.task: asyncio.Task[None] | None = None

    async def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], Any], timeout: float = WAIT
    ) -> Any:
        """Until ``predicate(messages)`` is truthy; returns its value (fails the test on timeout)."""

        async def run() -> Any:
            while True:
                self.changed.clear()
                value = predicate(self.messages)
                if value:
                    return value
                if self.task is not None and self.task.done():
                    raise AssertionError(f"the GET stream ended; it delivered {self.messages}")
                await self.changed.wait()

        try:
            return await asyncio.wait_for(run(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"the GET stream did not deliver it within {timeout:g}s; got {self.messages}"
            ) from None

    def of(self, method: str, task_id: str | None = None) -> list[dict[str, Any]]:
        found = [m for m in self.messages if m.get("method") == method]
        if task_id is not None:
            found = [
                m
                for m in found
                if (m.get("params") or {}).get("taskId") == task_id
                or ((m.get("params") or {}).get("_meta") or {}).get(RELATED_TASK, {}).get("taskId")
                == task_id
            ]
        return found

    def statuses(self, task_id: str) -> list[str]:
        return [m["params"]["status"] for m in self.of("notifications/tasks/status", task_id)]


class Session:
    """One 2025-11-25 session over raw HTTP (optionally with a bearer token)."""

    def __init__(self, http: httpx.AsyncClient, url: str, *, token: str | None = None) -> None:
        self.http = http
        self.url = url
        self.token = token
        self.session_id: str | None = None
        self.ids = itertools.count(1)
        self.streams: list[Stream] = []

    def headers(self, **extra: str) -> dict[str, str]:
        headers = legacy_headers(self.session_id, **extra)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    async def open(
        self, *, capabilities: dict[str, Any] | None = None, version: str = LEGACY
    ) -> dict[str, Any]:
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": CLIENT_CAPS if capabilities is None else capabilities,
                "clientInfo": {"name": "raw-legacy-tasks", "version": "0"},
            },
        }
        response = await self.http.post(self.url, json=body, headers=self.headers())
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        done = await self.http.post(
            self.url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=self.headers(),
        )
        assert done.status_code == 202, done.text
        result: dict[str, Any] = final_message(response)["result"]
        return result

    async def send(
        self, method: str, params: dict[str, Any] | None = None, *, url: str | None = None
    ) -> dict[str, Any]:
        """The JSON-RPC response (the last message) to one request."""
        request_id = next(self.ids)
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        response = await self.http.post(url or self.url, json=body, headers=self.headers())
        assert response.status_code == 200, response.text
        message = final_message(response)
        assert message.get("id") == request_id, message
        return message

    async def result(
        self, method: str, params: dict[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        message = await self.send(method, params, **kwargs)
        assert "result" in message, f"{method} failed: {message}"
        result: dict[str, Any] = message["result"]
        return result

    async def error(
        self, method: str, params: dict[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        message = await self.send(method, params, **kwargs)
        assert "error" in message, f"{method} did not fail: {message}"
        error: dict[str, Any] = message["error"]
        return error

    async def start(
        self,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        ttl: int | None = 60000,
        meta: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``tools/call`` with ``params.task``: the created task (``result.task``)."""
        params: dict[str, Any] = {
            "name": tool,
            "arguments": arguments or {},
            "task": {} if ttl is None else {"ttl": ttl},
        }
        if meta:
            params["_meta"] = meta
        result = await self.result("tools/call", params)
        assert set(result) == {"task"}, result
        task: dict[str, Any] = result["task"]
        return task

    async def wait_terminal(self, task_id: str) -> dict[str, Any]:
        """``tasks/get`` until the task is terminal (pacing by its ``pollInterval``)."""

        async def run() -> dict[str, Any]:
            while True:
                task = await self.result("tasks/get", {"taskId": task_id})
                if task["status"] in TERMINAL:
                    return task
                await asyncio.sleep(task.get("pollInterval", 500) / 1000)

        return await asyncio.wait_for(run(), WAIT)

    async def wait_status(self, task_id: str, status: str) -> dict[str, Any]:
        async def run() -> dict[str, Any]:
            while True:
                task = await self.result("tasks/get", {"taskId": task_id})
                if task["status"] == status:
                    return task
                assert task["status"] not in TERMINAL, task
                await asyncio.sleep(task.get("pollInterval", 500) / 1000)

        return await asyncio.wait_for(run(), WAIT)

    async def listen(self, *, url: str | None = None) -> Stream:
        """Open the session's GET stream; returns once the server has opened it."""
        stream = Stream()

        async def read() -> None:
            headers = self.headers()
            headers["Accept"] = "text/event-stream"
            async with self.http.stream("GET", url or self.url, headers=headers) as response:
                stream.status = response.status_code
                stream.opened.set()
                if response.status_code != 200:
                    await response.aread()
                    return
                async for message in sse_messages(response):
                    stream.messages.append(message)
                    stream.changed.set()

        stream.task = asyncio.ensure_future(read())
        await asyncio.wait_for(stream.opened.wait(), WAIT)
        assert stream.status == 200, f"GET stream answered {stream.status}"
        self.streams.append(stream)
        return stream

    async def close(self) -> None:
        for stream in self.streams:
            if stream.task is not None:
                stream.task.cancel()
                with contextlib.suppress(BaseException):
                    await stream.task


def iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def check_task_shape(task: dict[str, Any]) -> None:
    """A 2025-11-25 ``Task``: the fields, their types, no modern-era names."""
    assert isinstance(task["taskId"], str) and task["taskId"]
    assert task["status"] in STATUSES
    assert iso(task["createdAt"]) <= iso(task["lastUpdatedAt"])
    assert task["ttl"] is None or isinstance(task["ttl"], int)
    assert isinstance(task.get("pollInterval", 0), int)
    assert not {"ttlMs", "pollIntervalMs", "resultType", "inputRequests", "result", "error"} & set(
        task
    ), task
    assert "_meta" not in task or RELATED_TASK not in task["_meta"], task


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        yield client


@pytest.fixture
async def sessions(
    http: httpx.AsyncClient, server: LiveServer
) -> AsyncIterator[Callable[..., Any]]:
    """``await sessions(token=None, capabilities=None)``: an opened 2025-11-25 session."""
    made: list[Session] = []

    async def make(
        *,
        token: str | None = None,
        capabilities: dict[str, Any] | None = None,
        version: str = LEGACY,
        url: str | None = None,
    ) -> Session:
        session = Session(http, url or server.mcp_url, token=token)
        await session.open(capabilities=capabilities, version=version)
        made.append(session)
        return session

    yield make
    for session in made:
        await session.close()


def unique_token() -> str:
    """A token of a principal no other test uses (the scope tasks/list is filtered by)."""
    return f"valid-{uuid.uuid4().hex[:12]}"


# -- capabilities and tool listing -----------------------------------------------------------------


async def test_initialize_advertises_the_tasks_capability(sessions: Any) -> None:
    session = await sessions()
    result = await session.open()
    assert result["protocolVersion"] == LEGACY
    assert result["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }


async def test_older_revisions_have_no_tasks(sessions: Any) -> None:
    session = await sessions(version="2025-06-18")
    result = await session.open(version="2025-06-18")
    assert result["protocolVersion"] == "2025-06-18"
    assert "tasks" not in result["capabilities"]
    tools = (await session.result("tools/list"))["tools"]
    assert all("execution" not in tool for tool in tools)
    error = await session.error("tasks/get", {"taskId": "anything"})
    assert error["code"] == -32601
    # params.task is ignored there: the call runs inline.
    result = await session.result(
        "tools/call", {"name": "lt_quick", "arguments": {"value": "old"}, "task": {"ttl": 1000}}
    )
    assert result["content"][0]["text"] == "quick old"
    assert "task" not in result


#: A client that declares the ``tasks`` capability: it speaks tasks, so it sees no change
#: for clients without them ("Clients without tasks" in the README).
TASKS_CAPS: dict[str, Any] = {**CLIENT_CAPS, "tasks": {"list": {}, "cancel": {}}}


async def test_tools_list_shows_task_support_from_each_task_config(sessions: Any) -> None:
    session = await sessions(capabilities=TASKS_CAPS)
    tools = {tool["name"]: tool for tool in (await session.result("tools/list"))["tools"]}
    expected = {
        "lt_required": "required",
        "lt_forbidden": "forbidden",
        "lt_optional": "optional",
        "lt_quick": "optional",  # task=True
        "long_report": "optional",  # the example project's task tool
        "summarize": "forbidden",  # a plain tool
    }
    for name, support in expected.items():
        assert tools[name]["execution"] == {"taskSupport": support}, name
    assert "check_task" not in tools


async def test_a_client_without_the_tasks_capability_may_call_every_task_tool(
    sessions: Any,
) -> None:
    """Clients refuse to call a ``required`` tool without ``params.task``; this server runs
    such a call as a task all the same, so it says ``optional``."""
    session = await sessions()
    tools = {tool["name"]: tool for tool in (await session.result("tools/list"))["tools"]}
    assert tools["lt_required"]["execution"] == {"taskSupport": "optional"}
    assert tools["lt_forbidden"]["execution"] == {"taskSupport": "forbidden"}
    assert "check_task" in tools
    result = await session.result("tools/call", {"name": "lt_required", "arguments": {}})
    assert result["content"][0]["text"] == "required x"  # the task ended inside the window


# -- creating tasks --------------------------------------------------------------------------------


async def test_tools_call_with_params_task_returns_the_created_task(sessions: Any) -> None:
    session = await sessions()
    task = await session.start("lt_quick", {"value": "wire"}, ttl=45000)
    check_task_shape(task)
    assert task["status"] == "working"
    assert task["ttl"] == 45000
    assert task["pollInterval"] == 500  # the server's TASK_POLL_INTERVAL
    got = await session.result("tasks/get", {"taskId": task["taskId"]})
    check_task_shape(got)
    assert got["taskId"] == task["taskId"] and got["createdAt"] == task["createdAt"]


async def test_requested_ttl_is_capped_by_the_tool_and_poll_interval_comes_from_it(
    sessions: Any,
) -> None:
    session = await sessions()
    longer = await session.start("lt_optional", {}, ttl=10_000_000)
    assert longer["ttl"] == 600_000  # TaskConfig(ttl=600): never longer
    assert longer["pollInterval"] == 250  # TaskConfig(poll_interval=0.25)
    shorter = await session.start("lt_optional", {}, ttl=30_000)
    assert shorter["ttl"] == 30_000
    unasked = await session.start("lt_optional", {}, ttl=None)
    assert unasked["ttl"] == 600_000
    boolean = await session.start("lt_optional", {}, ttl=True)  # not 1 ms
    assert boolean["ttl"] == 600_000


async def test_required_tool_without_params_task_is_method_not_found(sessions: Any) -> None:
    session = await sessions(capabilities=TASKS_CAPS)
    error = await session.error("tools/call", {"name": "lt_required", "arguments": {}})
    assert error["code"] == -32601
    assert "lt_required" in error["message"]


async def test_forbidden_tool_with_params_task_is_method_not_found(sessions: Any) -> None:
    session = await sessions()
    error = await session.error(
        "tools/call", {"name": "lt_forbidden", "arguments": {}, "task": {"ttl": 60000}}
    )
    assert error["code"] == -32601
    # A plain tool (no TaskConfig) is forbidden too.
    error = await session.error(
        "tools/call", {"name": "summarize", "arguments": {"values": [1]}, "task": {}}
    )
    assert error["code"] == -32601


async def test_optional_tool_without_params_task_runs_inline(sessions: Any) -> None:
    session = await sessions()
    result = await session.result(
        "tools/call", {"name": "lt_optional", "arguments": {"value": "now"}}
    )
    assert result["content"][0]["text"] == "optional now"
    assert "task" not in result


# -- results -----------------------------------------------------------------------------------------


async def test_tasks_result_is_the_call_result_with_related_task_meta(sessions: Any) -> None:
    session = await sessions()
    task = await session.start("lt_quick", {"value": "r"})
    result = await session.result("tasks/result", {"taskId": task["taskId"]})
    assert result["content"] == [{"type": "text", "text": "quick r"}]
    assert result["isError"] is False
    assert result["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
    # tasks/get, tasks/list and tasks/cancel results carry no related-task _meta (the id is there).
    got = await session.result("tasks/get", {"taskId": task["taskId"]})
    assert got["status"] == "completed"
    assert RELATED_TASK not in (got.get("_meta") or {})
    listed = await session.result("tasks/list")
    assert RELATED_TASK not in (listed.get("_meta") or {})


async def test_a_tool_error_fails_the_task_and_tasks_result_returns_the_error_result(
    sessions: Any,
) -> None:
    session = await sessions()
    task = await session.start("lt_tool_error", {"reason": "no such file"})
    final = await session.wait_terminal(task["taskId"])
    assert final["status"] == "failed"  # 2025-11-25: isError counts as failed
    assert final.get("statusMessage")
    result = await session.result("tasks/result", {"taskId": task["taskId"]})
    assert result["isError"] is True
    assert result["content"][0]["text"] == "lt_tool_error: no such file"
    assert result["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
    listed = {entry["taskId"]: entry for entry in (await session.result("tasks/list"))["tasks"]}
    assert listed[task["taskId"]]["status"] == "failed"


async def test_a_protocol_error_fails_the_task_and_tasks_result_returns_that_error(
    sessions: Any,
) -> None:
    session = await sessions()
    task = await session.start("lt_protocol_error")
    final = await session.wait_terminal(task["taskId"])
    assert final["status"] == "failed"
    error = await session.error("tasks/result", {"taskId": task["taskId"]})
    assert error == {
        "code": PROTOCOL_ERROR_CODE,
        "message": "lt_protocol_error: simulated",
        "data": {"why": "on purpose"},
    }


async def test_tasks_result_blocks_until_the_task_ends(sessions: Any, tmp_path: Path) -> None:
    session = await sessions()
    task = await session.start("lt_wait", {"marker_dir": str(tmp_path)})
    pending = asyncio.ensure_future(session.result("tasks/result", {"taskId": task["taskId"]}))
    assert await asyncio.wait_for(_until(lambda: (tmp_path / "started").exists()), WAIT)
    assert not pending.done()
    (tmp_path / "go").write_text("go")
    result = await asyncio.wait_for(pending, WAIT)
    assert result["content"][0]["text"] == "released"


async def _until(predicate: Callable[[], bool]) -> bool:
    while not predicate():
        await asyncio.sleep(0.05)
    return True


# -- errors of the task methods ----------------------------------------------------------------------


@pytest.mark.cancel
async def test_unknown_tasks_and_forged_cursors_are_invalid_params(sessions: Any) -> None:
    session = await sessions()
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        error = await session.error(method, {"taskId": "no-such-task"})
        assert error["code"] == -32602, method
    error = await session.error("tasks/list", {"cursor": "forged"})
    assert error["code"] == -32602


@pytest.mark.cancel
async def test_cancelling_a_terminal_task_is_invalid_params(sessions: Any, tmp_path: Path) -> None:
    session = await sessions()
    waiting = await session.start("lt_wait", {"marker_dir": str(tmp_path)})
    assert await asyncio.wait_for(_until(lambda: (tmp_path / "started").exists()), WAIT)
    cancelled = await session.result("tasks/cancel", {"taskId": waiting["taskId"]})
    check_task_shape(cancelled)
    assert cancelled["status"] == "cancelled"
    assert await asyncio.wait_for(_until(lambda: (tmp_path / "cancelled").exists()), WAIT)
    again = await session.error("tasks/cancel", {"taskId": waiting["taskId"]})
    assert again["code"] == -32602
    assert "cancelled" in again["message"]
    done = await session.start("lt_quick", {"value": "done"})
    await session.wait_terminal(done["taskId"])
    error = await session.error("tasks/cancel", {"taskId": done["taskId"]})
    assert error["code"] == -32602
    assert "completed" in error["message"]


# -- the session's GET stream ----------------------------------------------------------------------


async def test_status_notifications_reach_the_get_stream(sessions: Any) -> None:
    session = await sessions()
    stream = await session.listen()
    # The pushed state is read when the change is announced: a tool that ends at once may be
    # ``completed`` by then. The pause keeps it ``working`` long enough to be seen.
    task = await session.start("lt_progress", {"steps": 2, "pause": 0.5})
    await stream.wait_for(lambda _: "completed" in stream.statuses(task["taskId"]))
    notifications = stream.of("notifications/tasks/status", task["taskId"])
    for notification in notifications:
        check_task_shape(notification["params"])
        # "SHOULD NOT include the related-task metadata": the id is in the params.
        assert RELATED_TASK not in (notification["params"].get("_meta") or {})
        assert RELATED_TASK not in (notification.get("_meta") or {})
    statuses = stream.statuses(task["taskId"])
    assert statuses[-1] == "completed"
    assert "working" in statuses
    assert statuses.index("working") < statuses.index("completed")
    final = await session.result("tasks/get", {"taskId": task["taskId"]})
    assert notifications[-1]["params"] == final


async def test_input_required_is_announced_on_the_get_stream(sessions: Any) -> None:
    """Every status change is pushed, ``input_required`` included (a client that only
    listens learns it must call ``tasks/result``)."""
    session = await sessions()
    stream = await session.listen()
    task = await session.start("lt_elicit", {"kind": "bool"})
    await session.wait_status(task["taskId"], "input_required")
    await stream.wait_for(lambda _: "input_required" in stream.statuses(task["taskId"]), timeout=15)
    announced = [
        n
        for n in stream.of("notifications/tasks/status", task["taskId"])
        if n["params"]["status"] == "input_required"
    ]
    assert announced[-1]["params"]["statusMessage"] == "Task asks for a bool"
    await session.result("tasks/cancel", {"taskId": task["taskId"]})


async def test_progress_reaches_the_creating_requests_token_on_the_get_stream(
    sessions: Any,
) -> None:
    session = await sessions()
    stream = await session.listen()
    task = await session.start("lt_progress", {"steps": 3}, meta={"progressToken": "tok-7"})
    await stream.wait_for(lambda _: len(stream.of("notifications/progress")) >= 3)
    progress = stream.of("notifications/progress")
    assert [p["params"]["progress"] for p in progress] == [1, 2, 3]
    for number, notification in enumerate(progress, start=1):
        params = notification["params"]
        assert params["progressToken"] == "tok-7"
        assert params["total"] == 3
        assert params["message"] == f"step {number} of 3"
        assert params["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}


async def test_a_task_without_progress_token_sends_no_progress(sessions: Any) -> None:
    session = await sessions()
    stream = await session.listen()
    task = await session.start("lt_progress", {"steps": 2})
    await stream.wait_for(lambda _: "completed" in stream.statuses(task["taskId"]))
    assert stream.of("notifications/progress") == []


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("warning", ["warning", "error", "critical", "alert", "emergency"]),
        ("error", ["error", "critical", "alert", "emergency"]),
        ("debug", LEVELS),
        ("emergency", ["emergency"]),
    ],
)
async def test_worker_logs_reach_the_session_at_or_above_its_level(
    sessions: Any, level: str, expected: list[str]
) -> None:
    session = await sessions()
    await session.result("logging/setLevel", {"level": level})
    stream = await session.listen()
    task = await session.start("lt_log_every_level")
    await stream.wait_for(lambda _: "completed" in stream.statuses(task["taskId"]))
    # The logs are sent before the completion is published, through the same channel.
    await stream.wait_for(
        lambda _: any(
            m["params"]["level"] == "emergency" for m in stream.of("notifications/message")
        )
    )
    logs = stream.of("notifications/message")
    assert [m["params"]["level"] for m in logs] == expected
    assert all(m["params"]["logger"] == "lt" for m in logs)
    assert [m["params"]["data"] for m in logs] == [f"task {name} message" for name in expected]


async def test_the_log_level_is_read_when_the_worker_logs(sessions: Any) -> None:
    """``logging/setLevel`` after the task was created still applies to its later logs."""
    session = await sessions()
    await session.result("logging/setLevel", {"level": "debug"})
    stream = await session.listen()
    await session.result("logging/setLevel", {"level": "critical"})
    task = await session.start("lt_log_every_level")
    await stream.wait_for(lambda _: "completed" in stream.statuses(task["taskId"]))
    await stream.wait_for(
        lambda _: any(
            m["params"]["level"] == "emergency" for m in stream.of("notifications/message")
        )
    )
    assert [m["params"]["level"] for m in stream.of("notifications/message")] == [
        "critical",
        "alert",
        "emergency",
    ]


async def test_task_log_notifications_carry_related_task_meta(sessions: Any) -> None:
    """ "All requests, notifications, and responses related to a task MUST include the
    io.modelcontextprotocol/related-task key in their _meta" (progress does; logs too)."""
    session = await sessions()
    stream = await session.listen()
    task = await session.start("lt_log_every_level")
    await stream.wait_for(
        lambda _: any(
            m["params"]["level"] == "emergency" for m in stream.of("notifications/message")
        )
    )
    for message in stream.of("notifications/message"):
        assert (message["params"].get("_meta") or {}).get(RELATED_TASK) == {
            "taskId": task["taskId"]
        }, message


async def test_logs_and_statuses_of_a_task_go_only_to_its_session(sessions: Any) -> None:
    owner = await sessions()
    other = await sessions()
    await owner.result("logging/setLevel", {"level": "debug"})
    await other.result("logging/setLevel", {"level": "debug"})
    owner_stream = await owner.listen()
    other_stream = await other.listen()
    task = await owner.start("lt_log_every_level", meta={"progressToken": "p"})
    await owner_stream.wait_for(lambda _: "completed" in owner_stream.statuses(task["taskId"]))
    # Something the other session does see, so the check below is not vacuous.
    own = await other.start("lt_quick", {"value": "mine"})
    await other_stream.wait_for(lambda _: "completed" in other_stream.statuses(own["taskId"]))
    assert other_stream.of("notifications/tasks/status", task["taskId"]) == []
    assert other_stream.of("notifications/message") == []


async def test_ctx_session_id_is_the_creating_session(sessions: Any) -> None:
    session = await sessions()
    other = await sessions()
    task = await session.start("lt_identity")
    request_id = next(session.ids) - 1  # the tools/call that created it
    result = await session.result("tasks/result", {"taskId": task["taskId"]})
    identity = result["structuredContent"]
    assert identity["session_id"] == session.session_id
    assert identity["session_id"] != other.session_id
    assert identity["task_id"] == task["taskId"]
    assert identity["origin_request_id"] == request_id
    assert identity["request_id"] is None
    assert identity["is_background_task"] is True
    assert identity["request_context_is_none"] is True
    assert identity["protocol_version"] == LEGACY
    assert identity["client_name"] == "raw-legacy-tasks"


# -- questions through tasks/result --------------------------------------------------------------------


async def _answer_on_result_stream(
    session: Session,
    task_id: str,
    reply: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    reply_url: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Call ``tasks/result`` and answer what it asks: (the server's requests, the response)."""
    asked: list[dict[str, Any]] = []
    body = {"jsonrpc": "2.0", "id": 900, "method": "tasks/result", "params": {"taskId": task_id}}
    async with session.http.stream(
        "POST", session.url, json=body, headers=session.headers()
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for message in sse_messages(response):
            if "method" in message and "id" in message:
                asked.append(message)
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": reply(message)}
                posted = await session.http.post(
                    reply_url or session.url, json=answer, headers=session.headers()
                )
                assert posted.status_code == 202, posted.text
            elif message.get("id") == 900:
                return asked, message
    raise AssertionError(f"tasks/result ended without a response; asked {asked}")


async def test_elicitation_goes_out_on_the_tasks_result_stream(sessions: Any) -> None:
    session = await sessions()
    task = await session.start("lt_elicit", {"kind": "str"})
    waiting = await session.wait_status(task["taskId"], "input_required")
    assert waiting["statusMessage"] == "Task asks for a str"
    asked, response = await asyncio.wait_for(
        _answer_on_result_stream(
            session, task["taskId"], lambda _: {"action": "accept", "content": {"value": "hi"}}
        ),
        WAIT,
    )
    assert [request["method"] for request in asked] == ["elicitation/create"]
    params = asked[0]["params"]
    assert params["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
    assert params["message"] == "Task asks for a str"
    assert params["requestedSchema"]["properties"]["value"]["type"] == "string"
    result = response["result"]
    assert result["structuredContent"] == {"action": "accept", "data": "hi", "type_name": "str"}
    assert result["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
    assert (await session.result("tasks/get", {"taskId": task["taskId"]}))["status"] == "completed"


async def test_sampling_goes_out_on_the_tasks_result_stream(sessions: Any) -> None:
    session = await sessions()
    task = await session.start("lt_sample", {"question": "Capital of France?"})
    reply = {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "raw-model",
    }
    asked, response = await asyncio.wait_for(
        _answer_on_result_stream(session, task["taskId"], lambda _: reply), WAIT
    )
    assert [request["method"] for request in asked] == ["sampling/createMessage"]
    assert asked[0]["params"]["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
    assert asked[0]["params"]["messages"][0]["content"]["text"] == "Capital of France?"
    assert response["result"]["content"][0]["text"] == "raw-model said: Paris"


async def test_an_invalid_answer_leaves_the_question_open(sessions: Any) -> None:
    session = await sessions()
    task = await session.start("lt_elicit", {"kind": "int"})
    replies = iter(
        [
            {"action": "accept", "content": {"value": "not a number"}},
            {"action": "accept", "content": {"value": 7}},
        ]
    )

    async def first_round() -> list[dict[str, Any]]:
        asked: list[dict[str, Any]] = []
        body = {
            "jsonrpc": "2.0",
            "id": 901,
            "method": "tasks/result",
            "params": {"taskId": task["taskId"]},
        }
        async with session.http.stream(
            "POST", session.url, json=body, headers=session.headers()
        ) as response:
            async for message in sse_messages(response):
                if "method" in message:
                    asked.append(message)
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": next(replies)}
                    await session.http.post(session.url, json=answer, headers=session.headers())
                    return asked  # close this tasks/result stream
        return asked

    asked = await asyncio.wait_for(first_round(), WAIT)
    assert len(asked) == 1
    still = await session.result("tasks/get", {"taskId": task["taskId"]})
    assert still["status"] == "input_required"
    again, response = await asyncio.wait_for(
        _answer_on_result_stream(session, task["taskId"], lambda _: next(replies)), WAIT
    )
    assert len(again) == 1  # the same question, asked again on the new stream
    assert response["result"]["structuredContent"]["data"] == 7


# -- principals --------------------------------------------------------------------------------------


@pytest.mark.cancel
async def test_other_principals_cannot_see_or_touch_a_task(sessions: Any, tmp_path: Path) -> None:
    alice = await sessions(token=unique_token())
    alice_again = await sessions(token=alice.token)
    bob = await sessions(token=unique_token())
    anonymous = await sessions()
    task = await alice.start("lt_wait", {"marker_dir": str(tmp_path)})
    finished = await alice.start("lt_quick", {"value": "alice"})
    await alice.wait_terminal(finished["taskId"])
    for intruder in (bob, anonymous):
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            for task_id in (task["taskId"], finished["taskId"]):
                error = await intruder.error(method, {"taskId": task_id})
                assert error["code"] == -32602, (method, error)
        listed = [entry["taskId"] for entry in (await intruder.result("tasks/list"))["tasks"]]
        assert task["taskId"] not in listed and finished["taskId"] not in listed
    assert (await alice.result("tasks/get", {"taskId": task["taskId"]}))["status"] == "working"
    # The same principal in another session: the task is bound to the principal.
    listed = [entry["taskId"] for entry in (await alice_again.result("tasks/list"))["tasks"]]
    assert set(listed) == {task["taskId"], finished["taskId"]}
    cancelled = await alice_again.result("tasks/cancel", {"taskId": task["taskId"]})
    assert cancelled["status"] == "cancelled"


async def test_tasks_list_pages_the_callers_tasks(sessions: Any) -> None:
    session = await sessions(token=unique_token())
    created = [(await session.start("lt_quick", {"value": str(n)}))["taskId"] for n in range(53)]
    first = await session.result("tasks/list")
    assert len(first["tasks"]) == 50
    assert first.get("nextCursor")
    second = await session.result("tasks/list", {"cursor": first["nextCursor"]})
    assert len(second["tasks"]) == 3
    assert "nextCursor" not in second or second["nextCursor"] is None
    listed = [entry["taskId"] for entry in first["tasks"] + second["tasks"]]
    assert len(set(listed)) == 53
    assert set(listed) == set(created)
    for entry in first["tasks"] + second["tasks"]:
        check_task_shape(entry)


# -- two processes on Redis, a real rq worker --------------------------------------------------------


@pytest.mark.redis
async def test_two_processes_and_a_worker_status_and_replies_cross_processes(
    task_server: Any, rq_worker: Any, http: httpx.AsyncClient, request: pytest.FixtureRequest
) -> None:
    """Session on A; its GET stream on B; a real rq worker runs the task; the status pushed
    by the worker reaches B's stream; ``tasks/result`` on A relays the question and the
    reply is POSTed to B."""
    a = task_server(label="process A")
    b = task_server(database_url=a.database_url, prefix=a.env["REDIS_PREFIX"], label="process B")
    rq_worker(a)
    session = Session(http, a.mcp_url)
    await session.open()
    try:
        stream = await session.listen(url=b.mcp_url)
        task = await session.start("lt_elicit", {"kind": "bool"}, meta={"progressToken": "x"})
        # A status push carries the task's state when B sends it, not at the change: by then
        # the tool may have moved on from "working" to its question.
        await stream.wait_for(
            lambda _: {"working", "input_required"} & set(stream.statuses(task["taskId"]))
        )
        asked, response = await asyncio.wait_for(
            _answer_on_result_stream(
                session,
                task["taskId"],
                lambda _: {"action": "accept", "content": {"value": True}},
                reply_url=b.mcp_url,
            ),
            WAIT,
        )
        assert asked[0]["params"]["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
        assert response["result"]["structuredContent"] == {
            "action": "accept",
            "data": True,
            "type_name": "bool",
        }
        await stream.wait_for(lambda _: "completed" in stream.statuses(task["taskId"]))
        identity_task = await session.start("lt_identity")
        identity = await session.result(
            "tasks/result", {"taskId": identity_task["taskId"]}, url=b.mcp_url
        )
        assert identity["structuredContent"]["session_id"] == session.session_id
    finally:
        await session.close()


@pytest.mark.redis
async def test_waits_longer_than_the_redis_read_timeout_on_redis(
    task_server: Any, rq_worker: Any, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    """A ``tasks/result`` and a GET stream that hear nothing for longer than the Redis
    client's read timeout (5 s: redis-py's default, channels_redis' blocking-pop timeout)
    still get the result and the status."""
    stack = task_server(label="redis server")
    rq_worker(stack)
    session = Session(http, stack.mcp_url)
    await session.open()
    try:
        stream = await session.listen()
        task = await session.start("lt_wait", {"marker_dir": str(tmp_path), "seconds": 8})
        result = await asyncio.wait_for(
            session.result("tasks/result", {"taskId": task["taskId"]}), WAIT
        )
        assert result["content"][0]["text"] == "waited to the end"
        await stream.wait_for(lambda _: "completed" in stream.statuses(task["taskId"]))
    finally:
        await session.close()

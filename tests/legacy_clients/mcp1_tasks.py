"""``mcp==1.30.0`` (``session.experimental``) against the server: one scenario per run.

    python mcp1_tasks.py <scenario> <url> '<json options>'

Options common to every scenario: ``token`` (a bearer token). Each scenario prints one
JSON document (see its function) that ``tests/legacy/test_mcp1.py`` asserts on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from common import WAIT, arguments, emit, error_of, jsonable, wait_for_path, wait_until
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

RELATED_TASK = "io.modelcontextprotocol/related-task"
TERMINAL = ("completed", "failed", "cancelled")


class Recorder:
    """Everything the server sent besides responses: notifications and its requests."""

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        self.asked: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []

    async def message_handler(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.notifications.append(jsonable(message.root))

    async def logging_callback(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(jsonable(params))

    def of(self, method: str, task_id: str | None = None) -> list[dict[str, Any]]:
        found = [n for n in self.notifications if n.get("method") == method]
        if task_id is not None:
            found = [
                n
                for n in found
                if n.get("params", {}).get("taskId") == task_id
                or n.get("params", {}).get("_meta", {}).get(RELATED_TASK, {}).get("taskId")
                == task_id
            ]
        return found


def _write_marker(path: Path, text: str) -> None:
    """Write a marker file atomically: the test never reads it created but still empty."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def _meta_extra(meta: Any) -> dict[str, Any]:
    if meta is None:
        return {}
    return jsonable(meta)


@contextlib.asynccontextmanager
async def connect(
    url: str, options: dict[str, Any], recorder: Recorder, **callbacks: Any
) -> AsyncIterator[tuple[ClientSession, Any, Any]]:
    token = options.get("token") or os.environ.get("MCP_TASKS_TEST_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with streamablehttp_client(url, headers=headers) as (read, write, get_session_id):
        async with ClientSession(
            read,
            write,
            message_handler=recorder.message_handler,
            logging_callback=recorder.logging_callback,
            **callbacks,
        ) as session:
            init = await session.initialize()
            yield session, init, get_session_id


async def poll_statuses(
    session: ClientSession, task_id: str, stop_at: tuple[str, ...] = TERMINAL
) -> list[dict[str, Any]]:
    """``poll_task`` until a status in ``stop_at`` (or terminal): every status seen."""
    seen: list[dict[str, Any]] = []

    async def run() -> None:
        async for status in session.experimental.poll_task(task_id):
            seen.append(jsonable(status))
            if status.status in stop_at:
                return

    await asyncio.wait_for(run(), WAIT)
    return seen


async def result_of(session: ClientSession, task_id: str) -> dict[str, Any]:
    """``tasks/result`` as ``{"result": ...}`` or ``{"error": ...}``."""
    try:
        result = await asyncio.wait_for(
            session.experimental.get_task_result(task_id, types.CallToolResult), WAIT
        )
    except McpError as exc:
        return {"error": error_of(exc)}
    return {"result": jsonable(result)}


async def call_error(coro: Any) -> dict[str, Any]:
    """What a request that should fail answered: ``{"error": ...}`` or ``{"result": ...}``."""
    try:
        value = await asyncio.wait_for(coro, WAIT)
    except McpError as exc:
        return {"error": error_of(exc)}
    return {"result": jsonable(value)}


# -- scenarios ------------------------------------------------------------------------------


async def lifecycle(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Create, poll, fetch the result; the identity a task sees; the status notifications."""
    recorder = Recorder()
    async with connect(url, options, recorder) as (session, init, get_session_id):
        tools = await session.list_tools()
        created = await session.experimental.call_tool_as_task(
            "lt_quick", {"value": "a"}, ttl=options.get("ttl", 60000)
        )
        task_id = created.task.taskId
        polls = await poll_statuses(session, task_id)
        result = await result_of(session, task_id)
        final = await session.experimental.get_task(task_id)
        ident = await session.experimental.call_tool_as_task("lt_identity", {})
        identity = await result_of(session, ident.task.taskId)
        # Status notifications travel on the GET stream: wait (bounded) for the terminal ones.
        await wait_until(
            lambda: all(
                any(
                    n["params"].get("status") in TERMINAL
                    for n in recorder.of("notifications/tasks/status", tid)
                )
                for tid in (task_id, ident.task.taskId)
            ),
            timeout=options.get("notification_wait", 20),
        )
        return {
            "session_id": get_session_id(),
            "capabilities_tasks": jsonable(init.capabilities.tasks),
            "protocol_version": init.protocolVersion,
            "execution": {
                tool.name: (tool.execution.taskSupport if tool.execution else None)
                for tool in tools.tools
            },
            "created": jsonable(created),
            "polls": polls,
            "result": result,
            "final": jsonable(final),
            "identity_task_id": ident.task.taskId,
            "identity": identity,
            "status_notifications": recorder.of("notifications/tasks/status"),
        }


async def elicit(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """A task asks (``lt_elicit``); the question comes through ``tasks/result``."""
    recorder = Recorder()
    reply = options.get("reply", {"action": "accept", "content": {"value": True}})

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        recorder.asked.append(
            {
                "method": "elicitation/create",
                "params": jsonable(params),
                "context_meta": _meta_extra(context.meta),
            }
        )
        return types.ElicitResult(**reply)

    async with connect(url, options, recorder, elicitation_callback=on_elicit) as (session, _, _):
        created = await session.experimental.call_tool_as_task(
            "lt_elicit", {"kind": options.get("kind", "bool")}
        )
        task_id = created.task.taskId
        polls = (
            await poll_statuses(session, task_id, stop_at=("input_required", *TERMINAL))
            if options.get("poll", True)
            else []
        )
        result = await result_of(session, task_id)
        final = await session.experimental.get_task(task_id)
        return {
            "task_id": task_id,
            "polls": polls,
            "asked": recorder.asked,
            "result": result,
            "final": jsonable(final),
        }


async def sample(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """A task asks the client's model (``lt_sample``) through ``tasks/result``."""
    recorder = Recorder()

    async def on_sample(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        recorder.asked.append(
            {
                "method": "sampling/createMessage",
                "params": jsonable(params),
                "context_meta": _meta_extra(context.meta),
            }
        )
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            model="test-model",
        )

    async with connect(url, options, recorder, sampling_callback=on_sample) as (session, _, _):
        created = await session.experimental.call_tool_as_task(
            "lt_sample", {"question": "Six times seven?"}
        )
        task_id = created.task.taskId
        polls = await poll_statuses(session, task_id, stop_at=("input_required", *TERMINAL))
        result = await result_of(session, task_id)
        final = await session.experimental.get_task(task_id)
        return {
            "task_id": task_id,
            "polls": polls,
            "asked": recorder.asked,
            "result": result,
            "final": jsonable(final),
        }


async def paginate(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``count`` tasks, then ``tasks/list`` page by page; a forged cursor."""
    recorder = Recorder()
    async with connect(url, options, recorder) as (session, _, _):
        created = []
        for number in range(options.get("count", 55)):
            task = await session.experimental.call_tool_as_task("lt_quick", {"value": str(number)})
            created.append(task.task.taskId)
        pages: list[dict[str, Any]] = []
        cursor = None
        for _ in range(20):
            page = await session.experimental.list_tasks(cursor)
            pages.append(
                {
                    "ids": [task.taskId for task in page.tasks],
                    "statuses": [task.status for task in page.tasks],
                    "nextCursor": page.nextCursor,
                    "meta": _meta_extra(page.meta),
                }
            )
            cursor = page.nextCursor
            if not cursor:
                break
        forged = await call_error(session.experimental.list_tasks("not-a-cursor-we-issued"))
        return {"created": created, "pages": pages, "forged_cursor": forged}


async def cancel(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Cancel a waiting task, cancel it again, cancel a completed one; what each answered."""
    recorder = Recorder()
    marker_dir = Path(options["marker_dir"])
    async with connect(url, options, recorder) as (session, _, _):
        created = await session.experimental.call_tool_as_task(
            "lt_wait", {"marker_dir": str(marker_dir)}
        )
        task_id = created.task.taskId
        started = await wait_for_path(marker_dir / "started")
        cancelled = await session.experimental.cancel_task(task_id)
        again = await call_error(session.experimental.cancel_task(task_id))
        after = await session.experimental.get_task(task_id)
        result = await result_of(session, task_id)
        tool_stopped = await wait_for_path(marker_dir / "cancelled", timeout=20)

        done = await session.experimental.call_tool_as_task("lt_quick", {"value": "done"})
        await poll_statuses(session, done.task.taskId)
        cancel_completed = await call_error(session.experimental.cancel_task(done.task.taskId))
        unknown = await call_error(session.experimental.cancel_task("no-such-task"))
        return {
            "task_id": task_id,
            "started": started,
            "cancelled": jsonable(cancelled),
            "cancel_again": again,
            "after": jsonable(after),
            "result": result,
            "tool_saw_cancellation": tool_stopped,
            "cancel_completed": cancel_completed,
            "cancel_unknown": unknown,
        }


async def errors(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Tool errors, protocol errors and the task-support modes."""
    recorder = Recorder()
    async with connect(url, options, recorder) as (session, _, _):
        out: dict[str, Any] = {}
        tool_error = await session.experimental.call_tool_as_task(
            "lt_tool_error", {"reason": "bad input"}
        )
        out["tool_error_polls"] = await poll_statuses(session, tool_error.task.taskId)
        out["tool_error_get"] = jsonable(
            await session.experimental.get_task(tool_error.task.taskId)
        )
        out["tool_error_result"] = await result_of(session, tool_error.task.taskId)
        out["tool_error_task_id"] = tool_error.task.taskId

        protocol = await session.experimental.call_tool_as_task("lt_protocol_error", {})
        out["protocol_error_polls"] = await poll_statuses(session, protocol.task.taskId)
        out["protocol_error_result"] = await result_of(session, protocol.task.taskId)

        out["required_plain"] = await call_error(session.call_tool("lt_required", {}))
        out["forbidden_task"] = await call_error(
            session.experimental.call_tool_as_task("lt_forbidden", {})
        )
        out["optional_plain"] = await call_error(
            session.call_tool("lt_optional", {"value": "inline"})
        )
        required = await session.experimental.call_tool_as_task("lt_required", {"value": "as task"})
        out["required_task_result"] = await result_of(session, required.task.taskId)
        out["get_unknown"] = await call_error(session.experimental.get_task("no-such-task"))
        out["result_unknown"] = await call_error(
            session.experimental.get_task_result("no-such-task", types.CallToolResult)
        )
        return out


async def progress(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``lt_progress`` with a progress token: what reached the client (GET stream)."""
    recorder = Recorder()
    steps = options.get("steps", 3)
    token = options.get("progress_token", "mcp1-progress")
    async with connect(url, options, recorder) as (session, _, _):
        created = await session.experimental.call_tool_as_task(
            "lt_progress", {"steps": steps}, meta={"progressToken": token}
        )
        task_id = created.task.taskId
        result = await result_of(session, task_id)
        await wait_until(lambda: len(recorder.of("notifications/progress")) >= steps, timeout=20)
        return {
            "task_id": task_id,
            "result": result,
            "progress": recorder.of("notifications/progress"),
        }


async def logs(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``logging/setLevel`` then ``lt_log_every_level``: which levels reached the client."""
    recorder = Recorder()
    async with connect(url, options, recorder) as (session, _, get_session_id):
        if options.get("level"):
            await session.set_logging_level(options["level"])
        created = await session.experimental.call_tool_as_task("lt_log_every_level", {})
        result = await result_of(session, created.task.taskId)
        # The last message logged is "emergency", which every level lets through.
        await wait_until(
            lambda: any(entry.get("level") == "emergency" for entry in recorder.logs), timeout=20
        )
        return {
            "task_id": created.task.taskId,
            "session_id": get_session_id(),
            "result": result,
            "logs": recorder.logs,
        }


async def admin_pending(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """A task asks; this client declines to answer on the wire (its elicitation callback
    answers with an error) and waits in ``tasks/result`` while the admin answers.

    Files in ``marker_dir``: ``task_id`` once the task exists, ``asked`` once the question
    reached this client through ``tasks/result``.
    """
    recorder = Recorder()
    marker_dir = Path(options["marker_dir"])

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ErrorData:
        recorder.asked.append(
            {"params": jsonable(params), "context_meta": _meta_extra(context.meta)}
        )
        _write_marker(marker_dir / "asked", params.message)
        return types.ErrorData(code=-32000, message="this question is answered in the admin")

    async with connect(url, options, recorder, elicitation_callback=on_elicit) as (session, _, _):
        tool = options.get("tool", "lt_elicit")
        created = await session.experimental.call_tool_as_task(
            tool, options.get("arguments", {"kind": "bool"})
        )
        task_id = created.task.taskId
        _write_marker(marker_dir / "task_id", task_id)
        result = await result_of(session, task_id)
        final = await session.experimental.get_task(task_id)
        return {
            "task_id": task_id,
            "asked": recorder.asked,
            "result": result,
            "final": jsonable(final),
        }


SCENARIOS = {
    "lifecycle": lifecycle,
    "elicit": elicit,
    "sample": sample,
    "paginate": paginate,
    "cancel": cancel,
    "errors": errors,
    "progress": progress,
    "logs": logs,
    "admin_pending": admin_pending,
}


def main() -> None:
    scenario, url, options = arguments()
    emit(asyncio.run(SCENARIOS[scenario](url, options)))


if __name__ == "__main__":
    main()

"""FastMCP 3 (``fastmcp==3.4.7``) against the server: the seed's task flows, one per run.

    python fastmcp3_tasks.py <scenario> <url> '<json options>'

``Client(url).call_tool(name, args, task=True)`` returns a ``ToolTask`` handle with
``status()``, ``wait()``, ``result()`` and ``cancel()``. Options common to every scenario:
``token`` (a bearer token, ``Client(auth=...)``). Each scenario prints one JSON document.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from common import WAIT, arguments, emit, error_of, jsonable, wait_for_path, wait_until
from fastmcp import Client
from fastmcp.client.elicitation import ElicitResult
from fastmcp.client.tasks import TaskNotificationHandler
from fastmcp.exceptions import ToolError
from mcp import McpError
from pydantic import BaseModel


class Recording(TaskNotificationHandler):
    """FastMCP's own task-notification routing, plus a record of every notification."""

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self.notifications: list[dict[str, Any]] = []

    async def on_notification(self, message: Any) -> None:
        self.notifications.append(jsonable(message.root))

    def of(self, method: str) -> list[dict[str, Any]]:
        return [n for n in self.notifications if n.get("method") == method]


def make_client(url: str, options: dict[str, Any], **kwargs: Any) -> tuple[Client, Recording]:
    token = options.get("token") or os.environ.get("MCP_TASKS_TEST_TOKEN")
    client = Client(url, auth=token, timeout=WAIT, **kwargs)
    recording = Recording(client)
    client._session_kwargs["message_handler"] = recording  # keep FastMCP's task routing
    return client, recording


def status_of(status: Any) -> dict[str, Any]:
    return jsonable(status)


async def bounded(awaitable: Any, timeout: float) -> tuple[bool, Any]:
    """(True, value) or (False, None) when it did not finish within ``timeout``."""
    try:
        return True, await asyncio.wait_for(awaitable, timeout)
    except TimeoutError:
        return False, None


# -- scenarios ------------------------------------------------------------------------------


async def handle(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """The task handle: status, wait, result, ``await task``; the listing and capabilities."""
    client, recording = make_client(url, options)
    async with client:
        init = client.initialize_result
        tools = await client.list_tools()
        task = await client.call_tool("lt_quick", {"value": "fm"}, task=True)
        first = await task.status()
        waited = await task.wait(timeout=WAIT)
        result = await task.result()
        again = await task  # awaiting the handle is result()
        identity_task = await client.call_tool("lt_identity", {}, task=True)
        identity = await identity_task.result()
        listed = await client.list_tasks()
        return {
            "capabilities_tasks": jsonable(init.capabilities.tasks) if init else None,
            "protocol_version": init.protocolVersion if init else None,
            "execution": {
                tool.name: (tool.execution.taskSupport if tool.execution else None)
                for tool in tools
            },
            "task_id": task.task_id,
            "returned_immediately": task.returned_immediately,
            "first_status": status_of(first),
            "waited": status_of(waited),
            "data": result.data,
            "is_error": result.is_error,
            "meta": jsonable(result.meta),
            "await_data": again.data,
            "identity_task_id": identity_task.task_id,
            "identity": jsonable(identity.structured_content),
            "listed": [entry.get("taskId") for entry in listed.get("tasks", [])],
            "status_notifications": recording.of("notifications/tasks/status"),
        }


class Person(BaseModel):
    name: str
    age: int


async def elicit(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``lt_elicit`` answered by an ``elicitation_handler``.

    ``answer``: ``accept`` (returns ``value``), ``decline`` (``ElicitResult(action="decline")``)
    or ``pydantic`` (returns ``Person(**value)``, a pydantic model).
    """
    asked: list[dict[str, Any]] = []
    answer = options.get("answer", "accept")

    async def on_elicit(message: str, response_type: Any, params: Any, context: Any) -> Any:
        asked.append(
            {
                "message": message,
                "response_type": getattr(response_type, "__name__", str(response_type)),
                "params": jsonable(params),
            }
        )
        if answer == "decline":
            return ElicitResult(action="decline")
        if answer == "pydantic":
            return Person(**options["value"])
        return options.get("value", True)

    client, recording = make_client(url, options, elicitation_handler=on_elicit)
    async with client:
        task = await client.call_tool("lt_elicit", {"kind": options.get("kind", "bool")}, task=True)
        finished, result = await bounded(task.result(), options.get("result_timeout", WAIT))
        status = await client.get_task_status(task.task_id)
        return {
            "task_id": task.task_id,
            "finished": finished,
            "asked": asked,
            "data": jsonable(result.structured_content) if finished else None,
            "status": status_of(status),
            "status_notifications": recording.of("notifications/tasks/status"),
        }


async def progress(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``lt_progress`` with a progress token; the handle's ``on_status_change`` callback."""
    steps = options.get("steps", 3)
    token = options.get("progress_token", "fastmcp-progress")
    client, recording = make_client(url, options)
    changes: list[dict[str, Any]] = []
    async with client:
        task = await client.call_tool(
            "lt_progress", {"steps": steps}, task=True, meta={"progressToken": token}
        )
        task.on_status_change(lambda status: changes.append(status_of(status)))
        result = await task.result()
        await wait_until(lambda: len(recording.of("notifications/progress")) >= steps, timeout=20)
        return {
            "task_id": task.task_id,
            "data": result.data,
            "progress": recording.of("notifications/progress"),
            "status_changes": changes,
        }


async def cancel(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """``task.cancel()`` on a waiting task; what the handle and the server say after."""
    marker_dir = Path(options["marker_dir"])
    client, _ = make_client(url, options)
    async with client:
        task = await client.call_tool("lt_wait", {"marker_dir": str(marker_dir)}, task=True)
        started = await wait_for_path(marker_dir / "started")
        await task.cancel()
        status = await task.status()
        waited = await task.wait(timeout=WAIT)
        try:
            await client.cancel_task(task.task_id)
            again: dict[str, Any] = {"result": "no error"}
        except McpError as exc:
            again = {"error": error_of(exc)}
        tool_stopped = await wait_for_path(marker_dir / "cancelled", timeout=20)
        return {
            "task_id": task.task_id,
            "started": started,
            "status": status_of(status),
            "waited": status_of(waited),
            "cancel_again": again,
            "tool_saw_cancellation": tool_stopped,
        }


async def tool_error(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """A tool error: the handle's status is ``failed``; ``result()`` raises ``ToolError``
    (or returns ``is_error`` with ``raise_on_error=False``)."""
    client, _ = make_client(url, options)
    async with client:
        task = await client.call_tool("lt_tool_error", {"reason": "fastmcp"}, task=True)
        waited = await task.wait(timeout=WAIT)
        try:
            await task.result()
            raised: dict[str, Any] = {"raised": False}
        except ToolError as exc:
            raised = {"raised": True, "message": str(exc)}
        quiet = await client.call_tool(
            "lt_tool_error", {"reason": "quiet"}, task=True, raise_on_error=False
        )
        quiet_result = await quiet.result()
        return {
            "task_id": task.task_id,
            "waited": status_of(waited),
            "result": raised,
            "quiet_is_error": quiet_result.is_error,
            "quiet_text": [getattr(block, "text", None) for block in quiet_result.content],
        }


async def tokens(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Two principals (``token`` and ``other_token``): identity in the task, isolation."""
    owner, _ = make_client(url, options)
    other, _ = make_client(url, {**options, "token": options["other_token"]})
    async with owner, other:
        task = await owner.call_tool("lt_identity", {}, task=True)
        identity = await task.result()
        owner_list = await owner.list_tasks()
        other_list = await other.list_tasks()
        try:
            await other.get_task_status(task.task_id)
            other_get: dict[str, Any] = {"result": "visible"}
        except McpError as exc:
            other_get = {"error": error_of(exc)}
        try:
            await other.cancel_task(task.task_id)
            other_cancel: dict[str, Any] = {"result": "cancelled"}
        except McpError as exc:
            other_cancel = {"error": error_of(exc)}
        try:
            await other.get_task_result(task.task_id)
            other_result: dict[str, Any] = {"result": "visible"}
        except McpError as exc:
            other_result = {"error": error_of(exc)}
        return {
            "task_id": task.task_id,
            "identity": jsonable(identity.structured_content),
            "owner_list": [entry.get("taskId") for entry in owner_list.get("tasks", [])],
            "other_list": [entry.get("taskId") for entry in other_list.get("tasks", [])],
            "other_get": other_get,
            "other_cancel": other_cancel,
            "other_result": other_result,
            "owner_status": status_of(await owner.get_task_status(task.task_id)),
        }


SCENARIOS = {
    "handle": handle,
    "elicit": elicit,
    "progress": progress,
    "cancel": cancel,
    "tool_error": tool_error,
    "tokens": tokens,
}


def main() -> None:
    scenario, url, options = arguments()
    emit(asyncio.run(SCENARIOS[scenario](url, options)))


if __name__ == "__main__":
    main()

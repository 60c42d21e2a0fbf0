"""The protocol's :class:`~mcp_tasks.protocol.Sink` for one HTTP request: out on its
response stream, back (replies, task changes, broadcasts) through the channel layer."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

from ..conf import get_config
from ..core import background, groups
from ..core.jsonrpc import Message, notification, request
from ..exceptions import ToolError
from .membership import Membership
from .response_stream import ResponseStream
from .task_watcher import TaskWait, TaskWatcher


class RequestSink:
    """Where the protocol layer talks back while it serves one request."""

    def __init__(self, stream: ResponseStream, membership: Membership) -> None:
        self.stream = stream
        self.membership = membership
        self.session_id: str | None = None  # a legacy request's session
        self._pending: dict[str, asyncio.Future[Message]] = {}
        self._task_wait: TaskWait | None = None  # the task this request waits on

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.stream.event(notification(method, params))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.membership.layer is None:
            raise ToolError(f"cannot send {method}: no channel layer is configured")
        if self.stream.closed:
            raise ToolError(f"cannot send {method}: the client has disconnected")
        key = secrets.token_hex(16)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        group = groups.reply_group(key)
        await self.membership.join(group)
        try:
            await self.stream.event(request(key, method, params))
            reply = await asyncio.wait_for(future, get_config().CLIENT_REQUEST_TIMEOUT)
        except TimeoutError:
            raise ToolError(f"the client did not answer {method} in time") from None
        finally:
            self._pending.pop(key, None)
            await self.membership.leave(group)
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            raise ToolError(
                f"the client answered {method} with an error: {error.get('message', 'unknown error')}"
            )
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    def reply_arrived(self, key: str, session_id: str | None, reply: Message) -> None:
        """The client's reply to one of this request's server requests (``mcp.reply``),
        posted to any process; only the session that was asked may answer."""
        future = self._pending.get(key)
        if future is not None and not future.done() and session_id == self.session_id:
            future.set_result(reply)

    async def publish(self, method: str, params: dict[str, Any]) -> None:
        await self.membership.send(
            groups.BROADCAST, {"type": "mcp.notify", "message": notification(method, params)}
        )

    async def close_stream(self) -> None:
        if self.stream.resumable_id is not None:
            await self.stream.detach()

    async def watch_task(self, task_id: str) -> None:
        if self._task_wait is not None and self._task_wait.task_id == task_id:
            return
        watcher = TaskWatcher.of_running_loop()
        if watcher is None:
            return  # no channel layer: waits last their whole timeout
        self.unwatch_task()
        self._task_wait = await watcher.watch(task_id)

    async def wait_for_task(self, task_id: str, timeout: float) -> dict[str, Any] | None:
        await self.watch_task(task_id)
        wait = self._task_wait
        if wait is None:
            await asyncio.sleep(timeout)
            return None
        if not wait.changed.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await wait.changed.wait()
        fields, wait.fields = wait.fields, None
        wait.changed.clear()
        return fields

    def unwatch_task(self) -> None:
        wait, self._task_wait = self._task_wait, None
        if wait is not None and (watcher := TaskWatcher.of_running_loop()) is not None:
            watcher.unwatch(wait)

    @contextlib.contextmanager
    def pinging(self) -> Iterator[None]:
        """Ping the stream every ``SSE_KEEPALIVE`` seconds while the block runs, one ping
        at a time: a timer rather than a task, as most requests end before the first."""
        loop = asyncio.get_running_loop()
        interval = get_config().SSE_KEEPALIVE
        sending: asyncio.Future[Any] | None = None
        timer: asyncio.TimerHandle | None = None

        def ping() -> None:
            nonlocal sending, timer
            if sending is None or sending.done():
                sending = background.in_background(self.stream.ping())
            timer = loop.call_later(interval, ping)

        timer = loop.call_later(interval, ping)
        try:
            yield
        finally:
            timer.cancel()

    async def keepalive(self) -> None:
        """Ping the stream every ``SSE_KEEPALIVE`` seconds, until cancelled."""
        interval = get_config().SSE_KEEPALIVE
        while True:
            await asyncio.sleep(interval)
            await self.stream.ping()

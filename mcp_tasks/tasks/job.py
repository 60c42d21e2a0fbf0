"""The rq job: run (or resume) one task's tool with its context restored.

Async tools run on an event loop kept for the life of the worker process (so the server
lifespan is entered once per process); sync tools run in a thread and may use the ORM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from channels.layers import get_channel_layer

from .. import groups
from ..auth import AccessToken
from ..conf import get_config
from ..context import Context, level_allows
from ..db import db
from ..exceptions import ProtocolError, ToolError
from ..inputs import Question
from ..lifespan import lifespan_context
from ..models import LegacySession, Task, TaskSnapshot
from ..protocol.constants import META_RELATED_TASK
from ..runner import error_result, run_tool, validate_arguments
from ..server import MCPServer, mcp
from ..sessions import StoredSession
from . import crypto, notify, service

logger = logging.getLogger("mcp_tasks.tasks")

_loops = threading.local()


class TaskSuspended(BaseException):
    """The tool waits for an answer that did not come within the hold window: the job
    ends, the task stays ``input_required`` and resumes on a new job when answered."""


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def _loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _loops.loop = loop
    return loop


def run_task(task_id: str, run: int | None = None, server: MCPServer | None = None) -> None:
    """rq entry point (``mcp_tasks.tasks.job.run_task``): job number ``run`` of the task."""
    _loop().run_until_complete(execute(task_id, server or mcp, run))


class TaskWatch:
    """Hears the task's changes through the channel layer (a Redis wake-up, not polling):
    cancels the tool when the task ends, and wakes a waiting question."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.changed = asyncio.Event()
        self.tool: asyncio.Task[Any] | None = None
        self.ended = False
        self.listening = asyncio.Event()

    async def _listen(self) -> None:
        layer = get_channel_layer(get_config()["CHANNEL_LAYER"])
        if layer is None:
            self.listening.set()
            return
        channel = await layer.new_channel()
        group = groups.task_group(self.task_id)
        try:
            await layer.group_add(group, channel)
        finally:
            self.listening.set()  # joined, or failed to: either way the tool may start
        try:
            while True:
                try:
                    message = await layer.receive(channel)
                except Exception:  # Redis hiccup or read timeout: the heartbeat still polls
                    logger.warning(
                        "task %s: channel layer read failed", self.task_id, exc_info=True
                    )
                    await asyncio.sleep(1)
                    continue
                self._seen(message.get("status"))
        finally:
            with contextlib.suppress(Exception):
                await layer.group_discard(group, channel)

    def _seen(self, status: str | None) -> None:
        if status in ("completed", "failed", "cancelled"):
            self.ended = True
            if self.tool is not None and not self.tool.done():
                self.tool.cancel()
        self.changed.set()

    async def _heartbeat(self) -> None:
        interval = get_config()["TASK_HEARTBEAT_INTERVAL"]
        while True:
            await asyncio.sleep(interval)
            status = await db(service.heartbeat)(self.task_id)
            if status != "input_required":
                self._seen(status)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[TaskWatch]:
        helpers = [asyncio.ensure_future(self._listen()), asyncio.ensure_future(self._heartbeat())]
        # Join the task's group before the tool runs, so no wake-up is missed.
        await asyncio.wait(
            [helpers[0], asyncio.ensure_future(self.listening.wait())],
            timeout=5,
            return_when=asyncio.FIRST_COMPLETED,
        )
        try:
            yield self
        finally:
            for helper in helpers:
                helper.cancel()
                helper.add_done_callback(_consume_exception)
            # Only the heartbeat is awaited: a blocking channel-layer read can outlive its
            # cancellation by seconds (channels_redis' BRPOP), and the job need not wait.
            await asyncio.wait(helpers[1:], timeout=1)


def _consume_exception(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class TaskBackend:
    """A ``ContextBackend`` for a tool running as a background task."""

    def __init__(self, task: Task, snapshot: TaskSnapshot, watch: TaskWatch) -> None:
        self.task = task
        self.snapshot = snapshot
        self.watch = watch
        self.sequence = 0

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        await db(service.report_progress)(self.task.id, progress, total, message)
        token = self.snapshot.progress_token
        if self.snapshot.era == "legacy" and token is not None:
            # 2025-11-25: the creating request's progress token stays valid for the task's life.
            params: dict[str, Any] = {"progressToken": token, "progress": progress}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            params["_meta"] = {META_RELATED_TASK: {"taskId": self.task.id}}
            await _send(
                groups.session_group(self.task.session_id), "notifications/progress", params
            )

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        await db(service.add_log)(self.task.id, level, logger_name, data)
        if self.snapshot.era != "legacy":
            return  # the modern tasks extension has no log notifications for tasks
        threshold = (
            await LegacySession.objects.filter(pk=self.task.session_id)
            .values_list("log_level", flat=True)
            .afirst()
        )
        if threshold is None or not level_allows(level, threshold or None):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger_name:
            params["logger"] = logger_name
        params["_meta"] = {META_RELATED_TASK: {"taskId": self.task.id}}
        await _send(groups.session_group(self.task.session_id), "notifications/message", params)

    async def ask(self, questions: list[Question]) -> list[dict[str, Any]]:
        """Record the questions (or find them when replaying), announce them, and wait a
        short hold window for the answers; past it, the job ends (``TaskSuspended``)."""
        first = self.sequence + 1
        self.sequence += len(questions)
        keys: list[str | None]
        try:
            rows = await db(service.ask_all)(
                self.task.id,
                first,
                [(question.method, question.params, question.key) for question in questions],
                worker_name(),
            )
            keys = [row.key for row in rows]
        except (service.ReplayMismatch, service.TaskEnded):
            raise
        except Exception:
            logger.exception("could not record the questions of task %s", self.task.id)
            keys = [None] * len(questions)
        answers = await self._answers(keys)
        if any(
            answer is None for key, answer in zip(keys, answers, strict=True) if key is not None
        ):
            try:
                session_id = self.task.session_id if self.snapshot.era == "legacy" else None
                await notify.apublish_task_change(self.task.id, "input_required", session_id)
            except Exception:
                logger.exception("could not announce the questions of task %s", self.task.id)
                for key in keys:
                    if key is not None:
                        await db(service.withdraw)(self.task.id, key)
                keys = [None] * len(keys)
            else:
                answers = await self._hold(keys)
        return [
            self._unanswerable(question.method, "the question could not be asked")
            if key is None
            else self._unanswerable(question.method, "the question timed out")
            if answer == service.EXPIRED
            else answer
            for question, key, answer in zip(questions, keys, answers, strict=True)
        ]

    async def _answers(self, keys: list[str | None]) -> list[Any]:
        lookup = db(service.answer_of)
        return [None if key is None else await lookup(self.task.id, key) for key in keys]

    def _unanswerable(self, method: str, why: str) -> dict[str, Any]:
        if method == "elicitation/create":
            return {"action": "cancel"}
        raise ToolError(f"{method} failed: {why}")

    async def _hold(self, keys: list[str | None]) -> list[Any]:
        deadline = time.monotonic() + get_config()["INPUT_HOLD_WINDOW"]
        while True:
            self.watch.changed.clear()
            answers = await self._answers(keys)
            if all(
                answer is not None
                for key, answer in zip(keys, answers, strict=True)
                if key is not None
            ):
                return answers
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.watch.changed.wait(), remaining)
        if await db(service.release)(self.task.id):
            return await self._answers(keys)
        raise TaskSuspended(self.task.id)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await _send(groups.BROADCAST, method, params)

    async def close_stream(self) -> None:
        return None  # a task has no response stream


async def _send(group: str, method: str, params: dict[str, Any]) -> None:
    layer = get_channel_layer(get_config()["CHANNEL_LAYER"])
    if layer is not None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        await layer.group_send(group, {"type": "mcp.notify", "message": message})


def _access_token(data: Any) -> AccessToken | None:
    if not isinstance(data, dict):
        return None
    return AccessToken(
        token=data.get("token", ""),
        client_id=data.get("client_id", ""),
        scopes=list(data.get("scopes") or []),
        expires_at=data.get("expires_at"),
        claims=dict(data.get("claims") or {}),
    )


async def _session(task: Task) -> StoredSession | None:
    """The creating legacy session, while it still exists."""
    row = await LegacySession.objects.filter(pk=task.session_id).afirst()
    return StoredSession(row) if row is not None else None


async def _user(scope: str) -> Any:
    if not scope.startswith("user:"):
        return None
    from django.contrib.auth import get_user_model

    return await get_user_model()._default_manager.filter(pk=scope.split(":", 1)[1]).afirst()


async def execute(task_id: str, server: MCPServer, run: int | None = None) -> None:
    """Run one job of ``task_id`` to its end: a result, an error, or a suspension."""
    task = await db(service.begin_run)(task_id, worker_name(), run)
    if task is None:
        return
    fail = db(service.fail)
    tool = server.tools.get(task.tool_name)
    if tool is None:
        await fail(task.id, {"code": -32602, "message": f"Unknown tool: {task.tool_name}"})
        return
    snapshot = await TaskSnapshot.objects.aget(pk=task.id)
    try:
        secrets = crypto.unseal(snapshot.sealed) or {}
    except crypto.SnapshotDecryptionError as exc:
        await fail(task.id, {"code": -32603, "message": str(exc)}, str(exc))
        return
    try:
        validated = validate_arguments(tool, task.arguments)
    except ValueError as exc:
        await db(service.complete)(task.id, error_result(str(exc)))
        return
    watch = TaskWatch(task.id)
    context = Context(
        backend=TaskBackend(task, snapshot, watch),
        task_id=task.id,
        session_id=task.session_id,
        session=await _session(task) if snapshot.era == "legacy" else None,
        origin_request_id=task.origin_request_id,
        protocol_version=snapshot.protocol_version,
        client_capabilities=snapshot.client_capabilities,
        client_info=snapshot.client_info,
        access_token=_access_token(secrets.get("access_token")),
        user=await _user(task.principal_scope),
        lifespan_context=await lifespan_context(),
        request_context=None,
        headers=secrets.get("headers") or {},
        prepared=(snapshot.prior_answers or {}).get("prepared"),
    )
    async with watch.running():
        watch.tool = asyncio.ensure_future(run_tool(tool, validated, context))
        try:
            result = await watch.tool
        except asyncio.CancelledError:
            if not watch.ended:
                raise
            return  # the task was cancelled: its status already says so
        except TaskSuspended:
            return
        except service.ReplayMismatch as exc:
            await fail(task.id, {"code": -32603, "message": str(exc)}, str(exc))
            return
        except service.TaskEnded:
            return
        except ProtocolError as exc:
            await fail(task.id, exc.to_dict())
            return
        except BaseException as exc:
            # rq's job timeout (raised by SIGALRM) and anything else that escaped.
            await fail(
                task.id, {"code": -32603, "message": f"The task stopped: {type(exc).__name__}"}
            )
            raise
    await db(service.complete)(task.id, result)

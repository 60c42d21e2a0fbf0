"""Asking a task's waiting questions on a legacy-era stream (a 2025-11-25 ``tasks/result``,
or a call waiting for its task: :mod:`.task_handles`)."""

from __future__ import annotations

import asyncio
import logging

from ..core.task_contract import InvalidAnswer
from ..exceptions import ProtocolError, ToolError
from .ports import QuestionView, TaskEngine
from .request import Sink
from .stored import require_storable
from .task_shapes import related

logger = logging.getLogger("mcp_tasks.protocol")


class QuestionRelay:
    """Sends a task's questions on a stream and takes the replies to the one answer path."""

    def __init__(self, engine: TaskEngine) -> None:
        self.engine = engine

    async def _relay(
        self, task_id: str, question: QuestionView, principal_scope: str, sink: Sink
    ) -> None:
        """Send a claimed question and take its reply to the one answer path; without a
        usable answer, release the claim so it is asked again."""
        params = {**question.params, "_meta": related(task_id)}
        answered = False
        log = {"task_id": task_id, "principal": principal_scope}
        try:
            reply = await sink.request(question.method, params)
            require_storable(reply, "the reply")
            answered = await self.engine.answer(
                task_id, question.key, reply, principal_scope, strict=False
            )
        except ToolError as exc:
            logger.info(
                "question %s of task %s was not answered: %s", question.key, task_id, exc, extra=log
            )
        except (InvalidAnswer, ProtocolError) as exc:
            logger.info(
                "ignored an invalid answer to %s of task %s: %s",
                question.key,
                task_id,
                exc,
                extra=log,
            )
        finally:
            if not answered:
                await self.engine.release_relay(task_id, question.key)

    async def relay_questions(
        self, task_id: str, principal_scope: str, sink: Sink, relayed: dict[str, asyncio.Task[None]]
    ) -> None:
        """Send the task's waiting questions on this stream, each one once per session: a
        question another stream has claimed is left to it (and retried here if released)."""
        for question in await self.engine.waiting_questions(task_id, principal_scope):
            running = relayed.get(question.key)
            if running is not None and not running.done():
                continue
            if await self.engine.claim_relay(task_id, question.key):
                relayed[question.key] = asyncio.ensure_future(
                    self._relay(task_id, question, principal_scope, sink)
                )

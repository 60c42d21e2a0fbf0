"""The ``Context`` of a plain call: questions go as server→client requests (legacy era) or by MRTR
(modern: the round ends ``input_required``; the retry replays the recorded answers in order)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..authoring.context import Context, level_allows
from ..authoring.inputs import Question
from ..core.jsonrpc import INVALID_PARAMS
from ..exceptions import InputRequired, ProtocolError
from . import request_state
from .notices import log_params, progress_params
from .request import RequestInfo, Sink
from .task_shapes import input_request


class RequestBackend:
    """A ``ContextBackend`` for a plain (non-task) call: one round of ``method`` on ``target``
    with ``arguments``, what its ``requestState`` is bound to."""

    def __init__(
        self,
        info: RequestInfo,
        sink: Sink,
        params: dict[str, Any],
        method: str,
        target: str,
        arguments: Any,
    ) -> None:
        self.info = info
        self.sink = sink
        self.binding: dict[str, Any] = {
            "principal": info.principal.scope,
            "method": method,
            "target": target,
            "arguments": arguments,
        }
        self.answers = self._carried_answers(params) if info.modern else {}
        self.used: dict[str, Any] = {}  # answers the tool consumed this round
        self.asked = 0

    def _carried_answers(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answers carried by a modern retry: the sealed state plus this round's responses."""
        answers: dict[str, Any] = {}
        if "requestState" in params:
            answers.update(request_state.unseal(params["requestState"], **self.binding))
        if "inputResponses" in params:
            responses = params["inputResponses"]
            if not isinstance(responses, dict):
                raise ProtocolError(INVALID_PARAMS, "params.inputResponses must be an object")
            answers.update(responses)
        return answers

    def input_required(self, exc: InputRequired) -> dict[str, Any]:
        """The ``input_required`` result for a round that needs one more answer."""
        token = request_state.seal(self.used, **self.binding)
        return {
            "resultType": "input_required",
            "inputRequests": exc.requests,
            "requestState": token,
        }

    def context(self) -> Context:
        """The ``Context`` of the call."""
        info = self.info
        return Context(
            backend=self,
            request_id=info.request_id,
            session_id=info.session_id,
            session=info.session,
            protocol_version=info.protocol_version,
            client_capabilities=info.client_capabilities,
            client_info=info.client_info,
            access_token=info.principal.access_token,
            user=info.principal.user,
            lifespan_context=info.lifespan_context,
            request_context=info,
            headers={k: v for k, v in info.headers.items() if isinstance(v, str)},
        )

    def is_cancelled(self) -> bool:
        return False  # a cancelled call's coroutine is cancelled; its thread ends the call

    async def report_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None:
        if self.info.progress_token is None:
            return
        await self.sink.notify(
            "notifications/progress",
            progress_params(self.info.progress_token, progress, total, message),
        )

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        # Modern era: log only when this request asked for it; legacy: the session's level,
        # everything when none was set.
        if self.info.modern and self.info.log_level is None:
            return
        if not level_allows(level, self.info.log_level):
            return
        await self.sink.notify("notifications/message", log_params(level, data, logger_name))

    async def ask(self, questions: list[Question]) -> list[dict[str, Any]]:
        if not self.info.modern:
            return [await self.sink.request(q.method, q.params) for q in questions]
        answers: list[dict[str, Any]] = []
        missing: dict[str, dict[str, Any]] = {}
        for question in questions:
            key = question.key or self._auto_key(question)
            if key in self.answers:
                answer = self.answers[key]
                if not isinstance(answer, dict):
                    raise ProtocolError(
                        INVALID_PARAMS, f"inputResponses[{key!r}] must be an object"
                    )
                self.used[key] = answer
                answers.append(answer)
            else:
                missing[key] = input_request(question.method, question.params)
        if missing:
            raise InputRequired(missing)
        return answers

    def _auto_key(self, question: Question) -> str:
        self.asked += 1
        digest = hashlib.sha256(
            json.dumps([question.method, question.params], sort_keys=True, default=str).encode()
        ).hexdigest()[:10]
        return f"{question.key_prefix}-{self.asked}-{digest}"

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.sink.publish(method, params)

    async def close_stream(self) -> None:
        await self.sink.close_stream()

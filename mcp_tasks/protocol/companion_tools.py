"""The companion tools (check, answer, cancel, list the caller's tasks) for clients without
the tasks extension, beside a task tool they may use: the tasks API through tools, scoped
the same way, with ``isError`` results that tell a model how to correct itself."""

from __future__ import annotations

import json
import math
from typing import Any

from .. import jsontext
from ..auth.permissions import allowed
from ..authoring.registry import MCPServer
from ..authoring.tool_call import error_result
from ..conf import CompanionToolNames, get_config
from ..core.task_contract import InvalidAnswer, TaskNotFound
from .handle_shapes import expected_answer, not_found_result, question_message, task_summary
from .ports import QuestionView, TaskView
from .request import RequestInfo, Sink
from .stored import is_lookup_key, require_storable
from .task_handles import Follow, TaskHandles

#: The most tasks the list tool shows.
LIST_LIMIT = 50
_ACTIONS = ("accept", "decline", "cancel")
_TASK_ID = {"type": "string", "description": "The task_id a tool's result gave."}
_ANY_JSON = ["string", "number", "integer", "boolean", "object", "array"]


def definitions(names: CompanionToolNames, check_wait: float) -> list[dict[str, Any]]:
    """The companion tools as ``tools/list`` shows them."""
    wait = f"{check_wait:g}"

    def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "object", "properties": properties, "required": required}

    return [
        {
            "name": names.check,
            "title": "Check a background task",
            "description": (
                "Get the result of a tool that goes on in the background: when a tool's "
                "result says it has not finished and gives a task_id, call this with that "
                f"task_id. It waits up to {wait} seconds for news, then returns the tool's "
                "result exactly as the tool gives it once the task is done; otherwise where "
                f"the task stands, or the question it waits for (answer it with "
                f"{names.answer}). Call it again until the result comes."
            ),
            "inputSchema": schema(
                {
                    "task_id": _TASK_ID,
                    "wait_seconds": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": check_wait,
                        "description": f"Seconds to wait for news (default and at most {wait}).",
                    },
                },
                ["task_id"],
            ),
            "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
        },
        {
            "name": names.answer,
            "title": "Answer a background task's question",
            "description": (
                "Answer the question a background task waits for (the tool's result or "
                f"{names.check} shows its message and what the answer must be). Pass the "
                "task_id and the answer: for a question with one field the value itself "
                '(true, "Ada", 3), otherwise an object with the fields asked for. Ask the '
                'user when the answer is theirs to give. Pass action "decline" to refuse '
                f"to answer. Returns what the task does next, like {names.check}."
            ),
            "inputSchema": schema(
                {
                    "task_id": _TASK_ID,
                    "answer": {"type": _ANY_JSON, "description": "The answer (see above)."},
                    "action": {
                        "type": "string",
                        "enum": list(_ACTIONS),
                        "default": "accept",
                        "description": '"accept" (the default) with an answer, "decline" to '
                        'refuse, "cancel" to dismiss the question.',
                    },
                    "question_key": {
                        "type": "string",
                        "description": "Which question, when the task waits for several.",
                    },
                },
                ["task_id"],
            ),
            "annotations": {
                "readOnlyHint": False,
                "destructiveHint": False,
                "openWorldHint": False,
            },
        },
        {
            "name": names.cancel,
            "title": "Cancel a background task",
            "description": (
                "Stop one of your background tasks (by its task_id): its work is abandoned. "
                "A task that has already finished is left as it is."
            ),
            "inputSchema": schema({"task_id": _TASK_ID}, ["task_id"]),
            "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
        },
        {
            "name": names.list,
            "title": "List your background tasks",
            "description": (
                "List your background tasks that have not finished (task_id, tool, what each "
                f"is doing or waiting for), e.g. to find a task_id you lost; then use "
                f"{names.check}."
            ),
            "inputSchema": schema({}, []),
            "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
        },
    ]


def _text(text: str, structured: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def _response(question: QuestionView, answer: Any, action: str) -> dict[str, Any]:
    """The client's answer to ``question`` as the question's method expects it: a value of a
    one-field form fills that field; a text answers a sampling request; a list, roots."""
    if question.method == "sampling/createMessage" and isinstance(answer, str):
        return {
            "role": "assistant",
            "content": {"type": "text", "text": answer},
            "model": "client-model",
        }
    if question.method == "roots/list" and isinstance(answer, list):
        return {"roots": answer}
    if question.method != "elicitation/create":
        return answer if isinstance(answer, dict) else {"value": answer}
    if action != "accept":
        return {"action": action}
    properties = ((question.params or {}).get("requestedSchema") or {}).get("properties") or {}
    if isinstance(answer, dict) and (not properties or set(answer) <= set(properties)):
        content = answer
    elif len(properties) == 1:
        content = {next(iter(properties)): answer}
    else:
        content = answer if answer is not None else {}
    return {"action": "accept", "content": content}


class CompanionTools:
    """The four tools (see the module docstring), over :class:`.TaskHandles`."""

    def __init__(self, handles: TaskHandles) -> None:
        self.handles = handles
        self.engine = handles.engine

    def role_of(self, name: str) -> str | None:
        """``check``, ``answer``, ``cancel`` or ``list`` for a companion tool's name."""
        names = get_config().COMPANION_TOOLS
        return next(
            (r for r in ("check", "answer", "cancel", "list") if getattr(names, r) == name), None
        )

    def definitions(self) -> list[dict[str, Any]]:
        return definitions(get_config().COMPANION_TOOLS, float(get_config().CHECK_WAIT))

    async def call(
        self, role: str, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Run the companion tool ``role`` for this ``tools/call``."""
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            return error_result("arguments must be an object")
        if role != "list" and not isinstance(arguments.get("task_id"), str):
            return error_result(
                'Pass "task_id": the task_id (a string) that a tool\'s result gave. Call '
                f"`{get_config().COMPANION_TOOLS.list}` to see your unfinished tasks."
            )
        result: dict[str, Any] = await getattr(self, role)(server, info, sink, params)
        return result

    async def _task(
        self, server: MCPServer, info: RequestInfo, arguments: dict[str, Any]
    ) -> TaskView | None:
        """The caller's task named by ``task_id``, None when it is not found for them: also
        when its tool is one they may no longer use."""
        task_id = arguments.get("task_id")
        if not is_lookup_key(task_id):
            return None
        try:
            task = await self.engine.get(str(task_id), info.principal.scope)
        except TaskNotFound:
            return None
        tool = server.tools.get(task.tool_name)
        if tool is not None and not await allowed(tool.access, info.principal):
            return None
        return task

    def _not_found(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return not_found_result(str(arguments.get("task_id", "")), get_config().COMPANION_TOOLS)

    async def check(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = params.get("arguments") or {}
        names = get_config().COMPANION_TOOLS
        limit = float(get_config().CHECK_WAIT)
        wait = arguments.get("wait_seconds", limit)
        if not isinstance(wait, int | float) or isinstance(wait, bool) or not math.isfinite(wait):
            return error_result("wait_seconds must be a number of seconds")
        task = await self.handles.resumed(info, params, names.check, arguments)
        if task is None:
            task = await self._task(server, info, arguments)
        if task is None:
            return self._not_found(arguments)
        plan = Follow(names.check, arguments, min(max(float(wait), 0.0), limit), until_change=True)
        return await self.handles.follow(task, info, sink, plan)

    async def answer(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = params.get("arguments") or {}
        names = get_config().COMPANION_TOOLS
        plan = Follow(names.answer, arguments, float(get_config().CHECK_WAIT), until_change=True)
        resumed = await self.handles.resumed(info, params, names.answer, arguments)
        if resumed is not None:  # the answer was given; this retry answers the next question
            return await self.handles.follow(resumed, info, sink, plan)
        task = await self._task(server, info, arguments)
        if task is None:
            return self._not_found(arguments)
        ids = json.dumps({"task_id": task.id})
        if task.is_terminal:
            return error_result(
                f"Task {task.id} has ended ({task.status}): it waits for no answer. Call "
                f"`{names.check}` with {ids} for its result."
            )
        questions = await self.engine.questions(task) if task.status == "input_required" else []
        if not questions:
            why = (
                "waits for staff of this server, not for you: an operator answers it in the admin"
                if task.waiting_for == "staff"
                else f"is not waiting for an answer now ({task.status_message or task.status})"
            )
            return error_result(
                f"Task {task.id} {why}. Call `{names.check}` with {ids} to follow it."
            )
        action = arguments.get("action", "accept")
        if action not in _ACTIONS:
            return error_result('action must be "accept", "decline" or "cancel"')
        key = arguments.get("question_key")
        chosen = [question for question in questions if key is None or question.key == key]
        if len(chosen) != 1:
            keys = ", ".join(json.dumps(question.key) for question in questions)
            return error_result(
                f"Task {task.id} waits for {len(questions)} answers: say which one with "
                f'"question_key" (one of {keys}).'
                if key is None
                else f"Task {task.id} has no question {key!r} waiting; its questions: {keys}."
            )
        (question,) = chosen
        if action == "accept" and "answer" not in arguments:
            return error_result(
                f'Give the answer in "answer": {expected_answer(question.method, question.params or {})}.'
            )
        response = _response(question, arguments.get("answer"), action)
        if jsontext.find(response, jsontext.NUL) is not None:  # stored: -32602 naming it
            require_storable(arguments.get("answer"), "params.arguments.answer")
        try:
            answered = await self.engine.answer(
                task.id, question.key, response, info.principal.scope, strict=True
            )
        except TaskNotFound:
            return self._not_found(arguments)
        except InvalidAnswer as exc:
            message = question_message(question.method, question.params or {})
            expected = expected_answer(question.method, question.params or {})
            return error_result(
                f"That answer does not fit the question ({message}): {exc}. It needs "
                f"{expected}. Nothing was recorded; call `{names.answer}` again with a "
                "corrected answer."
            )
        if not answered:
            return error_result(
                f"That question of task {task.id} no longer waits for an answer (it was "
                f"answered or timed out). Call `{names.check}` with {ids} to follow the task."
            )
        try:
            task = await self.engine.get(task.id, info.principal.scope)
        except TaskNotFound:
            return self._not_found(arguments)
        return await self.handles.follow(task, info, sink, plan)

    async def cancel(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = params.get("arguments") or {}
        task = await self._task(server, info, arguments)
        if task is None:
            return self._not_found(arguments)
        if task.is_terminal:
            return _text(
                f"Task {task.id} had already ended ({task.status}); nothing was cancelled.",
                {"taskId": task.id, "status": task.status, "cancelled": False},
            )
        try:
            task = await self.engine.cancel(task.id, info.principal.scope)
        except TaskNotFound:
            return self._not_found(arguments)
        return _text(
            f"Task {task.id} is {task.status}: its work stops.",
            {"taskId": task.id, "status": task.status, "cancelled": task.status == "cancelled"},
        )

    async def list(
        self, server: MCPServer, info: RequestInfo, sink: Sink, params: dict[str, Any]
    ) -> dict[str, Any]:
        names = get_config().COMPANION_TOOLS
        tasks = await self.engine.unfinished(info.principal.scope, LIST_LIMIT)
        summaries = [task_summary(task) for task in tasks]
        if not tasks:
            return _text("You have no unfinished background tasks.", {"tasks": []})
        lines = [f"You have {len(tasks)} unfinished background task(s), newest first:"]
        lines += [
            f"- task_id {task.id}: `{task.tool_name}`, {task.status_message or task.status}"
            for task in tasks
        ]
        lines.append(f'Call `{names.check}` with {{"task_id": ...}} to follow one.')
        return _text("\n".join(lines), {"tasks": summaries})

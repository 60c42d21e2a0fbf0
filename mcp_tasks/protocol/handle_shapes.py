"""What a client without the tasks extension reads of a task: the *handle* (a plain
``CallToolResult`` saying, in words and ``structuredContent``, where the task stands and
the exact call to make next), and questions described for a model."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..conf import CompanionToolNames
from .ports import QuestionView, TaskView
from .task_shapes import iso, related

#: What a question needs from the client, by method.
QUESTION_CAPABILITIES = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


#: Seconds a handle suggests before checking a task that waits for staff again.
STAFF_CHECK_AFTER = 60


def _call(tool: str, arguments: dict[str, Any]) -> str:
    return f"`{tool}` with {json.dumps(arguments)}"


def _seconds(value: float) -> str:
    return f"{value:g} second{'' if value == 1 else 's'}"


def _number(value: float) -> str:
    return f"{value:g}"


def _kind(prop: Mapping[str, Any]) -> str:
    """One field of an elicitation schema, in words ("an integer from 1 to 5")."""
    options = prop.get("enum") or [
        option.get("const") for option in prop.get("oneOf") or [] if isinstance(option, dict)
    ]
    if options:
        return "one of " + ", ".join(json.dumps(option) for option in options)
    kind = prop.get("type")
    if kind == "array":
        return "a list of values, each " + _kind(prop.get("items") or {})
    if kind == "boolean":
        return "true or false"
    if kind in ("number", "integer"):
        words = "an integer" if kind == "integer" else "a number"
        low, high = prop.get("minimum"), prop.get("maximum")
        if low is not None and high is not None:
            return f"{words} from {_number(low)} to {_number(high)}"
        if low is not None:
            return f"{words} of at least {_number(low)}"
        if high is not None:
            return f"{words} of at most {_number(high)}"
        return words
    text = "a string"
    if prop.get("format"):
        text += f" ({prop['format']})"
    return text


def expected_answer(method: str, params: Mapping[str, Any]) -> str:
    """What ``answer`` should be for a question, in words."""
    if method == "sampling/createMessage":
        return "the text of the reply the messages ask for"
    if method == "roots/list":
        return 'a list of roots, each {"uri": "file:///...", "name": "..."}'
    schema = params.get("requestedSchema") or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    if not properties:
        return "{} (nothing to fill in: accepting is the answer)"
    if len(properties) == 1:
        ((name, prop),) = properties.items()
        return _kind(prop) if name == "value" else f"{_kind(prop)} (its {name!r} field)"
    required = set(schema.get("required") or [])
    fields = ", ".join(
        f"{json.dumps(name)}: {_kind(prop)}{'' if name in required else ' (optional)'}"
        for name, prop in properties.items()
    )
    return f"an object with {fields}"


def question_message(method: str, params: Mapping[str, Any]) -> str:
    if method == "sampling/createMessage":
        return "The task asks for a model's reply to these messages: " + json.dumps(
            params.get("messages") or []
        )
    if method == "roots/list":
        return "The task asks for the roots (folders) it may work in."
    return str(params.get("message") or "The task asks for an answer.")


def question_fields(question: QuestionView) -> dict[str, Any]:
    """A waiting question, for ``structuredContent``."""
    params = question.params or {}
    fields: dict[str, Any] = {
        "key": question.key,
        "method": question.method,
        "message": question_message(question.method, params),
        "expects": expected_answer(question.method, params),
    }
    if question.method == "elicitation/create":
        fields["requestedSchema"] = params.get("requestedSchema") or {"type": "object"}
    return fields


def _progress(task: TaskView) -> str:
    if task.progress is None:
        return ""
    if task.progress_total:
        return f" ({_number(task.progress)} of {_number(task.progress_total)})"
    return f" ({_number(task.progress)} so far)"


def task_summary(task: TaskView) -> dict[str, Any]:
    """One unfinished task, as the list tool shows it."""
    return {
        "taskId": task.id,
        "tool": task.tool_name,
        "status": task.status,
        "statusMessage": task.status_message,
        "createdAt": iso(task.created_at),
    }


def handle_result(
    task: TaskView,
    questions: Sequence[QuestionView],
    names: CompanionToolNames,
    *,
    waited: float,
    check_wait: float,
) -> dict[str, Any]:
    """The ``CallToolResult`` of a call whose task goes on (``waited``: seconds it waited)."""
    ids = {"task_id": task.id}
    structured = {**task_summary(task), "lastUpdatedAt": iso(task.updated_at)}
    if task.progress is not None:
        structured["progress"] = task.progress
        if task.progress_total:
            structured["total"] = task.progress_total
    lines = [
        f"The tool `{task.tool_name}` has not finished yet (after {_seconds(waited)}): it goes "
        f"on in the background as task {task.id}. Status: {task.status_message or task.status}"
        f"{_progress(task)}."
    ]
    if questions:
        structured["waitingFor"] = "answer"
        asked = [question_fields(question) for question in questions]
        structured["questions"] = asked
        structured["next"] = {"tool": names.answer, "arguments": ids}
        structured["checkAfterSeconds"] = 0
        lines.append("It waits for an answer before it can go on:")
        lines += [f"- {fields['message']} Answer with {fields['expects']}." for fields in asked]
        several = (
            ' Answer one question per call and add "question_key" (one of '
            + ", ".join(json.dumps(question.key) for question in questions)
            + ")."
            if len(questions) > 1
            else ""
        )
        lines.append(
            "Ask the user when the answer is theirs to give, then call "
            f'{_call(names.answer, ids)} plus "answer": the answer.{several} To refuse, pass '
            '"action": "decline" instead of an answer.'
        )
    elif task.waiting_for == "staff":
        structured["waitingFor"] = "staff"
        structured["next"] = {"tool": names.check, "arguments": ids}
        structured["checkAfterSeconds"] = STAFF_CHECK_AFTER
        lines.append(
            "It waits for a decision by staff of this server (an operator approves or answers "
            "it in the server's admin); you cannot answer it yourself. Tell the user, and call "
            f"{_call(names.check, ids)} later to see the decision and, once it has run, the result."
        )
    else:
        structured["next"] = {"tool": names.check, "arguments": ids}
        structured["checkAfterSeconds"] = 0
        lines.append(
            f"To get its result, call {_call(names.check, ids)}: it waits up to "
            f"{_seconds(check_wait)} for the task to finish and then returns the result, "
            "or where the task stands; call it again until the result comes."
        )
    lines.append(
        "The task does not need this conversation to go on: you may do other work meanwhile. "
        f"To stop it, call {_call(names.cancel, ids)}."
    )
    return {
        "content": [{"type": "text", "text": "\n".join(lines)}],
        "structuredContent": structured,
        "_meta": related(task.id),
    }


def cancelled_result(task: TaskView) -> dict[str, Any]:
    """The result of a call whose task was cancelled before it ended."""
    return {
        "content": [{"type": "text", "text": f"The task {task.id} was cancelled before it ended."}],
        "structuredContent": {"taskId": task.id, "tool": task.tool_name, "status": task.status},
        "isError": True,
        "_meta": related(task.id),
    }


def not_found_result(task_id: str, names: CompanionToolNames) -> dict[str, Any]:
    """The one answer for a task that is unknown, expired or someone else's."""
    return {
        "content": [
            {
                "type": "text",
                "text": f"Task not found: no task {task_id!r} of yours exists (it may have "
                f"expired). Call `{names.list}` to see your unfinished tasks.",
            }
        ],
        "isError": True,
    }

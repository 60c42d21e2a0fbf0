"""What :class:`~mcp_tasks.testing.McpClient` reports (its errors, a task's questions and
progress) and how an answer becomes the response a client sends."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Task statuses that never change again.
TERMINAL = frozenset({"completed", "failed", "cancelled"})

#: A JSON-RPC result or a task, as decoded JSON.
Message = dict[str, Any]
#: How questions are answered: a callable given each :class:`Question` (it may be async in
#: the async API), or a mapping from a question's key, message or form field to the answer.
Answer = Callable[["Question"], Any] | Mapping[str, Any]
#: What is given each :class:`Progress` (it may be async in the async API).
OnProgress = Callable[["Progress"], Any]


class McpClientError(Exception):
    """The call did not give what was asked of it."""


class McpError(McpClientError):
    """The server answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None, *, status: int | None = None):
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code, self.message, self.data, self.status = code, message, data, status


class InputRequiredError(McpClientError):
    """The server asked questions that no ``answer`` was given for."""

    def __init__(self, questions: list[Question], task_id: str | None = None) -> None:
        asked = "; ".join(repr(question.message) for question in questions)
        where = f"task {task_id}" if task_id else "the call"
        super().__init__(f"{where} asks {asked}: pass answer= (a callable or a mapping)")
        self.questions, self.task_id = questions, task_id


class NotATaskError(McpClientError):
    """:meth:`McpClient.start` of a tool that the server ran at once (``.result``)."""

    def __init__(self, tool: str, result: Message) -> None:
        super().__init__(f"{tool} does not run as a task (its result came at once): use call()")
        self.result = result


@dataclass(frozen=True)
class Question:
    """One entry of ``inputRequests``: ``method`` is ``elicitation/create``,
    ``sampling/createMessage`` or ``roots/list``."""

    key: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """The question's text (its ``method`` for sampling and roots)."""
        return str(self.params.get("message") or self.method)

    @property
    def fields(self) -> dict[str, dict[str, Any]]:
        """The elicitation form's fields (name → JSON schema)."""
        schema = self.params.get("requestedSchema") or {}
        return dict(schema.get("properties") or {})

    @property
    def required(self) -> list[str]:
        """The names of the form's required fields."""
        return list((self.params.get("requestedSchema") or {}).get("required") or [])


@dataclass(frozen=True)
class Progress:
    """Progress of a call (``notifications/progress``) or a task (its ``statusMessage``;
    numbers only when the tool reported them without a message, as ``"2/3"``)."""

    status: str
    message: str | None = None
    progress: float | None = None
    total: float | None = None


def text_of(result: Message) -> str:
    """The text blocks of a ``CallToolResult``, one per line."""
    blocks = result.get("content") or []
    return "\n".join(block["text"] for block in blocks if block.get("type") == "text")


def lookup(answers: Mapping[str, Any], question: Question) -> Any:
    """The answer ``answers`` gives ``question``: under its key or its message, or (a form)
    under its fields' names, all required ones given; ``KeyError`` when none fits."""
    for name in (question.key, question.message):
        if name in answers:
            return answers[name]
    given = {name: answers[name] for name in question.fields if name in answers}
    if given and all(name in given for name in question.required):
        return {"action": "accept", "content": given}
    raise KeyError(question.key)


def response_to(question: Question, value: Any) -> Any:
    """The wire response for an answer. For an elicitation: a dict with ``action`` as it is,
    another dict is the accepted form, and any other value fills a one-field form."""
    if question.method != "elicitation/create" or (isinstance(value, dict) and "action" in value):
        return value
    if isinstance(value, dict):
        return {"action": "accept", "content": value}
    if len(question.fields) != 1:
        raise McpClientError(f"answer {question.message!r} with a dict of its fields")
    return {"action": "accept", "content": {next(iter(question.fields)): value}}


def questions_in(result: Mapping[str, Any]) -> list[Question]:
    requests = result.get("inputRequests") or {}
    return [
        Question(str(key), entry.get("method", ""), entry.get("params") or {})
        for key, entry in requests.items()
    ]


def progress_of(task: Message) -> Progress:
    message = task.get("statusMessage")
    found = re.fullmatch(r"(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)", message or "")
    numbers = (float(found[1]), float(found[2])) if found else (None, None)
    return Progress(task.get("status", ""), message, *numbers)


def listener(on_progress: OnProgress | None) -> Callable[[Message], Any] | None:
    """``notifications/progress`` messages as :class:`Progress` to ``on_progress``."""
    if on_progress is None:
        return None

    def heard(message: Message) -> Any:
        if message.get("method") != "notifications/progress":
            return None
        params = message.get("params") or {}
        return on_progress(
            Progress("working", params.get("message"), params.get("progress"), params.get("total"))
        )

    return heard


async def resolved(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value

"""What :class:`~mcp_tasks.testing.McpClient` does, step by step: each operation is a
generator of steps, run by a sync driver (``McpClient._run``) or an async one
(``McpClient._arun``): one protocol, two APIs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .results import (
    TERMINAL,
    Answer,
    InputRequiredError,
    McpClientError,
    Message,
    NotATaskError,
    OnProgress,
    Question,
    listener,
    lookup,
    progress_of,
    questions_in,
    response_to,
)

if TYPE_CHECKING:
    from .client import TaskRun

#: Most ``input_required`` rounds one call may take.
MAX_ROUNDS = 20
#: Seconds between polls when a task names no ``pollIntervalMs``.
DEFAULT_POLL = 0.5


@dataclass
class Request:
    method: str
    params: Message
    tasks: bool = False
    heard: Callable[[Message], Any] | None = None


@dataclass
class Callback:
    fn: Callable[[Any], Any]
    argument: Any


@dataclass
class Sleep:
    seconds: float


Step = Request | Callback | Sleep
T = TypeVar("T")
#: An operation: the steps it takes, then what it returns.
Steps = Generator[Step, Any, T]


@dataclass
class Done(Generic[T]):
    """The steps returned ``value``."""

    value: T


def advance(steps: Steps[T], value: Any) -> Step | Done[T]:
    """The next step, sent ``value`` (what the last one gave); :class:`Done` at the end."""
    try:
        return steps.send(value)
    except StopIteration as done:
        return Done(done.value)


def _answers(
    questions: list[Question], answer: Answer | None, task_id: str | None
) -> Steps[Message]:
    """The responses to ``questions``, keyed as asked."""
    responses = {}
    for question in questions:
        if isinstance(answer, Mapping):
            try:
                value = lookup(answer, question)
            except KeyError:
                raise InputRequiredError([question], task_id) from None
        elif answer is None:
            raise InputRequiredError(questions, task_id)
        else:
            value = yield Callback(answer, question)
        responses[question.key] = response_to(question, value)
    return responses


def calling(
    name: str,
    arguments: Mapping[str, Any] | None,
    answer: Answer | None,
    on_progress: OnProgress | None,
    tasks: bool,
) -> Steps[Message]:
    """``tools/call`` and its MRTR rounds; the final result."""
    params: Message = {"name": name, "arguments": dict(arguments or {})}
    if on_progress is not None:
        params["_meta"] = {"progressToken": uuid.uuid4().hex}
    for _ in range(MAX_ROUNDS):
        result: Message = yield Request("tools/call", params, tasks, listener(on_progress))
        if result.get("resultType") != "input_required":
            return result
        if not (questions := questions_in(result)):  # retrying would get the same answer
            raise McpClientError(f"{name}: input_required without inputRequests: {result!r:.300}")
        responses = yield from _answers(questions, answer, None)
        params = {**params, "inputResponses": responses}
        params.pop("requestState", None)
        if "requestState" in result:  # echoed as it came
            params["requestState"] = result["requestState"]
    raise McpClientError(f"{name} asked more than {MAX_ROUNDS} rounds of questions")


def listing() -> Steps[list[Message]]:
    tools: list[Message] = []
    cursor = None
    while True:
        page = yield Request("tools/list", {"cursor": cursor} if cursor else {})
        tools += page.get("tools") or []
        if not (cursor := page.get("nextCursor")):
            return tools


def waiting(
    run: TaskRun, answer: Answer | None, on_progress: OnProgress | None, timeout: float | None
) -> Steps[Message]:
    """Poll the task until it ends, answering its questions; its last state."""
    deadline = None if timeout is None else time.monotonic() + timeout
    answered: set[str] = set()
    seen = None
    while True:
        run.task = yield Request("tasks/get", {"taskId": run.task_id}, tasks=True)
        status = run.status
        if on_progress is not None and (progress := progress_of(run.task)) != seen:
            yield Callback(on_progress, progress)
            seen = progress
        if status in TERMINAL:
            return run.task
        questions = run.questions
        if refused := [q.message for q in questions if q.key in answered]:
            raise McpClientError(f"task {run.task_id} did not take the answer to {refused}")
        if questions:
            responses = yield from _answers(questions, answer, run.task_id)
            yield Request("tasks/update", run.params(inputResponses=responses), tasks=True)
            answered.update(responses)
            continue
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"task {run.task_id} is still {status}")
        interval = run.task.get("pollIntervalMs")
        yield Sleep(interval / 1000 if isinstance(interval, int | float) else DEFAULT_POLL)


def started(name: str, result: Message) -> Message:
    if result.get("resultType") != "task":
        raise NotATaskError(name, result)
    return result

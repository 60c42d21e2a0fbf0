"""``manage.py mcp_tasks_call <tool> [key=value ...]``: call a tool from the shell, in-process
or on a live server (``--url``); a task shows its progress and asks its questions here."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from ...conf import get_config
from ...core.jsonrpc import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY
from ...protocol.constants import TASKS_EXTENSION
from ...testing import (
    InputRequiredError,
    McpClient,
    McpClientError,
    McpError,
    NotATaskError,
    Progress,
    Question,
    TaskRun,
    lookup,
)

#: Exit codes: the tool's error (``isError``, a failed or cancelled task), a usage error,
#: Ctrl-C (the task is cancelled).
FAILED, USAGE, INTERRUPTED = 1, 2, 130
BAR_WIDTH = 24
YES, NO = ("y", "yes", "true", "1", "on"), ("n", "no", "false", "0", "off")


def parse_pairs(items: list[str], what: str) -> dict[str, Any]:
    """``key=value`` items; a value is JSON when it parses, else a string."""
    pairs: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{what} {item!r}: write it as key=value", returncode=USAGE)
        try:
            pairs[key] = json.loads(value)
        except ValueError:
            pairs[key] = value
    return pairs


class ProgressBar:
    """One line on stderr: redrawn in place on a terminal, a line per change elsewhere."""

    def __init__(self, out: OutputWrapper) -> None:
        self.out, self.tty = out, out.isatty()
        self.shown = ""

    def show(self, progress: Progress) -> None:
        line = self.render(progress)
        if line == self.shown.strip():
            return
        if self.tty:
            self.out.write("\r" + line.ljust(len(self.shown)), ending="")
            self.out.flush()
        else:
            self.out.write(line)
        self.shown = line

    @staticmethod
    def render(progress: Progress) -> str:
        if progress.total and progress.progress is not None:
            done = int(BAR_WIDTH * min(max(progress.progress / progress.total, 0), 1))
            bar = (
                f"[{'#' * done}{'.' * (BAR_WIDTH - done)}] {progress.progress:g}/{progress.total:g}"
            )
        else:
            bar = f"[{progress.status}]"
        return f"{bar} {progress.message}" if progress.message else bar

    def end(self) -> None:
        """Leave the line (before a prompt or the result)."""
        if self.tty and self.shown:
            self.out.write("")
        self.shown = ""


class NoAnswerError(Exception):
    """stdin ended before a question was answered."""


class RefusedError(Exception):
    """The user typed ``:decline`` or ``:cancel``."""


class Prompter:
    """Answers questions from ``--answer`` values, else by asking on stdin."""

    def __init__(
        self, answers: Mapping[str, Any], stdin: TextIO, err: OutputWrapper, bar: ProgressBar
    ) -> None:
        self.answers, self.stdin, self.err, self.bar = answers, stdin, err, bar

    def __call__(self, question: Question) -> Any:
        try:
            return lookup(self.answers, question)
        except KeyError:
            pass
        if question.method != "elicitation/create":
            raise NoAnswerError(f"{question.message!r}: pass --answer {question.key}=JSON")
        self.bar.end()
        self.err.write(f"? {question.message}  (:decline or :cancel to refuse)")
        content: dict[str, Any] = {}
        try:
            for name, schema in question.fields.items():
                given = self.answers.get(name, _SKIP)
                if given is _SKIP:
                    given = self.ask_field(question, name, schema)
                if given is not _SKIP:
                    content[name] = given
        except RefusedError as exc:
            return {"action": str(exc)}
        return {"action": "accept", "content": content}

    def ask_field(self, question: Question, name: str, schema: Mapping[str, Any]) -> Any:
        """One field, typed by its schema; empty: its default, or left out if optional."""
        choices = _choices(schema)
        label = "" if name == "value" else str(schema.get("title") or name)  # a scalar question
        hint = _hint(schema, choices)
        for number, choice in enumerate(choices, 1):
            self.err.write(f"  {number}) {choice[1]}")
        while True:
            self.err.write(f"  {' '.join(part for part in (label, hint) if part)}: ", ending="")
            self.err.flush()
            line = self.stdin.readline()
            if not line:
                raise NoAnswerError(f"{question.message!r}: stdin ended; pass --answer {name}=…")
            text = line.strip()
            if not self.stdin.isatty():
                self.err.write(text)  # what a terminal would have echoed
            if text in (":decline", ":cancel"):
                raise RefusedError(text[1:])
            if not text:
                if "default" in schema:
                    return schema["default"]
                if name not in question.required:
                    return _SKIP
                self.err.write("  a value is required")
                continue
            try:
                return _convert(text, schema, choices)
            except ValueError as exc:
                self.err.write(f"  {exc}")


_SKIP = object()


def _choices(schema: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """(value, label) of an enum field, or of the items of a multi-select one."""
    if schema.get("type") == "array":
        schema = schema.get("items") or {}
    if "enum" in schema:
        return [(value, str(value)) for value in schema["enum"]]
    options = schema.get("oneOf") or schema.get("anyOf") or []
    return [(o["const"], str(o.get("title") or o["const"])) for o in options if "const" in o]


def _hint(schema: Mapping[str, Any], choices: list[tuple[Any, str]]) -> str:
    kind = schema.get("type", "string")
    hint = {"boolean": "[y/n]", "integer": "(integer)", "number": "(number)"}.get(kind, "")
    if choices:
        hint = "(numbers, comma-separated)" if kind == "array" else "(number or value)"
    if "default" in schema:
        hint += f" [{schema['default']}]"
    return hint.strip()


def _convert(text: str, schema: Mapping[str, Any], choices: list[tuple[Any, str]]) -> Any:
    kind = schema.get("type", "string")
    if kind == "array":
        return [_choose(part.strip(), choices) for part in text.split(",") if part.strip()]
    if choices:
        return _choose(text, choices)
    if kind == "boolean":
        if text.lower() in YES + NO:
            return text.lower() in YES
        raise ValueError("answer y or n")
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            raise ValueError(f"not a valid {kind}: {text!r}") from None
    return text


def _choose(text: str, choices: list[tuple[Any, str]]) -> Any:
    if not choices:
        return text
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1][0]
    for value, label in choices:
        if text in (str(value), label):
            return value
    raise ValueError(f"choose one of {', '.join(label for _, label in choices)}")


class Command(BaseCommand):
    help = (
        "Call an MCP tool of this site: in-process (default) or on a live server (--url). "
        "Arguments are key=value (values parsed as JSON when they parse) or --json. With "
        "--task, or for a tool that runs only as a task, shows its progress and asks its "
        "questions on stdin (or answers them from --answer); Ctrl-C cancels it."
    )
    stealth_options = ("stdin",)

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.parse_args = parser.parse_intermixed_args  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tool", help="the tool's name")
        parser.add_argument("arguments", nargs="*", metavar="key=value", help="an argument")
        parser.add_argument("--json", dest="json_arguments", help="the arguments as a JSON object")
        parser.add_argument("--task", action="store_true", help="run it as a background task")
        parser.add_argument(
            "--answer",
            action="append",
            default=[],
            metavar="key=json",
            help="answer a question: its key, or a field of its form (repeatable)",
        )
        parser.add_argument("--url", help="a live server's MCP endpoint (default: in-process)")
        parser.add_argument("--token", help="a bearer token to sign in with")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stderr.style_func = None  # progress and prompts: not styled as errors
        try:
            import httpx  # noqa: F401  (McpClient's transport, in-process too)
        except ImportError:
            raise CommandError(
                'mcp_tasks_call needs httpx: pip install "django-mcp-tasks[testing]"',
                returncode=FAILED,
            ) from None
        arguments = _json_object(options["json_arguments"])
        arguments.update(parse_pairs(options["arguments"], "argument"))
        bar = ProgressBar(self.stderr)
        stdin = options.get("stdin") or sys.stdin
        prompter = Prompter(parse_pairs(options["answer"], "--answer"), stdin, self.stderr, bar)
        if options["url"]:
            client = McpClient(options["url"], token=options["token"], timeout=None)
        else:
            client = McpClient.in_process(token=options["token"], timeout=None)
        with client:
            try:
                result = self.run(
                    client, options["tool"], arguments, options["task"], prompter, bar
                )
            except McpError as exc:
                raise CommandError(
                    str(exc), returncode=USAGE if exc.code == INVALID_PARAMS else FAILED
                ) from exc
            except (NoAnswerError, InputRequiredError) as exc:
                raise CommandError(f"unanswered: {exc}", returncode=USAGE) from exc
            except McpClientError as exc:
                raise CommandError(str(exc), returncode=FAILED) from exc
            except KeyboardInterrupt:
                bar.end()
                raise CommandError("interrupted", returncode=INTERRUPTED) from None
        bar.end()
        self.show(result)

    def run(
        self,
        client: McpClient,
        tool: str,
        arguments: dict[str, Any],
        task: bool,
        prompter: Prompter,
        bar: ProgressBar,
    ) -> dict[str, Any]:
        if not task:
            try:
                result = client.call(tool, arguments, answer=prompter, on_progress=bar.show)
            except McpError as exc:
                if exc.code != MISSING_CLIENT_CAPABILITY or not _wants_tasks(exc.data):
                    raise
            else:
                return self.follow_handles(client, tool, result, prompter, bar)
        try:
            run = client.start(tool, arguments, answer=prompter)
        except NotATaskError as exc:
            return exc.result
        return self.follow(run, prompter, bar)

    def follow_handles(
        self,
        client: McpClient,
        tool: str,
        result: dict[str, Any],
        prompter: Prompter,
        bar: ProgressBar,
    ) -> dict[str, Any]:
        """A task tool called plainly answers with a handle when its task outlives the call's
        window (README "Clients without tasks"): make the call each handle names until the
        result comes; Ctrl-C cancels the task."""
        step = _next_step(result)
        if step is None:
            return result
        task_id = step["arguments"].get("task_id")
        self.stderr.write(f"task {task_id} goes on in the background ({tool})")
        try:
            while step is not None:
                result = client.call(
                    step["tool"], step["arguments"], answer=prompter, on_progress=bar.show
                )
                step = _next_step(result)
        except KeyboardInterrupt:
            bar.end()
            client.call(get_config().COMPANION_TOOLS.cancel, {"task_id": task_id})
            self.stderr.write(f"task {task_id} cancelled")
            raise CommandError("interrupted", returncode=INTERRUPTED) from None
        return result

    def follow(self, run: TaskRun, prompter: Prompter, bar: ProgressBar) -> dict[str, Any]:
        """Wait for the task; a question nobody answers, or Ctrl-C, cancels it."""
        self.stderr.write(f"task {run.task_id} started ({run.tool})")
        try:
            task = run.wait(answer=prompter, on_progress=bar.show, timeout=None)
        except (KeyboardInterrupt, NoAnswerError, InputRequiredError):
            bar.end()
            run.cancel()
            self.stderr.write(f"task {run.task_id} cancelled")
            raise  # handle() turns it into its exit code
        bar.end()
        if task["status"] == "cancelled":
            raise CommandError(f"task {run.task_id} was cancelled", returncode=FAILED)
        try:
            return run.result
        except McpError as exc:
            raise CommandError(f"task {run.task_id} failed: {exc}", returncode=FAILED) from exc

    def show(self, result: dict[str, Any]) -> None:
        lines = [_block_text(block) for block in result.get("content") or []]
        if result.get("isError"):
            raise CommandError("\n".join(lines) or "the tool reported an error", returncode=FAILED)
        for line in lines:
            self.stdout.write(line)
        structured = result.get("structuredContent")
        if structured is not None and not _same_json(lines, structured):
            self.stdout.write(json.dumps(structured, indent=2, ensure_ascii=False))


def _json_object(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CommandError(f"--json is not JSON: {exc}", returncode=USAGE) from None
    if not isinstance(value, dict):
        raise CommandError("--json must be a JSON object", returncode=USAGE)
    return value


def _next_step(result: dict[str, Any]) -> dict[str, Any] | None:
    """The call a handle names (``structuredContent.next``), None for any other result."""
    structured = result.get("structuredContent")
    if result.get("isError") or not isinstance(structured, dict) or "taskId" not in structured:
        return None
    step = structured.get("next")
    return step if isinstance(step, dict) and isinstance(step.get("arguments"), dict) else None


def _wants_tasks(data: Any) -> bool:
    required = data.get("requiredCapabilities") if isinstance(data, dict) else None
    extensions = required.get("extensions") if isinstance(required, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def _same_json(lines: list[str], structured: Any) -> bool:
    """Whether the text already is the structured content (a model's JSON)."""
    try:
        return bool(json.loads("\n".join(lines)) == structured)
    except ValueError:
        return False


def _block_text(block: Mapping[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block.get("text", ""))
    resource = block.get("resource") or {}
    if "text" in resource:
        return str(resource["text"])
    mime = block.get("mimeType") or resource.get("mimeType") or ""
    return f"[{block.get('type')} {mime}]".replace(" ]", "]")

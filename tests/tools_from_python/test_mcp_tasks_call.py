"""``manage.py mcp_tasks_call``: the example project's tools called from the shell,
in-process (``call_command`` with stdin, stdout and stderr of our own); task tools on the
embedded worker."""

from __future__ import annotations

import io
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import OutputWrapper

from mcp_tasks.management.commands.mcp_tasks_call import ProgressBar, parse_pairs
from mcp_tasks.models import Task
from mcp_tasks.testing import Progress

tasks = pytest.mark.usefixtures("mcp_tasks_worker")


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    @property
    def task_id(self) -> str:
        found = re.search(r"^task (\S+) started", self.err, flags=re.MULTILINE)
        assert found, self.err
        return found[1]


def run(*args: str, stdin: InterruptedInput | str = "") -> Outcome:
    """The command's exit code (a ``CommandError``'s, else 0) and what it wrote."""
    out, err = io.StringIO(), io.StringIO()
    reader = io.StringIO(stdin) if isinstance(stdin, str) else stdin
    try:
        call_command("mcp_tasks_call", *args, stdin=reader, stdout=out, stderr=err)
    except CommandError as exc:
        return Outcome(exc.returncode, out.getvalue(), f"{err.getvalue()}CommandError: {exc}\n")
    return Outcome(0, out.getvalue(), err.getvalue())


class InterruptedInput:
    """stdin at which the user presses Ctrl-C."""

    def readline(self) -> str:
        raise KeyboardInterrupt

    def isatty(self) -> bool:
        return True


# -- plain calls ------------------------------------------------------------------------------


def test_plain_call_prints_the_text_and_the_structured_content() -> None:
    outcome = run("add", "a=1", "b=2")
    assert outcome.code == 0
    assert outcome.out == '3\n{\n  "result": 3\n}\n'


def test_without_httpx_it_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)  # as if it were not installed
    outcome = run("add", "a=1", "b=2")
    assert outcome.code == 1
    assert outcome.err == (
        'CommandError: mcp_tasks_call needs httpx: pip install "django-mcp-tasks[testing]"\n'
    )


def test_values_are_json_when_they_parse_else_strings() -> None:
    assert parse_pairs(["n=1", "s=hi", "l=[1, 2]", "t=true", "e="], "argument") == {
        "n": 1,
        "s": "hi",
        "l": [1, 2],
        "t": True,
        "e": "",
    }


def test_json_arguments_and_pairs_combine_and_pairs_win() -> None:
    outcome = run("forecast", "--json", '{"city": "Paris", "unit": "celsius"}', "unit=fahrenheit")
    assert outcome.code == 0
    forecast = json.loads(outcome.out)  # the model's JSON, printed once
    assert (forecast["city"], forecast["unit"]) == ("Paris", "fahrenheit")


def test_plain_call_shows_its_progress_on_stderr() -> None:
    outcome = run("slow_count", "n=2", "delay=0")
    assert outcome.out.startswith("counted to 2\n")
    assert outcome.err.splitlines() == [
        "[############............] 1/2 step 1",
        "[########################] 2/2 step 2",
    ]


def test_a_question_of_a_plain_call_is_prompted_on_stdin() -> None:
    outcome = run("greet_with_question", stdin="Ada\n")
    assert outcome.code == 0
    assert outcome.out.startswith("Hello, Ada!\n")
    assert "? What is your name?" in outcome.err


def test_a_prompt_can_decline() -> None:
    outcome = run("greet_with_question", stdin=":decline\n")
    assert outcome.out.startswith("Hello, whoever you are.\n")


def test_an_error_result_exits_1_with_its_text() -> None:
    outcome = run("test_error_handling")
    assert outcome.code == 1
    assert outcome.out == ""
    assert "CommandError: This tool intentionally returns an error for testing" in outcome.err


def test_an_unknown_tool_is_a_usage_error() -> None:
    outcome = run("no_such_tool")
    assert outcome.code == 2
    assert "Unknown tool: no_such_tool (JSON-RPC error -32602)" in outcome.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "a"], "argument 'a': write it as key=value"),
        (["add", "--json", "[1, 2]"], "--json must be a JSON object"),
        (["add", "--json", "{"], "--json is not JSON"),
        (["add", "--answer", "oops"], "--answer 'oops': write it as key=value"),
    ],
)
def test_malformed_arguments_are_usage_errors(args: list[str], message: str) -> None:
    outcome = run(*args)
    assert outcome.code == 2
    assert message in outcome.err


# -- tasks ------------------------------------------------------------------------------------


@tasks
def test_task_question_answered_by_the_answer_option() -> None:
    outcome = run("long_report", "quarter=Q3", "--task", "--answer", "value=true")
    assert outcome.code == 0, outcome.err
    assert outcome.out.startswith("Report for Q3: 3 sections with drafts.\n")
    assert f"task {outcome.task_id} started (long_report)" in outcome.err
    assert "[input_required] Include draft figures?" in outcome.err
    assert "[completed] Completed" in outcome.err


@tasks
def test_task_question_prompted_on_stdin_until_the_answer_fits() -> None:
    outcome = run("long_report", "quarter=Q3", "--task", stdin="maybe\nn\n")
    assert outcome.code == 0, outcome.err
    assert outcome.out.startswith("Report for Q3: 3 sections.\n")
    assert "  [y/n]: maybe\n  answer y or n\n  [y/n]: n\n" in outcome.err


@tasks
def test_each_field_of_a_form_is_prompted_by_its_type() -> None:
    outcome = run("multi_input", "--task", stdin="Bob\nyes\n")
    assert outcome.code == 0, outcome.err
    assert outcome.out.startswith("multi_input: name=Bob, confirm=True\n")
    assert "  name: Bob\n" in outcome.err
    assert "  confirm [y/n]: yes\n" in outcome.err


@tasks
def test_a_task_only_tool_that_refuses_plain_calls_runs_as_a_task() -> None:
    outcome = run("failing_job")  # TaskConfig(for_all_clients=False): -32021, then a task
    assert f"task {outcome.task_id} started (failing_job)" in outcome.err
    assert outcome.code == 1
    assert "CommandError: failing_job failed on purpose" in outcome.err


@tasks
def test_a_handle_is_followed_to_the_result(settings: Any) -> None:
    settings.MCP_TASKS = {**settings.MCP_TASKS, "INLINE_WINDOW": 0, "CHECK_WAIT": 0.2}
    outcome = run("slow_compute", "seconds=0.6", "label=followed")
    assert outcome.code == 0, outcome.err
    assert re.search(r"^task \S+ goes on in the background \(slow_compute\)$", outcome.err, re.M)
    assert outcome.out.startswith("slow_compute followed finished after 0.6s\n")


@tasks
def test_a_failed_task_exits_1_with_its_error() -> None:
    outcome = run("protocol_error_job", "--task")
    assert outcome.code == 1
    assert "protocol_error_job: simulated internal failure (JSON-RPC error -32603)" in outcome.err


@tasks
def test_questions_before_the_task_are_prompted_too() -> None:
    outcome = run("test_tool_with_task", stdin="Ada\n")
    assert outcome.code == 0, outcome.err
    assert outcome.out.startswith("Hello from the background, Ada!\n")


@pytest.mark.cancel
@tasks
def test_an_unanswered_question_cancels_the_task_and_exits_2() -> None:
    outcome = run("long_report", "quarter=Q3", "--task")
    assert outcome.code == 2
    assert "unanswered: 'Include draft figures?': stdin ended; pass --answer value=…" in outcome.err
    assert Task.objects.get(pk=outcome.task_id).status == "cancelled"


@pytest.mark.cancel
@tasks
def test_ctrl_c_cancels_the_task_and_exits_130() -> None:
    outcome = run("long_report", "quarter=Q3", "--task", stdin=InterruptedInput())
    assert outcome.code == 130
    assert f"task {outcome.task_id} cancelled" in outcome.err
    assert Task.objects.get(pk=outcome.task_id).status == "cancelled"


# -- the progress bar -------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_is_redrawn_in_place_on_a_terminal() -> None:
    screen = Terminal()
    bar = ProgressBar(OutputWrapper(screen))
    bar.show(Progress("working", "section 1 of 4 is long", 1, 4))
    bar.show(Progress("working", "section 2", 2, 4))
    bar.end()
    first = "[######..................] 1/4 section 1 of 4 is long"
    second = "[############............] 2/4 section 2".ljust(len(first))
    assert screen.getvalue() == f"\r{first}\r{second}\n"


def test_the_bar_shows_the_status_when_there_are_no_numbers() -> None:
    assert ProgressBar.render(Progress("input_required", "Proceed?")) == "[input_required] Proceed?"

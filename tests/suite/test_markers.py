"""The suite's markers: every test of task or request cancellation carries ``cancel``, so
``pytest -m cancel`` runs all of them wherever they live.

The rule is read from the names: a collected test whose name (parameters included) says
``cancel`` must be marked, unless :data:`NOT_CANCELLATION` lists it. The check sees every
test however this run was selected: it reads this session's collection (``conftest.py``
keeps it before ``-m`` or ``-k`` set tests aside) when the session collected the whole suite,
and collects the suite in a subprocess otherwise.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import COLLECTED, ROOT

#: Tests named for a ``cancel`` that is not the cancellation of a task or a request.
NOT_CANCELLATION = {
    # An elicitation answered with the action "cancel" (or reported to the tool as one): the
    # user's answer to a question, not the cancellation of the task or request that asked it.
    "tests/admin/test_admin.py::test_answer_page_renders_the_schema_form_with_accept_decline_and_cancel",
    "tests/admin/test_admin.py::test_decline_and_cancel_need_no_valid_form",
    "tests/clients/test_sdk_client.py::test_elicitation_cancel_is_reported_to_the_tool",
    "tests/questions/test_background_input.py::test_question_timeout_gives_the_tool_a_cancelled_elicitation",
    "tests/questions/test_context_background_task.py::TestElicitFailFast::test_elicit_returns_cancel_when_notification_push_fails",
    "tests/questions/test_elicitation_schemas.py::test_decline_and_cancel_are_parsed",
    "tests/questions/test_elicitation_schemas.py::test_unknown_action_counts_as_cancel",
    # This check itself: it is about the marker, not about a cancellation.
    "tests/suite/test_markers.py::test_every_test_named_for_a_cancel_carries_the_cancel_marker",
    # asyncio's cancellation of a channel-layer read inside the layer (why RedisChannelLayer
    # loses a message, system check W004): no task or request is cancelled.
    "tests/transport/test_channel_layer_choice.py::test_core_layer_loses_the_message_when_the_lock_holder_is_cancelled",
}


def whole_suite_collected(config: pytest.Config) -> bool:
    """Whether this session collected every test (it may still run only some)."""
    return (
        [Path(arg).resolve() for arg in config.args] in ([ROOT / "tests"], [ROOT])
        and not config.getoption("ignore")
        and not config.getoption("ignore_glob")
    )


@functools.cache
def collected_in_a_subprocess() -> list[str]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests",
            "-m",
            "not cancel",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


@pytest.fixture
def unmarked(request: pytest.FixtureRequest) -> list[str]:
    """The node ids of the suite's tests without the ``cancel`` marker: from this session's
    collection when it collected the whole suite, else from a collection of its own."""
    config = request.config
    if whole_suite_collected(config):
        return [
            node for node, markers in config.stash[COLLECTED].items() if "cancel" not in markers
        ]
    return collected_in_a_subprocess()


def without_parameters(node_id: str) -> str:
    return re.sub(r"\[[^\]]*\]$", "", node_id)


def test_every_test_named_for_a_cancel_carries_the_cancel_marker(unmarked: list[str]) -> None:
    named = [
        node_id
        for node_id in unmarked
        if "cancel" in node_id.rsplit("::", 1)[-1].lower()
        and node_id not in NOT_CANCELLATION
        and without_parameters(node_id) not in NOT_CANCELLATION
    ]
    assert not named, "add @pytest.mark.cancel (or list them in NOT_CANCELLATION):\n" + "\n".join(
        named
    )


def test_the_listed_exceptions_exist_and_are_not_marked(unmarked: list[str]) -> None:
    names = set(unmarked) | {without_parameters(node_id) for node_id in unmarked}
    assert sorted(NOT_CANCELLATION - names) == []

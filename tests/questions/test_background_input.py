"""Input during a background task: ``ctx.elicit`` / ``ctx.sample`` / ``ctx.list_roots`` from an
rq worker, without pinning it (``shared/design.md``, "Input during a task"; issue 4).

- the hold window: answered in time, the same job goes on; not answered, the job ends, the
  worker is free and the task stays ``input_required``; answered later, a new job resumes the
  task and replays the recorded answers (a different question on resume fails the task);
- the question timeout (``INPUT_TIMEOUT``): the tool gets ``CancelledElicitation`` (sampling:
  an error) and goes on;
- the one answer path (``service.answer``): first answer wins under concurrency; answers that
  do not fit the question are refused and nothing is stored;
- waiting holds no worker: 200 tasks parked on unanswered questions with one worker, an
  unrelated task still completes, then every parked task completes with its own answer.

The tests run on live servers and real ``manage.py rqworker`` processes: one server and one
worker per set of settings (hold window, question timeout), shared by the tests that use
them, each pair on a private Redis (``tests.support.worker_fixtures``), with
``tests.support.live_settings``. Clients speak the modern tasks extension over real HTTP
(``tests.support.task_driver``), and the admin's answers go through the task service in
another process, as the Django admin calls it. Nothing is mocked, and no assertion
depends on wall-clock time (timeouts are only safety nets).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, LiveServer
from tests.support.results import task_text_of as text_of
from tests.support.task_driver import (
    TaskDriver,
    django_shell,
    gather_limited,
    structured_of,
    task_capabilities,
    wait_released,
)
from tests.support.worker_fixtures import TaskStack, module_redis, module_task_stack

pytestmark = [pytest.mark.live, pytest.mark.redis]

#: The hold window of the tests where nobody answers in time (seconds).
SHORT_HOLD = "0.2"
#: The hold window of the tests where the answer must reach the same job.
LONG_HOLD = "120"
#: How many tasks the no-pinning proof parks on unanswered questions (issue 4, §5).
PARKED = 200


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=50)) as client:
        yield client


@pytest.fixture(scope="module")
def stacks(request: pytest.FixtureRequest) -> Iterator[Callable[..., TaskStack]]:
    """``stacks(hold=..., input_timeout=None, maintenance=600)``: the module's live server and
    ONE rq worker with those settings, started on first use and shared by the module's tests
    that ask for the same settings, each on a Redis of its own (rq's queues carry no prefix:
    a worker would take the jobs of another stack's server).

    Housekeeping is slow by default, so tests that run it themselves don't race the worker's
    own run; the idle-worker test shortens it. Every test ends its tasks or leaves them
    parked (no job holds the worker), so the next test's tasks never wait behind them."""
    started: dict[tuple[str, str | None, float], TaskStack] = {}
    with contextlib.ExitStack() as cleanup:

        def get(
            *, hold: str, input_timeout: str | None = None, maintenance: float = 600
        ) -> TaskStack:
            settings = (hold, input_timeout, maintenance)
            if settings not in started:
                label = f"hold {hold}, input timeout {input_timeout}, housekeeping {maintenance}"
                redis = cleanup.enter_context(
                    contextlib.contextmanager(module_redis)(request, f"{label}: redis")
                )
                env = {
                    "MCP_TASKS_TEST_INPUT_HOLD_WINDOW": hold,
                    "MCP_TASKS_TEST_MAINTENANCE_INTERVAL": str(maintenance),
                }
                if input_timeout is not None:
                    env["MCP_TASKS_TEST_INPUT_TIMEOUT"] = input_timeout
                started[settings] = cleanup.enter_context(
                    contextlib.contextmanager(module_task_stack)(request, redis, env, label=label)
                )
            return started[settings]

        yield get


@pytest.fixture
def stack(
    request: pytest.FixtureRequest, stacks: Callable[..., TaskStack]
) -> Callable[..., LiveServer]:
    """``stack(hold=..., input_timeout=None, maintenance=600)``: the server of
    :func:`stacks` for those settings; its and its worker's output go to a failed test's
    report."""

    def start(**settings: Any) -> LiveServer:
        found = stacks(**settings)
        found.attach(request)
        return found.server

    return start


#: The workers' housekeeping period in these tests (TASK_MAINTENANCE_INTERVAL), seconds.
MAINTENANCE_INTERVAL = 2


def client_for(
    http: httpx.AsyncClient, server: LiveServer, *kinds: str, token: str | None = None
) -> TaskDriver:
    return TaskDriver(http, server.mcp_url, capabilities=task_capabilities(*kinds), token=token)


def accept(value: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"value": value}}


def is_ack(result: dict[str, Any]) -> bool:
    """An empty ``tasks/update`` result (modern results also carry resultType and _meta)."""
    return (
        set(result) <= {"resultType", "_meta"}
        and result.get("resultType", "complete") == "complete"
    )


def only_key(task: dict[str, Any]) -> str:
    keys = [str(key) for key in task["inputRequests"]]
    assert len(keys) == 1, task
    return keys[0]


# -- the task service and rows, from another process (as the admin reaches them) -----------

_ROWS = """
from mcp_tasks.core import task_contract
from mcp_tasks.models import InputRequest, Task

def task_row(task_id):
    return Task.objects.filter(pk=task_id).values("status", "waiting_worker", "runs", "status_message").get()

def question_rows(task_id):
    return list(
        InputRequest.objects.filter(task_id=task_id)
        .order_by("sequence")
        .values("key", "sequence", "status", "response", "answered_by")
    )
"""


async def rows(server: LiveServer, task_id: str) -> dict[str, Any]:
    """The task row and its question rows."""
    return await django_shell(  # type: ignore[no-any-return]
        server,
        _ROWS + "result = {'task': task_row(task_id), 'questions': question_rows(task_id)}",
        task_id=task_id,
    )


async def run_cleanup(server: LiveServer) -> str:
    """``manage.py mcp_tasks_cleanup`` (the housekeeping cron runs) with the server's settings."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "manage.py",
        "mcp_tasks_cleanup",
        cwd=ROOT,
        env=server.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode(errors="replace")
    return output.decode(errors="replace")


async def expire_questions(server: LiveServer, count: int, timeout: float = 60.0) -> None:
    """Run the housekeeping until it has timed out ``count`` questions."""
    expired = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while expired < count:
        output = await run_cleanup(server)
        for line in output.splitlines():
            if line.startswith("questions timed out:"):
                expired += int(line.rsplit(":", 1)[1])
        assert loop.time() < deadline, f"only {expired} of {count} questions timed out"
        if expired < count:
            await asyncio.sleep(0.2)


# -- the hold window ---------------------------------------------------------------------------


async def test_answer_within_the_hold_window_continues_the_same_job(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient, tmp_path: Path
) -> None:
    server = stack(hold=LONG_HOLD)
    client = client_for(http, server, "elicitation")
    task_id = await client.call("bg_ask_number", {"n": 1, "marker_dir": str(tmp_path)})
    waiting = await client.wait_for_input(task_id)
    assert waiting["statusMessage"] == "Value for task 1?"
    assert is_ack(await client.update(task_id, {only_key(waiting): accept(41)}))
    outcome = structured_of(await client.run(task_id))
    assert outcome["value"] == 41
    # The same work-horse process asked and went on; the code before the question ran once.
    assert outcome["pid_after"] == outcome["pid_before"]
    assert outcome["runs_seen"] == 1
    state = await rows(server, task_id)
    assert state["task"]["runs"] == 0  # no resume job was queued
    assert [(q["status"], q["answered_by"]) for q in state["questions"]] == [("answered", "client")]


async def test_unanswered_question_ends_the_job_and_frees_the_worker(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient, tmp_path: Path
) -> None:
    server = stack(hold=SHORT_HOLD)
    client = client_for(http, server, "elicitation")
    task_id = await client.call("bg_ask_number", {"n": 2, "marker_dir": str(tmp_path)})
    key = only_key(await client.wait_for_input(task_id))
    await wait_released(server, [task_id])
    # The only worker is free: an unrelated task runs to the end meanwhile…
    other = await client.call("seed_simple_tool")
    assert text_of(await client.run(other)) == "done"
    # …while the first still waits for the same question, announced as its status message.
    task = await client.get(task_id)
    assert task["status"] == "input_required"
    assert task["statusMessage"] == "Value for task 2?"
    assert list(task["inputRequests"]) == [key]
    assert task["inputRequests"][key]["method"] == "elicitation/create"
    assert (tmp_path / "before").read_text().count("\n") == 1  # not re-run while waiting


async def test_answer_after_release_resumes_on_a_new_job_with_replay(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient, tmp_path: Path
) -> None:
    server = stack(hold=SHORT_HOLD)
    client = client_for(http, server, "elicitation")
    task_id = await client.call("bg_two_questions", {"marker_dir": str(tmp_path)})
    first = only_key(await client.wait_for_input(task_id))
    await wait_released(server, [task_id])
    await client.update(task_id, {first: accept("Ada")})
    # A new job re-runs the tool: the first question returns its recorded answer at once and
    # the tool goes on to the second, which nobody answers in time either.
    waiting = await client.wait_for(
        task_id, lambda t: bool(set(t.get("inputRequests") or {}) - {first})
    )
    second = only_key(waiting)
    assert waiting["statusMessage"] == "Last name?"
    await wait_released(server, [task_id])
    await client.update(task_id, {second: accept("Lovelace")})
    outcome = structured_of(await client.run(task_id))
    assert outcome == {"first": "Ada", "second": "Lovelace", "runs_seen": 3}
    pids = (tmp_path / "before").read_text().split()
    assert len(pids) == 3 and len(set(pids)) == 1  # three jobs, all in the one worker process
    state = await rows(server, task_id)
    assert state["task"]["runs"] == 2
    # Each question was recorded once (replays found the recorded ones), and answered once.
    assert [(q["key"], q["status"], q["response"]) for q in state["questions"]] == [
        (first, "answered", accept("Ada")),
        (second, "answered", accept("Lovelace")),
    ]


async def test_resumed_tool_asking_a_different_question_fails_the_task(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient, tmp_path: Path
) -> None:
    server = stack(hold=SHORT_HOLD)
    client = client_for(http, server, "elicitation")
    task_id = await client.call("bg_changing_question", {"marker_dir": str(tmp_path)})
    waiting = await client.wait_for_input(task_id)
    assert waiting["statusMessage"] == "Question from run 1?"
    await wait_released(server, [task_id])
    await client.update(task_id, {only_key(waiting): accept("yes")})
    task = await client.run(task_id)
    assert task["status"] == "failed"
    message = task["error"]["message"]
    assert "Question from run 1?" in message
    assert "Question from run 2?" in message
    assert "same questions in the same order" in message


async def test_question_of_a_kind_the_client_did_not_declare_is_an_error_for_the_tool(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = stack(hold=SHORT_HOLD)
    client = client_for(http, server)  # tasks extension only: no elicitation capability
    task = await client.run(await client.call("seed_ask_name"))
    assert task["status"] == "completed"
    assert task["result"]["isError"] is True
    assert "elicitation" in text_of(task)


async def test_list_roots_in_a_task_returns_the_client_roots(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = stack(hold=LONG_HOLD)
    client = client_for(http, server, "roots")
    roots = {"roots": [{"uri": "file:///srv/project", "name": "project"}]}
    task = await client.run(await client.call("bg_roots"), {"roots/list": lambda params: roots})
    assert structured_of(task) == {"result": ["file:///srv/project"]}


# -- the question timeout ------------------------------------------------------------------


async def test_question_timeout_gives_the_tool_a_cancelled_elicitation(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = stack(hold=SHORT_HOLD, input_timeout="1")
    client = client_for(http, server, "elicitation")
    task_id = await client.call("bg_ask_or_cancel")
    key = only_key(await client.wait_for_input(task_id))
    await wait_released(server, [task_id])
    await expire_questions(server, 1)
    assert text_of(await client.run(task_id)) == "cancelled"
    # A late answer is refused: the question no longer waits.
    late = await django_shell(
        server,
        "from mcp_tasks.tasks.state import service\n"
        "result = service.answer(task_id, key, {'action': 'accept', 'content': {'value': 'late'}},"
        " principal_scope=None, answered_by='admin')",
        task_id=task_id,
        key=key,
    )
    assert late is False
    assert [q["status"] for q in (await rows(server, task_id))["questions"]] == ["expired"]


async def test_idle_worker_times_out_questions_without_a_cron(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    """With only ``manage.py rqworker`` running (no ``mcp_tasks_cleanup`` cron), the worker's
    own housekeeping (every TASK_MAINTENANCE_INTERVAL seconds) times the question out.

    The job lets go of the task after the 0.2 s hold window, before the question's 1 s
    timeout: only the housekeeping can expire it. (Not waited for: the parked state lasts
    at most a housekeeping period, shorter than a process start under load.)"""
    server = stack(hold=SHORT_HOLD, input_timeout="1", maintenance=MAINTENANCE_INTERVAL)
    client = client_for(http, server, "elicitation")
    task_id = await client.call("bg_ask_or_cancel")
    await client.wait_for_input(task_id)
    task = await client.run(task_id, timeout=2 * MAINTENANCE_INTERVAL + 30)
    assert text_of(task) == "cancelled"
    question = await django_shell(
        server,
        """
        from mcp_tasks.models import InputRequest
        row = InputRequest.objects.get(task_id=task_id)
        result = [row.status, row.answered_by]
        """,
        task_id=task_id,
    )
    assert question == ["expired", ""]


async def test_sampling_timeout_is_an_error_for_the_tool(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = stack(hold=SHORT_HOLD, input_timeout="1")
    client = client_for(http, server, "sampling")
    task_id = await client.call("bg_sample_once")
    waiting = await client.wait_for_input(task_id)
    assert waiting["inputRequests"][only_key(waiting)]["method"] == "sampling/createMessage"
    await wait_released(server, [task_id])
    await expire_questions(server, 1)
    task = await client.run(task_id)
    assert task["status"] == "completed"
    assert task["result"]["isError"] is True
    assert "timed out" in text_of(task)


# -- the one answer path -------------------------------------------------------------------


async def test_first_answer_wins_among_concurrent_admin_answers(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = stack(hold=LONG_HOLD)
    client = client_for(http, server, "elicitation")
    task_id = await client.call("bg_ask_number", {"n": 7})
    key = only_key(await client.wait_for_input(task_id))
    outcome = await django_shell(
        server,
        """
        import threading
        from django.db import connection
        from mcp_tasks.tasks.state import service

        barrier = threading.Barrier(8)
        accepted = [None] * 8

        def answer(i):
            try:
                barrier.wait()
                accepted[i] = service.answer(
                    task_id, key, {"action": "accept", "content": {"value": 100 + i}},
                    principal_scope=None, answered_by=f"admin-{i}",
                )
            finally:
                connection.close()

        threads = [threading.Thread(target=answer, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        result = accepted
        """,
        task_id=task_id,
        key=key,
    )
    assert sorted(outcome) == [False] * 7 + [True]
    winner = outcome.index(True)
    assert structured_of(await client.run(task_id))["value"] == 100 + winner
    (question,) = (await rows(server, task_id))["questions"]
    assert question["answered_by"] == f"admin-{winner}"
    assert question["response"] == accept(100 + winner)


async def test_first_answer_wins_among_concurrent_tasks_update(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = stack(hold=LONG_HOLD)
    client = client_for(http, server, "elicitation")
    task_id = await client.call("bg_ask_number", {"n": 8})
    key = only_key(await client.wait_for_input(task_id))
    acks = await asyncio.gather(
        *(client.update(task_id, {key: accept(200 + i)}) for i in range(10))
    )
    assert all(is_ack(ack) for ack in acks)
    value = structured_of(await client.run(task_id))["value"]
    assert 200 <= value < 210
    (question,) = (await rows(server, task_id))["questions"]
    assert question["response"] == accept(value)  # the answer stored is the one the tool got


async def test_answers_that_do_not_fit_the_question_are_refused_and_nothing_is_stored(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = stack(hold=LONG_HOLD)
    client = client_for(http, server, "elicitation")
    task_id = await client.call("seed_get_user_info")  # asks for {name: str, age: int}
    key = only_key(await client.wait_for_input(task_id))
    outcome = await django_shell(
        server,
        _ROWS
        + textwrap.dedent("""
        from mcp_tasks.tasks.state import service

        invalid = [
            {"action": "accept", "content": {"name": "Alice", "age": "thirty"}},
            {"action": "accept", "content": {"name": "Alice"}},
            {"action": "maybe"},
            "accept",
        ]
        refused = []
        for response in invalid:
            try:
                service.answer(task_id, key, response, principal_scope=None, answered_by="admin")
            except task_contract.InvalidAnswer as exc:
                refused.append(str(exc))
        result = {"refused": refused, "questions": question_rows(task_id), "task": task_row(task_id)}
        """),
        task_id=task_id,
        key=key,
    )
    assert len(outcome["refused"]) == 4
    assert "age" in outcome["refused"][0]
    assert "age" in outcome["refused"][1]
    assert [(q["status"], q["response"], q["answered_by"]) for q in outcome["questions"]] == [
        ("pending", None, "")
    ]
    assert outcome["task"]["status"] == "input_required"
    # Over the wire, an unusable answer (and an unknown key) is ignored: the question still waits.
    wrong = {"action": "accept", "content": {"name": 5, "age": 30}}
    assert is_ack(await client.update(task_id, {key: wrong, "no-such-key": accept(1)}))
    still = await client.get(task_id)
    assert still["status"] == "input_required"
    assert list(still["inputRequests"]) == [key]
    assert [q["status"] for q in (await rows(server, task_id))["questions"]] == ["pending"]
    # A fitting answer is taken.
    task = await client.run(
        task_id,
        {
            "elicitation/create": lambda p: {
                "action": "accept",
                "content": {"name": "Alice", "age": 30},
            }
        },
    )
    assert text_of(task) == "Alice is 30"


# -- waiting holds no worker (issue 4, §5) ---------------------------------------------------


async def test_parked_tasks_hold_no_worker(
    stack: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    """200 tasks wait for answers with ONE worker; an unrelated task still completes; then all
    200 are answered — half through ``tasks/update``, half through the task service as the
    admin does — and each completes with its own answer."""
    server = stack(hold=SHORT_HOLD)
    client = client_for(http, server, "elicitation")
    numbers = list(range(PARKED))
    task_ids = await gather_limited(
        10, [functools.partial(client.call, "bg_ask_number", {"n": n}) for n in numbers]
    )
    await wait_released(server, task_ids, timeout=1800)

    other = await client.call("seed_simple_tool")
    assert text_of(await client.run(other, timeout=600)) == "done"
    parked = await django_shell(
        server,
        "from mcp_tasks.models import Task\n"
        "result = Task.objects.filter(pk__in=task_ids, status='input_required').count()",
        task_ids=task_ids,
    )
    assert parked == PARKED

    async def key_of(task_id: str) -> str:
        return only_key(await client.get(task_id))

    keys = await gather_limited(10, [functools.partial(key_of, t) for t in task_ids])
    by_client = [(n, t, k) for n, t, k in zip(numbers, task_ids, keys, strict=True) if n % 2 == 0]
    by_admin = [(n, t, k) for n, t, k in zip(numbers, task_ids, keys, strict=True) if n % 2 == 1]
    acks = await gather_limited(
        10,
        [functools.partial(client.update, t, {k: accept(n * 3 + 1)}) for n, t, k in by_client],
    )
    assert all(is_ack(ack) for ack in acks)
    accepted = await django_shell(
        server,
        """
        from django.contrib.auth import get_user_model
        from mcp_tasks.tasks.state import service

        staff, _ = get_user_model().objects.get_or_create(username="task-admin", defaults={"is_staff": True})
        result = [
            service.answer(task_id, key, {"action": "accept", "content": {"value": n * 3 + 1}},
                           principal_scope=None, answered_by="admin:task-admin", user=staff)
            for n, task_id, key in answers
        ]
        """,
        answers=by_admin,
    )
    assert accepted == [True] * len(by_admin)

    finished = await django_shell(
        server,
        """
        import time
        from mcp_tasks.models import Task
        deadline = time.monotonic() + 1800
        while Task.objects.filter(pk__in=task_ids, status__in=["completed", "failed", "cancelled"]).count() < len(task_ids):
            assert time.monotonic() < deadline, "the answered tasks did not all finish"
            time.sleep(0.2)
        result = {task_id: [status, result] for task_id, status, result in Task.objects.filter(pk__in=task_ids).values_list("id", "status", "result")}
        """,
        timeout=1900,
        task_ids=task_ids,
    )
    for n, task_id in zip(numbers, task_ids, strict=True):
        status, result = finished[task_id]
        assert status == "completed", (n, status, result)
        assert result["structuredContent"]["n"] == n
        assert result["structuredContent"]["value"] == n * 3 + 1, (n, result)
    answered_by = await django_shell(
        server,
        "from mcp_tasks.models import InputRequest\n"
        "result = {task_id: by for task_id, by in InputRequest.objects.filter(task_id__in=task_ids).values_list('task_id', 'answered_by')}",
        task_ids=task_ids,
    )
    assert {answered_by[t] for _, t, _ in by_client} == {"client"}
    assert {answered_by[t] for _, t, _ in by_admin} == {"admin:task-admin"}

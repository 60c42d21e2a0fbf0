"""The live admin in real browsers: headless Chromium (Selenium) against a live daphne
server whose worker runs the tasks (embedded mode: a TaskWorker thread in the server).

A raw MCP client starts tasks; the admin pages open in the browser show them, their
progress and their questions without a reload, and an answer given in a second browser
session makes the question disappear from the first. A server without the WebSocket falls
back to refreshing the pages periodically. Screenshots go to ``docs/screenshots/``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import LiveServer
from tests.support.browser import (
    by,
    create_staff,
    finished,
    log_in,
    page_text,
    screenshot,
    start_chromium,
    start_task,
    submit,
    wait_for,
    waiting_on,
)
from tests.support.live import attach_server_output, start_module_server

pytestmark = pytest.mark.live

STAFF = {
    "olga": ["view_task", "change_task", "answer_inputrequest"],
    "otto": ["view_task", "answer_inputrequest"],
    "nina": [],
}
LIVE_PATH = "/mcp-tasks/admin-live/"


def _server(request: pytest.FixtureRequest, env: dict[str, str], label: str) -> Iterator[Any]:
    for live in start_module_server(request, env, label=label):
        create_staff(live, STAFF)
        yield live


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The example project with the live admin's WebSocket routed."""
    yield from _server(request, {"MCP_TASKS_TEST_ADMIN_LIVE_PATH": LIVE_PATH}, "live admin server")


@pytest.fixture(scope="module")
def server_without_websocket(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    env = {"MCP_TASKS_TEST_ADMIN_LIVE_PATH": "none", "MCP_TASKS_TEST_ADMIN_REFRESH_INTERVAL": "1"}
    yield from _server(request, env, "admin server without WebSocket")


@pytest.fixture(scope="module")
def browsers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Any]]:
    """Starts headless Chromium instances, each with its own profile (its own session)."""
    started: list[Any] = []

    def start() -> Any:
        started.append(start_chromium(tmp_path_factory.mktemp("chromium-profile")))
        return started[-1]

    try:
        yield start
    finally:
        for driver in started:
            driver.quit()


@pytest.fixture(scope="module")
def browser(browsers: Callable[[], Any]) -> Any:
    return browsers()


@pytest.fixture(scope="module")
def second_browser(browsers: Callable[[], Any]) -> Any:
    return browsers()


# -- helpers ----------------------------------------------------------------------------------


def open_live(browser: Any, url: str, state: str = "live") -> None:
    """Open ``url`` and wait until its live script runs (``live``: over the WebSocket);
    mark the document so that a reload would show. A page without the live script (an
    error page, the login page) fails the wait with its text."""
    browser.get(url)
    wait_for(
        browser,
        lambda b: (
            b.execute_script("return document.getElementById('mcp-live')?.dataset.state") == state
        ),
        f"{state} on {url}",
    )
    browser.execute_script("window.mcpNotReloaded = true")


def not_reloaded(browser: Any) -> bool:
    return bool(browser.execute_script("return window.mcpNotReloaded === true"))


def row_of(browser: Any, task_id: str) -> Any:
    return browser.find_element(by("XPATH"), f"//tr[.//*[@data-task-id={task_id!r}]]")


def progress_of(browser: Any, task_id: str) -> float:
    bars = row_of(browser, task_id).find_elements(by("CSS_SELECTOR"), ".mcp-progress")
    return float(bars[0].get_attribute("aria-valuenow")) if bars else -1.0


# -- tests ------------------------------------------------------------------------------------


def test_the_task_list_shows_new_tasks_progress_and_questions_without_a_reload(
    request: pytest.FixtureRequest, server: LiveServer, browser: Any
) -> None:
    attach_server_output(request, server)
    log_in(browser, server, "olga")
    open_live(browser, f"{server.url}/admin/mcp_tasks/task/")

    export = start_task(server, "slow_compute", {"seconds": 8, "label": "live export"})
    report = start_task(server, "long_report", {"quarter": "Q4"})
    wait_for(browser, lambda b: export[:8] in page_text(b), "showed the new export task")
    first = wait_for(browser, lambda b: progress_of(b, export) > 0 and progress_of(b, export), "")
    wait_for(browser, lambda b: progress_of(b, export) > first, "moved the progress bar")
    wait_for(
        browser,
        lambda b: "Input required" in row_of(b, report).text,
        "showed the report waiting for an answer",
    )
    wait_for(
        browser,
        lambda b: "waiting questions (1)" in page_text(b).lower(),
        "counted the waiting question",
    )
    screenshot(browser, "live-task-list")
    assert not_reloaded(browser)
    assert finished(server, export)["status"] == "completed"
    wait_for(browser, lambda b: "Completed" in row_of(b, export).text, "showed the export done")


def test_a_question_answered_in_another_session_leaves_the_waiting_list(
    request: pytest.FixtureRequest, server: LiveServer, browser: Any, second_browser: Any
) -> None:
    attach_server_output(request, server)
    log_in(browser, server, "olga")
    open_live(browser, f"{server.url}/admin/mcp_tasks/inputrequest/")
    task_id = start_task(server, "confirm_delete", {"filename": "live.xlsx"})
    wait_for(browser, lambda b: "Delete live.xlsx?" in page_text(b), "showed the new question")
    screenshot(browser, "live-waiting-questions")

    log_in(second_browser, server, "otto")
    second_browser.get(f"{server.url}/admin/mcp_tasks/task/{task_id}/change/")
    assert "Delete live.xlsx?" in page_text(second_browser)  # answered on the task page itself
    second_browser.find_element(by("ID"), "id_answer-confirm").click()
    screenshot(second_browser, "task-page-answer")
    submit(second_browser, second_browser.find_element(by("NAME"), "_accept"))
    assert "Answer sent: the task resumes." in page_text(second_browser)

    wait_for(
        browser,
        lambda b: "Delete live.xlsx?" not in page_text(b),
        "removed the question answered elsewhere",
    )
    assert not_reloaded(browser)
    assert finished(server, task_id)["status"] == "completed"


def test_a_task_page_follows_its_task(
    request: pytest.FixtureRequest, server: LiveServer, browser: Any
) -> None:
    attach_server_output(request, server)
    log_in(browser, server, "olga")
    task_id = start_task(server, "long_report", {"quarter": "Q1", "steps": 3})
    waiting_on(server, task_id)
    open_live(browser, f"{server.url}/admin/mcp_tasks/task/{task_id}/change/")
    assert browser.find_elements(by("ID"), "answer_form")
    browser.find_element(by("ID"), "id_answer-value").click()
    submit(browser, browser.find_element(by("NAME"), "_accept"))
    open_live(browser, browser.current_url)
    wait_for(
        browser,
        lambda b: "Report for Q1: 3 sections with drafts." in page_text(b),
        "showed the result",
    )
    assert not browser.find_elements(by("ID"), "answer_form")
    assert not_reloaded(browser)


def test_staff_without_the_permission_see_nothing_of_it(
    request: pytest.FixtureRequest, server: LiveServer, browser: Any
) -> None:
    attach_server_output(request, server)
    start_task(server, "confirm_delete", {"filename": "secret.xlsx"})
    log_in(browser, server, "nina")
    assert "waiting questions" not in page_text(browser).lower()  # no count in the header
    browser.get(f"{server.url}/admin/mcp_tasks/task/")
    assert "secret.xlsx" not in browser.page_source
    assert "403" in browser.title or "Forbidden" in page_text(browser)
    browser.get(f"{server.url}/admin/")
    opened = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const socket = new WebSocket(`ws://${location.host}${arguments[0]}`);
        socket.onopen = () => done("opened");
        socket.onmessage = (m) => done("message " + m.data);
        socket.onclose = (event) => done("closed");
        """,
        LIVE_PATH,
    )
    assert opened == "closed"


def test_without_the_websocket_pages_refresh_periodically(
    request: pytest.FixtureRequest, server_without_websocket: LiveServer, browser: Any
) -> None:
    server = server_without_websocket
    attach_server_output(request, server)
    log_in(browser, server, "olga")
    open_live(browser, f"{server.url}/admin/mcp_tasks/task/", state="polling")
    task_id = start_task(server, "confirm_delete", {"filename": "polled.xlsx"})
    wait_for(browser, lambda b: task_id[:8] in page_text(b), "showed the new task by polling")
    wait_for(browser, lambda b: "Input required" in row_of(b, task_id).text, "showed its status")
    assert not_reloaded(browser)

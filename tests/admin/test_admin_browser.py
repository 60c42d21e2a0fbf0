"""The admin in a real browser: headless Chromium (Selenium) against a live daphne server.

A raw MCP client (httpx, modern era, tasks extension) starts background tasks that ask
questions and never answers them itself; staff answer in the admin, and the client sees the
result by polling ``tasks/get``. The screenshots of the README are saved to
``docs/screenshots/`` on the way.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (skipped without them, a
failure with ``CI=true``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import LiveServer
from tests.support.browser import (
    by,
    create_staff,
    finished,
    log_in,
    open_answer_page,
    page_text,
    poll,
    result_text,
    screenshot,
    start_task,
    submit,
    waiting_on,
)
from tests.support.live import start_module_server

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]

STAFF = {
    "olga": ["view_task", "change_task", "answer_inputrequest"],
    "victor": ["view_task", "view_inputrequest"],
}


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The example project (embedded mode: tasks run in-process) with two staff users:
    ``olga`` may answer and cancel, ``victor`` may only look."""
    for live in start_module_server(request, label="admin server"):
        create_staff(live, STAFF)
        yield live


# -- tests ------------------------------------------------------------------------------------


def test_staff_answer_a_waiting_task_and_the_client_receives_the_result(
    server: LiveServer, browser: Any
) -> None:
    report = start_task(server, "long_report", {"quarter": "Q3"})
    export = start_task(server, "slow_compute", {"seconds": 25, "label": "nightly export"})
    waiting = waiting_on(server, report)
    (asked,) = waiting["inputRequests"].values()
    assert asked["params"]["message"] == "Include draft figures?"
    poll(
        server,
        export,
        lambda task: "nightly export" in task.get("statusMessage", ""),
        "in progress",
    )

    log_in(browser, server, "olga")
    browser.get(f"{server.url}/admin/mcp_tasks/task/")
    listing = page_text(browser)
    assert report[:8] in listing and export[:8] in listing
    assert "Input required" in listing
    assert browser.find_elements(by("CSS_SELECTOR"), ".mcp-progress")
    screenshot(browser, "task-list")

    open_answer_page(browser, server, report, "Include draft figures?")
    browser.find_element(by("ID"), "id_answer-value").click()
    screenshot(browser, "answer-page")
    submit(browser, browser.find_element(by("NAME"), "_accept"))
    answered = page_text(browser)
    assert "Answer sent: the task resumes." in answered
    assert "Answered by olga (admin) on" in answered

    done = finished(server, report)
    assert done["status"] == "completed", done
    assert result_text(done) == "Report for Q3: 3 sections with drafts."

    browser.find_element(by("PARTIAL_LINK_TEXT"), "long_report").click()
    task_page = page_text(browser)
    assert "Report for Q3: 3 sections with drafts." in task_page
    assert "olga (admin)" in task_page
    assert '"quarter": "Q3"' in task_page
    screenshot(browser, "task-page")

    # The running export is cancelled with the admin action; the client sees it too.
    browser.get(f"{server.url}/admin/mcp_tasks/task/")
    row = browser.find_element(by("XPATH"), f"//tr[contains(., {export[:8]!r})]")
    row.find_element(by("CSS_SELECTOR"), "input.action-select").click()
    from selenium.webdriver.support.select import Select

    Select(browser.find_element(by("NAME"), "action")).select_by_visible_text(
        "Cancel selected tasks"
    )
    submit(browser, browser.find_element(by("NAME"), "index"))
    assert "Cancelled 1 task." in page_text(browser)
    assert finished(server, export)["status"] == "cancelled"


def test_invalid_answer_shows_the_error_and_a_corrected_one_completes_the_task(
    server: LiveServer, browser: Any
) -> None:
    task_id = start_task(server, "multi_input", {})
    waiting_on(server, task_id, count=2)
    log_in(browser, server, "olga")

    open_answer_page(browser, server, task_id, "Who is asking?")
    browser.find_element(by("ID"), "id_answer-name").send_keys("   ")
    submit(browser, browser.find_element(by("NAME"), "_accept"))
    assert "This field is required." in page_text(browser)
    assert "Please correct the error below." in page_text(browser)
    assert len(waiting_on(server, task_id, count=2)["inputRequests"]) == 2  # nothing was sent

    field = browser.find_element(by("ID"), "id_answer-name")
    field.clear()
    field.send_keys("Ada")
    submit(browser, browser.find_element(by("NAME"), "_accept"))
    assert "Answer sent: the task resumes." in page_text(browser)
    waiting_on(server, task_id, count=1)

    open_answer_page(browser, server, task_id, "Proceed?")
    browser.find_element(by("ID"), "id_answer-confirm").click()
    submit(browser, browser.find_element(by("NAME"), "_accept"))
    done = finished(server, task_id)
    assert done["status"] == "completed", done
    assert result_text(done) == "multi_input: name=Ada, confirm=True"


def test_staff_without_the_permission_cannot_answer(server: LiveServer, browser: Any) -> None:
    task_id = start_task(server, "confirm_delete", {"filename": "q3-draft.xlsx"})
    waiting_on(server, task_id)
    log_in(browser, server, "victor")

    open_answer_page(browser, server, task_id, "Delete q3-draft.xlsx?")
    assert "You can see this question but not answer it" in page_text(browser)
    assert not browser.find_elements(by("NAME"), "_accept")
    assert not browser.find_elements(by("ID"), "answer_form")

    browser.get(f"{server.url}/admin/mcp_tasks/task/")
    assert not browser.find_elements(by("NAME"), "action")  # no cancel action either
    assert waiting_on(server, task_id)["status"] == "input_required"


def test_admin_pages_follow_the_dark_theme(server: LiveServer, browser: Any) -> None:
    log_in(browser, server, "olga")
    browser.get(f"{server.url}/admin/mcp_tasks/task/")
    background = "return getComputedStyle(document.body).backgroundColor"
    light = browser.execute_script(background)
    browser.execute_script("localStorage.setItem('theme', 'dark')")
    try:
        browser.refresh()
        dark = browser.execute_script(background)
        assert dark != light, "the admin's dark theme did not apply (are static files served?)"
        assert browser.execute_script("return document.documentElement.dataset.theme") == "dark"
        screenshot(browser, "task-list-dark")
    finally:
        browser.execute_script("localStorage.removeItem('theme')")

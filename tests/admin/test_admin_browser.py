"""The admin in a real browser: headless Chromium (Selenium) against a live daphne server.

A raw MCP client (httpx, modern era, tasks extension) starts background tasks that ask
questions and never answers them itself; staff answer in the admin, and the client sees the
result by polling ``tasks/get``. The screenshots of the README are saved to
``docs/screenshots/`` on the way.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (skipped without them, a
failure with ``CI=true``).
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, LiveServer, _run_manage, service_missing
from tests.live import (
    final_message,
    modern_headers,
    modern_request,
    start_module_server,
)

pytestmark = [pytest.mark.live, pytest.mark.usefixtures("show_server_output")]

SCREENSHOTS = ROOT / "docs" / "screenshots"
PASSWORD = "correct-horse-battery-staple"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,900",
)
CAPABILITIES: dict[str, Any] = {
    "elicitation": {"form": {}},
    "extensions": {"io.modelcontextprotocol/tasks": {}},
}
WAIT = 30.0

CREATE_USERS = f"""
from django.contrib.auth.models import Permission, User

def make(name, codenames):
    user = User.objects.create_user(name, password={PASSWORD!r}, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="mcp_tasks", codename__in=codenames)
    )

make("olga", ["view_task", "change_task", "answer_inputrequest"])
make("victor", ["view_task", "view_inputrequest"])
"""


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The example project (embedded mode: tasks run in-process) with two staff users:
    ``olga`` may answer and cancel, ``victor`` may only look."""
    for live in start_module_server(request, label="admin server"):
        _run_manage(live.env, "shell", "-c", CREATE_USERS)
        yield live


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not chromium or not chromedriver:
        service_missing("Chromium", "install the Debian packages chromium and chromium-driver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        service_missing("Selenium", f"pip install selenium ({exc})")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# -- the MCP client (raw modern-era JSON-RPC; it never answers a question) --------------------

_request_ids = itertools.count(1)


def rpc(
    server: LiveServer, method: str, params: dict[str, Any], name: str | None = None
) -> dict[str, Any]:
    body = modern_request(method, params, request_id=next(_request_ids), capabilities=CAPABILITIES)
    response = httpx.post(
        server.mcp_url, json=body, headers=modern_headers(method, name), timeout=WAIT
    )
    message = final_message(response)
    assert "error" not in message, message
    result: dict[str, Any] = message["result"]
    return result


def start_task(server: LiveServer, tool: str, arguments: dict[str, Any]) -> str:
    result = rpc(server, "tools/call", {"name": tool, "arguments": arguments}, name=tool)
    assert result["resultType"] == "task", result
    task_id: str = result["taskId"]
    return task_id


def poll(server: LiveServer, task_id: str, until: Any, what: str) -> dict[str, Any]:
    """``tasks/get`` until ``until(task)`` holds."""
    deadline = time.monotonic() + WAIT
    task: dict[str, Any] = {}
    while time.monotonic() < deadline:
        task = rpc(server, "tasks/get", {"taskId": task_id}, name=task_id)
        if until(task):
            return task
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} never became {what}; last seen: {task}")


def waiting_on(server: LiveServer, task_id: str, count: int = 1) -> dict[str, Any]:
    return poll(
        server,
        task_id,
        lambda task: (
            task["status"] == "input_required" and len(task.get("inputRequests", {})) == count
        ),
        f"input_required with {count} question(s)",
    )


def finished(server: LiveServer, task_id: str) -> dict[str, Any]:
    return poll(
        server,
        task_id,
        lambda task: task["status"] in ("completed", "failed", "cancelled"),
        "finished",
    )


def result_text(task: dict[str, Any]) -> str:
    return " ".join(block["text"] for block in task["result"]["content"] if block["type"] == "text")


# -- browser helpers --------------------------------------------------------------------------


def by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def log_in(browser: Any, server: LiveServer, username: str) -> None:
    # Leave the last page first: a live admin page refreshing itself in the background could
    # otherwise set a new CSRF cookie between the login form's render and its POST.
    browser.get("about:blank")
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})  # every site's, from anywhere
    browser.get(f"{server.url}/admin/login/?next=/admin/")
    # More room for the pages (and the screenshots): the admin's side bar starts closed.
    browser.execute_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    browser.find_element(by("ID"), "id_username").send_keys(username)
    browser.find_element(by("ID"), "id_password").send_keys(PASSWORD)
    submit(browser, browser.find_element(by("CSS_SELECTOR"), "input[type=submit]"))
    assert "Site administration" in browser.title, browser.page_source[:2000]


def submit(browser: Any, button: Any) -> None:
    """Click ``button`` (or a link) and wait until the next page has loaded."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.wait import WebDriverWait

    page = browser.find_element(by("TAG_NAME"), "html")
    button.click()

    def loaded(driver: Any) -> bool:
        try:
            page.is_enabled()  # raises once the old document is gone
            return False
        except WebDriverException:
            # Stale element, or chromedriver's "Node ... does not belong to the document"
            # when asked mid-navigation: the old page is gone either way.
            return bool(driver.execute_script("return document.readyState") == "complete")

    WebDriverWait(browser, WAIT).until(loaded)


def page_text(browser: Any) -> str:
    text: str = browser.find_element(by("TAG_NAME"), "body").text
    return text


def open_answer_page(browser: Any, server: LiveServer, task_id: str, question: str) -> None:
    """From the Waiting questions list, open the Answer page of ``task_id``'s ``question``."""
    browser.get(f"{server.url}/admin/mcp_tasks/task/")
    submit(
        browser,
        browser.find_element(
            by("CSS_SELECTOR"), '.object-tools a[href="/admin/mcp_tasks/inputrequest/"]'
        ),
    )
    assert "Waiting questions" in browser.find_element(by("TAG_NAME"), "h1").text
    row = browser.find_element(
        by("XPATH"), f"//tr[contains(., {question!r}) and contains(., {task_id[:8]!r})]"
    )
    submit(browser, row.find_element(by("LINK_TEXT"), "Answer"))
    assert question in page_text(browser)


def screenshot(browser: Any, name: str) -> None:
    """Save the whole page as ``docs/screenshots/<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1440, max(900, min(int(height), 2400)))
    try:
        assert browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    finally:
        browser.set_window_size(1280, 900)


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

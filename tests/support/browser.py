"""The admin in a real browser, shared by ``tests/admin/`` and ``tests/signin/``: the
``browser`` fixture (headless Chromium through chromedriver, one per test module; a plugin of
``tests/conftest.py``), a raw modern-era MCP client that starts tasks and polls them (it never
answers a question), and the Selenium helpers (log in, submit, screenshots).

Needs the Debian packages ``chromium`` and ``chromium-driver`` (skipped without them, a
failure with ``CI=true``).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, LiveServer, _run_manage, service_missing
from tests.support.live import final_message, modern_headers, modern_request

#: Where :func:`screenshot` writes: the temporary directory, so a test run leaves the tree
#: clean; ``MCP_TASKS_TEST_SCREENSHOTS=docs/screenshots`` refreshes the README's pictures.
SCREENSHOTS = ROOT / os.environ.get(
    "MCP_TASKS_TEST_SCREENSHOTS", str(Path(tempfile.gettempdir()) / "mcp_tasks-screenshots")
)
PASSWORD = "correct-horse-battery-staple"


def create_staff(server: LiveServer, users: dict[str, list[str]]) -> None:
    """Staff users of the server's database, each with :data:`PASSWORD` and exactly the
    ``mcp_tasks`` permissions named (codenames)."""
    script = f"""
from django.contrib.auth.models import Permission, User

def make(name, codenames):
    user = User.objects.create_user(name, password={PASSWORD!r}, is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="mcp_tasks", codename__in=codenames)
    )
"""
    script += "".join(f"make({name!r}, {codenames!r})\n" for name, codenames in users.items())
    _run_manage(server.env, "shell", "-c", script)


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


def start_chromium(profile: Path) -> Any:
    """A headless Chromium (Selenium driver) with its own profile directory, so its own
    admin session; skips (fails on CI) without Chromium, chromedriver or Selenium."""
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
    options.add_argument(f"--user-data-dir={profile}")
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = start_chromium(tmp_path_factory.mktemp("chromium-profile"))
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


def wait_for(browser: Any, condition: Callable[[Any], Any], what: str) -> Any:
    """The first true value of ``condition(browser)`` within ``WAIT`` seconds (elements
    missing or replaced meanwhile are waited for); else an AssertionError that shows the
    page."""
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
        TimeoutException,
    )
    from selenium.webdriver.support.wait import WebDriverWait

    ignored = [StaleElementReferenceException, NoSuchElementException]
    try:
        return WebDriverWait(browser, WAIT, ignored_exceptions=ignored).until(condition)
    except TimeoutException:
        raise AssertionError(
            f"never {what}; at {browser.current_url} ({browser.title!r}): "
            f"{page_text(browser)[:1500]}"
        ) from None


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
    """Save the whole page as ``<name>.png`` in :data:`SCREENSHOTS`."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1440, max(900, min(int(height), 2400)))
    try:
        assert browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    finally:
        browser.set_window_size(1280, 900)

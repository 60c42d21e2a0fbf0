"""The admin's task dashboard in a real browser: headless Chromium (Selenium) against a live
server (the example project, its worker embedded) with the live admin's WebSocket routed.

The server's database gets a history of tasks and questions first (rows written directly,
spread over the last day); the page shows its charts, and tasks that a raw MCP client starts
and that finish show on it without a reload. The screenshots (light and dark) go to
``docs/screenshots/`` with ``MCP_TASKS_TEST_SCREENSHOTS=docs/screenshots``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import LiveServer, _run_manage
from tests.support.browser import (
    by,
    create_staff,
    finished,
    log_in,
    screenshot,
    start_task,
    submit,
    wait_for,
)
from tests.support.live import attach_server_output, start_module_server

pytestmark = pytest.mark.live

LIVE_PATH = "/mcp-tasks/admin-live/"
#: (tool, share of its tasks that fail, of those a tool error rather than ``failed``)
TOOLS = [
    ("long_report", 0.04, 1.0),
    ("slow_compute", 0.0, 0.0),
    ("export_invoices", 0.35, 0.5),
    ("sync_crm", 0.15, 0.0),
    ("refund", 0.08, 1.0),
]


def history(count: int, seed: int = 30) -> list[dict[str, Any]]:
    """``count`` finished tasks: ``ago`` seconds before now, most within the last 50
    minutes (so in the last hour's window however long the test takes), the rest over the
    day, all over by now; with their outcome, run time, queue wait, and for some a question
    answered after a while."""
    chance = random.Random(seed)
    rows = []
    for i in range(count):
        tool, fails, tool_error = chance.choice(TOOLS)
        recent = i < count * 2 // 3
        ago = chance.uniform(30, 50 * 60) if recent else chance.uniform(3600, 23 * 3600)
        wait, run = (
            round(chance.expovariate(1 / 1.5), 3),
            round(min(chance.lognormvariate(1.5, 0.9), 25), 3),
        )
        asked, answer_after = chance.random() < 0.25, round(chance.uniform(20, 400), 1)
        ago = max(ago, wait + run + (answer_after if asked else 0) + 30)  # over by now
        failed = chance.random() < fails
        status = "cancelled" if chance.random() < 0.04 else "completed"
        if failed:
            status = "completed" if chance.random() < tool_error else "failed"
        rows.append(
            {
                "id": f"seed-{i:04d}-{chance.getrandbits(64):016x}",
                "tool": tool,
                "status": status,
                "is_error": failed and status == "completed",
                "ago": ago,
                "wait": wait,
                "run": run,
                "asked": asked,
                "answer_after": answer_after,
            }
        )
    return rows


SEED_SCRIPT = """
import datetime as dt, json, sys
from django.utils import timezone
from mcp_tasks.models import InputRequest, Task
now = timezone.now()
for row in json.loads({rows!r}):
    created = now - dt.timedelta(seconds=row["ago"])
    started = created + dt.timedelta(seconds=row["wait"])
    finished = started + dt.timedelta(seconds=row["run"] + (row["answer_after"] if row["asked"] else 0))
    result = None
    if row["status"] == "completed":
        result = {{"content": [{{"type": "text", "text": "done"}}], "isError": row["is_error"]}}
    task = Task.objects.create(
        id=row["id"], principal_scope="user:seed", tool_name=row["tool"], status=row["status"],
        created_at=created, updated_at=finished, started_at=started, finished_at=finished,
        result=result, status_message=row["status"].capitalize(), runs=1,
    )
    if row["asked"]:
        asked = started + dt.timedelta(seconds=1)
        InputRequest.objects.create(
            task=task, key="confirm", sequence=1, method="elicitation/create",
            params={{"message": "Go ahead?"}}, status="answered", response={{"action": "accept"}},
            answered_by="client", created_at=asked,
            answered_at=asked + dt.timedelta(seconds=row["answer_after"]),
        )
"""
HISTORY = history(260)


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The example project with the live admin's WebSocket routed, and a history of tasks."""
    env = {"MCP_TASKS_TEST_ADMIN_LIVE_PATH": LIVE_PATH}
    for live in start_module_server(request, env, label="dashboard server"):
        create_staff(live, {"vera": ["view_task"]})
        _run_manage(live.env, "shell", "-c", SEED_SCRIPT.format(rows=json.dumps(HISTORY)))
        yield live


# -- helpers ----------------------------------------------------------------------------------


def live_state(browser: Any) -> str:
    return str(
        browser.execute_script(
            "return document.getElementById('mcp-dashboard-live')?.dataset.state || ''"
        )
    )


def total(browser: Any, status: str) -> int:
    element = browser.find_element(by("CSS_SELECTOR"), f'.mcp-total[data-status="{status}"]')
    return int(element.text)


def failures_of(browser: Any, tool: str) -> int:
    cells = browser.find_elements(by("CSS_SELECTOR"), f'tr[data-tool="{tool}"] td.mcp-failed-count')
    return int(cells[0].text) if cells else 0


def card(browser: Any, name: str) -> str:
    text: str = browser.find_element(by("CSS_SELECTOR"), f"#{name} .mcp-dash-value").text
    return text


def open_dashboard(browser: Any, server: LiveServer, window: str = "") -> None:
    """From the task list, follow the Dashboard link; ``window``: then choose that window."""
    browser.get(f"{server.url}/admin/mcp_tasks/task/")
    submit(browser, browser.find_element(by("CSS_SELECTOR"), ".object-tools a.mcp-dashboard-link"))
    if window:
        link = f'.mcp-dashboard-windows a[data-window="{window}"]'
        submit(browser, browser.find_element(by("CSS_SELECTOR"), link))
    wait_for(browser, lambda b: live_state(b) == "live", "connected to the live admin")


def full_screenshot(browser: Any, name: str) -> None:
    """:func:`screenshot` of the whole page. It is measured at the picture's width (the
    charts grow with the page's width), with room at its end for the browser's own frame,
    which :func:`screenshot`'s window size includes but the page does not get."""
    browser.set_window_size(1440, 900)
    browser.execute_script(
        """
        const spacer = document.createElement("div");
        spacer.id = "mcp-screenshot-spacer";
        spacer.style.height = (window.outerHeight - window.innerHeight) + "px";
        document.getElementById("content").appendChild(spacer);
        """
    )
    try:
        screenshot(browser, name)
    finally:
        browser.execute_script("document.getElementById('mcp-screenshot-spacer').remove()")


def set_theme(browser: Any, theme: str) -> None:
    """The admin's theme switch (``auto``, ``light`` or ``dark``), then reload."""
    browser.execute_script("localStorage.setItem('theme', arguments[0])", theme)
    browser.refresh()
    wait_for(
        browser,
        lambda b: b.execute_script("return document.documentElement.dataset.theme") == theme,
        f"switched to the {theme} theme",
    )


# -- tests ------------------------------------------------------------------------------------


def test_the_dashboard_shows_the_history_in_its_charts(
    request: pytest.FixtureRequest, server: LiveServer, browser: Any
) -> None:
    attach_server_output(request, server)
    log_in(browser, server, "vera")
    open_dashboard(browser, server)
    assert "Task dashboard" in browser.title

    last_hour = [row for row in HISTORY if row["ago"] < 3600]
    for status in ("completed", "failed", "cancelled"):
        assert total(browser, status) == sum(row["status"] == status for row in last_hour)
    charts = browser.find_elements(by("CSS_SELECTOR"), "svg.mcp-chart")
    assert len(charts) == 2
    assert browser.find_elements(by("CSS_SELECTOR"), "svg.mcp-chart rect.mcp-s-completed")
    assert browser.find_element(by("CSS_SELECTOR"), "svg.mcp-chart path.mcp-line")
    failing = [row["tool"] for row in last_hour if row["status"] == "failed" or row["is_error"]]
    shown = browser.find_elements(by("CSS_SELECTOR"), "#mcp-dash-failing tr[data-tool]")
    assert {row.get_attribute("data-tool") for row in shown} == set(failing)
    assert "—" not in card(browser, "mcp-dash-run-time")
    full_screenshot(browser, "dashboard")

    open_dashboard(browser, server, "day")
    assert total(browser, "completed") == sum(row["status"] == "completed" for row in HISTORY)
    set_theme(browser, "dark")
    try:
        wait_for(browser, lambda b: live_state(b) == "live", "connected again")
        full_screenshot(browser, "dashboard-dark")
    finally:
        set_theme(browser, "auto")


def test_finishing_tasks_update_the_dashboard_without_a_reload(
    request: pytest.FixtureRequest, server: LiveServer, browser: Any
) -> None:
    attach_server_output(request, server)
    log_in(browser, server, "vera")
    open_dashboard(browser, server)
    browser.execute_script("window.mcpNotReloaded = true")
    completed, failures = total(browser, "completed"), failures_of(browser, "failing_job")

    compute = start_task(server, "slow_compute", {"seconds": 0.5, "label": "dashboard"})
    failing = start_task(server, "failing_job", {})
    assert finished(server, compute)["status"] == "completed"
    assert finished(server, failing)["status"] == "completed"  # with a tool error

    wait_for(
        browser,
        lambda b: total(b, "completed") == completed + 2,
        "counted the two finished tasks",
    )
    wait_for(
        browser,
        lambda b: failures_of(b, "failing_job") == failures + 1,
        "listed the failing tool",
    )
    assert browser.execute_script("return window.mcpNotReloaded === true")
    refreshes = browser.execute_script(
        "return Number(document.getElementById('mcp-dashboard-live').dataset.refreshes || 0)"
    )
    assert refreshes >= 1

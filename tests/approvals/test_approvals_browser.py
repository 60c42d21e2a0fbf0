"""Staff sign-off in a real browser: headless Chromium (Selenium) against a live server, a
real ``manage.py rqworker`` on a private Redis, and a raw MCP client (tasks extension) that
calls the demo approval tools and polls its tasks.

The Approvals page shows a new approval without a reload (the live admin's WebSocket is
routed); an operator edits the amount and approves, and the tool runs with it; an operator
without the permission sees no buttons and a forged POST gets 403; a rejection's reason
reaches the client; four eyes need two different users. The hold window is short, so every
task is let go by its worker while staff decide, and a new job runs it: the path every real
approval takes. The README's approval screenshots are taken on the way.
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
    page_text,
    poll,
    result_text,
    screenshot,
    start_task,
    submit,
    wait_for,
)
from tests.support.worker_fixtures import RedisProcess, TaskStack, module_task_stack

pytestmark = [pytest.mark.live, pytest.mark.redis]

LIVE_PATH = "/mcp-tasks/admin-live/"
APPROVALS = "/admin/mcp_tasks/inputrequest/approvals/"
WAITING = "Waiting for approval by staff"
BROWSE = ["view_task", "view_inputrequest"]
STAFF = {
    "ann": [*BROWSE, "answer_inputrequest"],
    "bob": [*BROWSE, "answer_inputrequest"],
    "otto": BROWSE,  # may look, not decide
}


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_stack(request: pytest.FixtureRequest, stack_redis: RedisProcess) -> Iterator[TaskStack]:
    """One live server (the live admin's WebSocket routed) and one rq worker for the module,
    with the staff users of :data:`STAFF`."""
    env = {"MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "0.3", "MCP_TASKS_TEST_ADMIN_LIVE_PATH": LIVE_PATH}
    for stack in module_task_stack(request, stack_redis, env, label="approvals browser"):
        create_staff(stack.server, STAFF)
        yield stack


@pytest.fixture
def server(request: pytest.FixtureRequest, module_stack: TaskStack) -> LiveServer:
    module_stack.attach(request)
    return module_stack.server


# -- helpers ----------------------------------------------------------------------------------


def open_live(browser: Any, url: str) -> None:
    """Open ``url``, wait until its live script listens on the WebSocket, and mark the
    document so that a reload would show."""
    browser.get(url)
    wait_for(
        browser,
        lambda b: (
            b.execute_script("return document.getElementById('mcp-live')?.dataset.state") == "live"
        ),
        f"live on {url}",
    )
    browser.execute_script("window.mcpNotReloaded = true")


def not_reloaded(browser: Any) -> bool:
    return bool(browser.execute_script("return window.mcpNotReloaded === true"))


def waiting_for_staff(server: LiveServer, task_id: str, message: str = WAITING) -> dict[str, Any]:
    """Poll as the client until the task waits for staff with ``message``; it never asks
    the client anything."""
    task = poll(
        server,
        task_id,
        lambda task: task["status"] == "working" and task.get("statusMessage") == message,
        f"working with the status message {message!r}",
    )
    assert "inputRequests" not in task, task
    return task


def approval_row(browser: Any, task_id: str) -> Any:
    return browser.find_element(
        by("XPATH"), f"//table[@id='result_list']//tr[.//*[@data-task-id={task_id!r}]]"
    )


def open_approval(browser: Any, server: LiveServer, task_id: str, link: str = "Decide") -> None:
    """From the Approvals list, open ``task_id``'s approval page."""
    browser.get(f"{server.url}{APPROVALS}")
    submit(browser, approval_row(browser, task_id).find_element(by("LINK_TEXT"), link))
    assert "Approve a task" in browser.title


def click(browser: Any, name: str) -> str:
    """Press the decision panel's button ``name`` and return the next page's text."""
    submit(browser, browser.find_element(by("CSS_SELECTOR"), f"#approval_form [name={name}]"))
    return page_text(browser)


def fill(browser: Any, field_id: str, value: str) -> None:
    field = browser.find_element(by("ID"), field_id)
    field.clear()
    field.send_keys(value)


# -- tests ------------------------------------------------------------------------------------


def test_an_operator_edits_the_amount_and_the_refund_runs_with_it(
    server: LiveServer, browser: Any
) -> None:
    log_in(browser, server, "ann")
    open_live(browser, f"{server.url}{APPROVALS}")

    task_id = start_task(server, "refund", {"customer": "acme", "amount": 120.0})
    waiting_for_staff(server, task_id)
    wait_for(
        browser,
        lambda b: "Refund 120.0 EUR to acme" in approval_row(b, task_id).text,
        "showed the new approval",
    )
    row = approval_row(browser, task_id).text
    assert "Waiting" in row and "0 of 1" in row and "Decide" in row
    assert "1 waiting for a decision." in page_text(browser)
    assert not_reloaded(browser)

    submit(browser, approval_row(browser, task_id).find_element(by("LINK_TEXT"), "Decide"))
    decide_page = page_text(browser)
    assert "Waiting for approval" in decide_page and "Refund 120.0 EUR to acme" in decide_page
    assert not browser.find_elements(by("ID"), "id_approval-customer")  # not editable
    fill(browser, "id_approval-amount", "80")
    fill(browser, "id_approval-note", "Goodwill, capped at 80")
    screenshot(browser, "approval-decide")
    approved = click(browser, "_approve")
    assert "Approved: the task runs." in approved
    assert "Approved by ann" in approved

    done = finished(server, task_id)
    assert done["status"] == "completed", done
    assert done["result"]["structuredContent"] == {
        "customer": "acme",
        "amount": 80.0,
        "note": "Goodwill, capped at 80",
    }
    assert '"amount": 80.0' in result_text(done)

    submit(browser, browser.find_element(by("CSS_SELECTOR"), ".object-tools a[href*='/task/']"))
    trail = browser.find_element(by("CSS_SELECTOR"), ".mcp-approval-trail").text
    assert "ann" in trail and "approve" in trail
    assert "amount: 120.0 → 80.0" in trail
    assert 'note: null → "Goodwill, capped at 80"' in trail
    task_page = page_text(browser)
    assert "Refund 80.0 EUR to acme" in task_page
    assert "Goodwill, capped at 80" in task_page  # the result, on the task page
    screenshot(browser, "approval-task-page")


def test_staff_without_the_permission_see_no_buttons_and_a_forged_post_gets_403(
    server: LiveServer, browser: Any
) -> None:
    task_id = start_task(server, "refund", {"customer": "globex", "amount": 50.0})
    waiting_for_staff(server, task_id)
    log_in(browser, server, "otto")
    browser.get(f"{server.url}{APPROVALS}")
    assert "Decide" not in approval_row(browser, task_id).text

    open_approval(browser, server, task_id, link="Details")
    assert "Refund 50.0 EUR to globex" in page_text(browser)
    assert "You can see this approval but not decide it" in page_text(browser)
    assert not browser.find_elements(by("NAME"), "_approve")
    assert not browser.find_elements(by("NAME"), "_reject")

    # The approve button's POST, forged in otto's session with a valid CSRF token (the one
    # of the admin's logout form).
    status, body = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const body = new FormData();
        body.append("csrfmiddlewaretoken",
                    document.querySelector("[name=csrfmiddlewaretoken]").value);
        body.append("_approve", "1");
        body.append("approval-amount", "1");
        fetch(window.location.href, {method: "POST", body, credentials: "same-origin"})
          .then(async (response) => done([response.status, await response.text()]))
          .catch((error) => done([0, String(error)]));
        """
    )
    assert status == 403, body[:500]
    assert "CSRF" not in body  # refused for the permission, not for the token
    task = waiting_for_staff(server, task_id)
    assert task["status"] == "working"
    browser.refresh()
    assert "0 of 1" in page_text(browser) and "Decisions" not in page_text(browser)


def test_a_rejection_with_a_reason_reaches_the_client(server: LiveServer, browser: Any) -> None:
    task_id = start_task(server, "refund", {"customer": "initech", "amount": 30.0})
    waiting_for_staff(server, task_id)
    log_in(browser, server, "ann")
    open_approval(browser, server, task_id)
    fill(browser, "id_approval-reason", "duplicate claim")
    rejected = click(browser, "_reject")
    assert "Rejected: the task ended with your reason." in rejected
    assert "Rejected by ann" in rejected

    done = finished(server, task_id)
    assert done["status"] == "completed", done
    assert done["result"]["isError"] is True
    assert result_text(done) == "Rejected by staff: duplicate claim"


def test_four_eyes_need_a_second_user(server: LiveServer, browser: Any) -> None:
    task_id = start_task(server, "erase_customer", {"customer": "hooli"})
    waiting_for_staff(server, task_id)
    log_in(browser, server, "ann")
    open_approval(browser, server, task_id)
    assert "Delete every record of hooli" in page_text(browser)
    first = click(browser, "_approve")
    assert "Approved (1 of 2): another user must approve too." in first
    assert "You approved these arguments already" in first
    waiting_for_staff(server, task_id, f"{WAITING} (1 of 2 approvals)")

    again = click(browser, "_approve")  # the same user once more: refused, visibly
    assert "Not recorded: you already approved this task; it needs 2 different approvers." in (
        again
    )
    assert "1 of 2" in browser.find_element(by("CSS_SELECTOR"), ".mcp-approval-count").text
    waiting_for_staff(server, task_id, f"{WAITING} (1 of 2 approvals)")
    browser.get(f"{server.url}{APPROVALS}")
    row = approval_row(browser, task_id).text
    assert "Delete every record of hooli" in row and "Waiting" in row and "1 of 2" in row
    screenshot(browser, "approvals-list")  # with the earlier tests' decisions below

    log_in(browser, server, "bob")
    open_approval(browser, server, task_id)
    assert "You approved these arguments already" not in page_text(browser)
    assert "Approved: the task runs." in click(browser, "_approve")
    done = finished(server, task_id)
    assert done["status"] == "completed", done
    assert result_text(done) == "Erased the records of hooli."
    trail = browser.find_element(by("CSS_SELECTOR"), ".mcp-approval-trail").text
    assert "ann" in trail and "bob" in trail

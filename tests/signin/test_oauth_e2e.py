"""OAuth end to end: the ``mcp`` SDK's client OAuth provider against the example project on
a live server, starting from nothing.

The client gets the 401, reads the protected resource metadata and the authorization
server's metadata, registers itself (RFC 7591), sends the user through the sign-in and
consent pages (a small scripted "browser" over HTTP: it fills and submits the two forms),
exchanges the code (PKCE S256, RFC 8707 resource) and calls tools with the token. With
that token a task is started and read back; another user's token does not find it; a token
issued for another resource is refused. A second test signs the user in through the real
pages in headless Chromium (Selenium; needs Debian's chromium and chromium-driver, like
``tests/admin/test_admin_browser.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.conftest import AsgiServerFactory
from tests.signin.oauth_client import (
    CREATE_USERS,
    PASSWORD,
    REDIRECT,
    Browser,
    MemoryStorage,
    oauth_client,
)
from tests.support.live import LIVE_SETTINGS
from tests.support.results import task_text_of as text_of
from tests.support.task_driver import TaskDriver, django_shell, task_capabilities

pytestmark = pytest.mark.live

_TOKEN_FOR = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
user = get_user_model().objects.create_user(username=username)
app = Application.objects.create(
    name="other", client_type="public", authorization_grant_type="authorization-code",
    redirect_uris="http://127.0.0.1/cb", user=user,
)
AccessToken.objects.create(
    user=user, application=app, token=token, scope="mcp", resource=[resource],
    expires=timezone.now() + timedelta(hours=1),
)
result = token
"""


async def test_sdk_client_signs_in_and_uses_tools_and_tasks(asgi_server: AsgiServerFactory) -> None:
    server = asgi_server(
        {
            **LIVE_SETTINGS,
            "MCP_TASKS_TEST_TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.dot.verify",
            "MCP_TASKS_TEST_ALLOW_ANONYMOUS": "0",
        }
    )
    await django_shell(server, CREATE_USERS, usernames=["ada"], password=PASSWORD)
    ada_at_the_keyboard, storage = Browser("ada"), MemoryStorage()
    async with oauth_client(server, ada_at_the_keyboard, storage) as client:
        tools = await client.list_tools()
        assert "add" in {tool.name for tool in tools.tools}
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5}
    assert ada_at_the_keyboard.seen[0] == "/accounts/login/"
    assert "consent" in ada_at_the_keyboard.seen
    token = storage.tokens.access_token

    async with httpx.AsyncClient(timeout=60) as http:
        ada = TaskDriver(http, server.mcp_url, capabilities=task_capabilities(), token=token)
        task_id = await ada.call("trivial_task", {"n": 7})
        assert text_of(await ada.run(task_id)) == "7"

        resource = server.mcp_url
        await django_shell(server, _TOKEN_FOR, username="bob", token="bob-token", resource=resource)
        bob = TaskDriver(http, server.mcp_url, capabilities=task_capabilities(), token="bob-token")
        other = await bob.rpc("tasks/get", {"taskId": task_id}, name=task_id)
        assert other["error"]["message"] == "Task not found"  # as for a task that never existed

        await django_shell(
            server,
            _TOKEN_FOR,
            username="eve",
            token="eve-token",
            resource="https://elsewhere.example/mcp",
        )
        refused = await http.post(
            server.mcp_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={
                "Authorization": "Bearer eve-token",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2025-06-18",
            },
        )
        assert refused.status_code == 401
        assert "another resource" in refused.headers["www-authenticate"]


class ChromiumUser(Browser):
    """The same user in a real browser (Selenium, headless Chromium): the sign-in and
    consent pages are filled and clicked as rendered."""

    def __init__(self, username: str, driver: Any) -> None:
        super().__init__(username)
        self.driver = driver

    async def open(self, url: str) -> None:
        await asyncio.to_thread(self._sign_in, url)

    def _sign_in(self, url: str) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.wait import WebDriverWait

        driver = self.driver
        driver.delete_all_cookies()
        driver.get(url)
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.ID, "login-form"))
        self.seen.append("sign-in page")
        driver.find_element(By.ID, "id_username").send_keys(self.username)
        driver.find_element(By.ID, "id_password").send_keys(PASSWORD)
        driver.find_element(By.ID, "sign-in").click()
        wait.until(lambda d: d.find_elements(By.ID, "allow"))
        self.seen.append("consent: " + driver.find_element(By.ID, "client-name").text)
        driver.find_element(By.ID, "allow").click()
        wait.until(lambda d: d.current_url.startswith(REDIRECT))
        query = urlsplit(driver.current_url).query
        self.result = {key: values[0] for key, values in parse_qs(query).items()}


async def test_sdk_client_signs_a_user_in_through_chromium(
    asgi_server: AsgiServerFactory,
    browser: Any,  # the Chromium fixture of tests/support/browser.py
) -> None:
    server = asgi_server(
        {
            **LIVE_SETTINGS,
            "MCP_TASKS_TEST_TOKEN_VERIFIER": "mcp_tasks.auth.verifiers.dot.verify",
            "MCP_TASKS_TEST_ALLOW_ANONYMOUS": "0",
        }
    )
    await django_shell(server, CREATE_USERS, usernames=["grace"], password=PASSWORD)
    user, storage = ChromiumUser("grace", browser), MemoryStorage()
    async with oauth_client(server, user, storage) as client:
        result = await client.call_tool("add", {"a": 20, "b": 22})
        assert result.structured_content == {"result": 42}
    assert user.seen == ["sign-in page", "consent: SDK test client"]
    assert storage.tokens.access_token

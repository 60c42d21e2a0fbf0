"""The ``mcp`` SDK's OAuth client (``OAuthClientProvider``, mcp 2.3) and a user who signs in
and consents through the example project's pages (a small scripted browser over HTTP):
shared by ``test_oauth_e2e.py`` and ``test_cimd_e2e.py``."""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

from tests.conftest import LiveServer

REDIRECT = "http://127.0.0.1:33418/callback"
PASSWORD = "correct-horse-battery"

CREATE_USERS = """
from django.contrib.auth import get_user_model
for username in usernames:
    get_user_model().objects.create_user(username=username, password=password)
result = usernames
"""


class MemoryStorage:
    """The SDK's ``TokenStorage``, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


def _hidden_fields(page: str) -> dict[str, str]:
    fields = {}
    for tag in re.findall(r"<input[^>]*>", page):
        name = re.search(r'name="([^"]+)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if name and 'type="hidden"' in tag:
            fields[name.group(1)] = html.unescape(value.group(1) if value else "")
    return fields


def _text(page: str, element_id: str) -> str:
    """The text of the element with ``element_id`` (tags dropped, spaces collapsed)."""
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:p|ul|span|h2)>', page, re.DOTALL)
    if not found:
        return ""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


class Browser:
    """Follows the authorization URL as a user would: sign in, then allow. Each visit
    starts signed out (a new cookie jar). ``consents`` keeps what each consent page showed:
    the client's name, its host line and the scopes asked for."""

    def __init__(self, username: str) -> None:
        self.username = username
        self.seen: list[str] = []
        self.consents: list[dict[str, str]] = []
        self.result: dict[str, str] = {}

    async def open(self, url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as http:
            response = await http.get(url)
            while response.status_code == 302 and not response.headers["location"].startswith(
                REDIRECT
            ):
                url = urljoin(url, response.headers["location"])
                self.seen.append(urlsplit(url).path)
                if urlsplit(url).path == "/accounts/login/":
                    page = await http.get(url)
                    form = {
                        **_hidden_fields(page.text),
                        "username": self.username,
                        "password": PASSWORD,
                    }
                    response = await http.post(url, data=form)
                else:
                    consent = await http.get(url)
                    assert 'id="allow"' in consent.text, consent.text
                    self.seen.append("consent")
                    self.consents.append(
                        {key: _text(consent.text, key) for key in ("client-name", "client-host")}
                        | {"scopes": _text(consent.text, "scopes")}
                    )
                    form = {**_hidden_fields(consent.text), "allow": "Allow"}
                    response = await http.post(url, data=form)
            location = response.headers["location"]
            assert location.startswith(REDIRECT), (response.status_code, location)
            self.result = {
                key: values[0] for key, values in parse_qs(urlsplit(location).query).items()
            }

    async def callback(self) -> Any:
        from mcp.client.auth import AuthorizationCodeResult

        return AuthorizationCodeResult(
            code=self.result["code"], state=self.result.get("state"), iss=self.result.get("iss")
        )


@contextlib.asynccontextmanager
async def oauth_client(
    server: LiveServer,
    user: Browser,
    storage: MemoryStorage,
    *,
    client_metadata_url: str | None = None,
) -> AsyncIterator[Any]:
    """An entered ``mcp.Client`` whose HTTP client signs in with the SDK's provider; with
    ``client_metadata_url`` the provider offers that URL as its client_id (CIMD) when the
    authorization server supports it, and registers (RFC 7591) when it does not."""
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.auth import OAuthClientMetadata
    from pydantic import AnyUrl

    provider = OAuthClientProvider(
        server_url=server.mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="SDK test client",
            redirect_uris=[AnyUrl(REDIRECT)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=user.open,
        callback_handler=user.callback,
        client_metadata_url=client_metadata_url,
    )
    async with contextlib.AsyncExitStack() as stack:
        http = await stack.enter_async_context(create_mcp_http_client(auth=provider))
        client = await stack.enter_async_context(
            Client(streamable_http_client(server.mcp_url, http_client=http))
        )
        yield client

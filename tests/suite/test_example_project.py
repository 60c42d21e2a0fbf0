"""The example project: landing page, demo tools on a live server, the live-server fixture."""

from __future__ import annotations

import httpx
import pytest
from django.test import Client as DjangoClient
from mcp import Client

from tests.conftest import AsgiServerFactory

pytestmark = pytest.mark.django_db


def test_landing_page_tells_how_to_connect() -> None:
    response = DjangoClient().get("/", headers={"host": "127.0.0.1:8000"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "http://127.0.0.1:8000/mcp" in page
    assert 'Client("http://127.0.0.1:8000/mcp")' in page
    assert "mcpServers" in page
    assert "<code>add</code>" in page


def test_demo_tools_are_registered() -> None:
    from mcp_tasks import mcp

    assert {"add", "slow_count", "greet_with_question", "forecast"} <= set(mcp.tools)
    assert "review_code" in mcp.prompts
    assert "demo://readme" in mcp.resources


@pytest.mark.live
async def test_live_server_serves_demo_tools_to_a_modern_client(live_server_url: str) -> None:
    async with Client(f"{live_server_url}/mcp") as client:
        tools = await client.list_tools()
        result = await client.call_tool("add", {"a": 2, "b": 3})
    assert "add" in {tool.name for tool in tools.tools}
    assert not result.is_error
    assert result.structured_content == {"result": 5}


@pytest.mark.live
async def test_live_server_serves_demo_tools_to_a_legacy_client(live_server_url: str) -> None:
    async with Client(f"{live_server_url}/mcp", mode="legacy") as client:
        result = await client.call_tool("add", {"a": 2, "b": 3})
    assert result.structured_content == {"result": 5}


@pytest.mark.live
def test_live_server_serves_the_landing_page(live_server_url: str) -> None:
    response = httpx.get(f"{live_server_url}/")
    assert response.status_code == 200
    assert f"{live_server_url}/mcp" in response.text


@pytest.mark.live
@pytest.mark.redis
def test_two_live_servers_share_database_and_redis(asgi_server: AsgiServerFactory) -> None:
    first = asgi_server(redis=True, label="A")
    second = asgi_server(redis=True, database_url=first.database_url, label="B")
    assert first.url != second.url
    assert second.database_url == first.database_url
    assert first.env["REDIS_PREFIX"] == second.env["REDIS_PREFIX"]
    for server in (first, second):
        assert httpx.get(f"{server.url}/").status_code == 200

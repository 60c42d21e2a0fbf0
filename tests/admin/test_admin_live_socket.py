"""The live admin's WebSocket as a client meets it: a real WebSocket client (``websockets``)
against a live server (daphne, or uvicorn with ``MCP_TASKS_TEST_SERVER=uvicorn``). A socket
the server refuses (no admin session, staff who may not see tasks, a page of another origin)
never opens: the handshake is answered with HTTP 403, so a browser's ``onclose`` sees 1006
and no close code of the server's."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Origin

from tests.conftest import LiveServer
from tests.support.browser import PASSWORD, create_staff
from tests.support.live import attach_server_output, start_module_server

pytestmark = pytest.mark.live

LIVE_PATH = "/mcp-tasks/admin-live/"


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    env = {"MCP_TASKS_TEST_ADMIN_LIVE_PATH": LIVE_PATH}
    for live in start_module_server(request, env, label="live admin server"):
        create_staff(live, {"olga": ["view_task"], "nina": []})
        yield live


@pytest.fixture
def live(request: pytest.FixtureRequest, server: LiveServer) -> LiveServer:
    attach_server_output(request, server)
    return server


def admin_session(server: LiveServer, username: str) -> str:
    """The ``Cookie`` header of ``username`` signed in to the admin (its login form)."""
    with httpx.Client(base_url=server.url, timeout=30) as http:
        form = http.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token, form.text[:500]
        signed_in = http.post(
            "/admin/login/?next=/admin/",
            data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token[1]},
        )
        assert signed_in.status_code == 302, signed_in.text[:500]
        return f"sessionid={http.cookies['sessionid']}"


async def refusal(server: LiveServer, origin: str, cookie: str | None) -> int:
    """The HTTP status the server answers the handshake with (the socket must not open)."""
    headers = {"Cookie": cookie} if cookie else {}
    url = server.url.replace("http://", "ws://") + LIVE_PATH
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, origin=Origin(origin), additional_headers=headers):
            pass
    status: int = refused.value.response.status_code
    return status


async def test_staff_who_may_see_tasks_get_an_open_socket(live: LiveServer) -> None:
    url = live.url.replace("http://", "ws://") + LIVE_PATH
    cookie = admin_session(live, "olga")
    async with connect(url, origin=Origin(live.url), additional_headers={"Cookie": cookie}) as ws:
        await ws.send(json.dumps({"watch": []}))
        answer = json.loads(await ws.recv())
        while answer == {"event": "ready"}:
            answer = json.loads(await ws.recv())
    assert answer == {"event": "watching", "count": 0}


async def test_a_visitor_without_a_session_gets_http_403_at_the_handshake(
    live: LiveServer,
) -> None:
    assert await refusal(live, live.url, cookie=None) == 403


async def test_staff_who_may_not_see_tasks_get_http_403_at_the_handshake(
    live: LiveServer,
) -> None:
    assert await refusal(live, live.url, admin_session(live, "nina")) == 403


@pytest.mark.parametrize("origin", ["https://127.0.0.1:{port}", "http://127.0.0.1:1"])
async def test_a_page_of_another_origin_on_this_host_gets_http_403(
    live: LiveServer, origin: str
) -> None:
    cookie = admin_session(live, "olga")
    assert await refusal(live, origin.format(port=live.port), cookie) == 403

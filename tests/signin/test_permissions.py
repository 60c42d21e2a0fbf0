"""Per-tool authorization (``@mcp.tool(permissions=..., scopes=...)``) in the protocol layer:
who sees what in the lists, and a call to a hidden item answers like an unknown one.

Real Django users and permissions in the test database; the protocol layer runs without a
server (a :class:`~mcp_tasks.protocol.Dispatcher`), as in ``tests/protocol/test_dispatch.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from mcp_tasks import AccessToken, MCPServer
from mcp_tasks.auth import ANONYMOUS, Principal, principal_for
from mcp_tasks.auth.permissions import Access, allowed, clear_cache
from tests.support.protocol_fixtures import modern_info, request, run

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_thread_closed"),
]

PERM = "auth.view_user"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def server() -> MCPServer:
    registry = MCPServer()

    @registry.tool()
    def open_tool() -> str:
        return "open"

    @registry.tool(permissions=[PERM])
    def staff_tool() -> str:
        return "staff"

    @registry.tool(scopes=["reports:read"])
    def scoped_tool() -> str:
        return "scoped"

    @registry.prompt(permissions=[PERM])
    def staff_prompt() -> str:
        return "hello"

    @registry.resource("memo://secret", permissions=[PERM])
    def secret() -> str:
        return "secret"

    @registry.resource("memo://{name}", scopes=["memos:read"])
    def memo(name: str) -> str:
        return name

    return registry


def user(name: str, *perms: str) -> Any:
    account = get_user_model().objects.create_user(username=name)
    for perm in perms:
        app_label, codename = perm.split(".")
        account.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return get_user_model().objects.get(pk=account.pk)  # no stale permission cache


def token(scopes: list[str], owner: Any = None) -> AccessToken:
    return AccessToken(token="t", client_id="c", scopes=scopes, claims={"sub": "s"}, user=owner)


async def names(server: MCPServer, principal: Principal, method: str = "tools/list") -> list[str]:
    response = await run(server, request(method, {}), modern_info(principal=principal))
    key = {
        "tools/list": "tools",
        "prompts/list": "prompts",
        "resources/list": "resources",
        "resources/templates/list": "resourceTemplates",
    }[method]
    return [item["name"] for item in response["result"][key]]


async def call(server: MCPServer, principal: Principal, name: str) -> dict[str, Any]:
    message = request("tools/call", {"name": name, "arguments": {}})
    info = modern_info(principal=principal, headers={"mcp-name": name})
    return await run(server, message, info)


# -- declaring -------------------------------------------------------------------------------


def test_permission_must_name_app_label_and_codename() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"app_label\.codename"):
        MCPServer().tool(name="t", permissions=["view_report"])(lambda: None)


def test_scopes_as_one_string_is_refused() -> None:
    with pytest.raises(ImproperlyConfigured, match="list of strings"):
        MCPServer().tool(name="t", scopes="reports:read")(lambda: None)  # type: ignore[arg-type]


# -- tools/list --------------------------------------------------------------------------------


async def test_anonymous_sees_only_open_tools(server: MCPServer) -> None:
    assert await names(server, ANONYMOUS) == ["open_tool"]


async def test_user_with_the_permission_sees_the_tool(server: MCPServer) -> None:
    alice = await _user("alice", PERM)
    assert "staff_tool" in await names(server, principal_for(None, alice))


async def test_user_without_the_permission_does_not_see_the_tool(server: MCPServer) -> None:
    bob = await _user("bob")
    assert "staff_tool" not in await names(server, principal_for(None, bob))


async def test_session_user_is_not_limited_by_scopes(server: MCPServer) -> None:
    bob = await _user("bob")
    assert "scoped_tool" in await names(server, principal_for(None, bob))


async def test_token_needs_the_scope_to_call_but_not_to_list(server: MCPServer) -> None:
    # Listed, so that a client can call it, get 403 insufficient_scope and step up.
    assert "scoped_tool" in await names(server, principal_for(token(["reports:read"])))
    assert "scoped_tool" in await names(server, principal_for(token(["other"])))
    response = await call(server, principal_for(token(["other"])), "scoped_tool")
    assert response["error"]["message"] == "Unknown tool: scoped_tool"
    response = await call(server, principal_for(token(["reports:read"])), "scoped_tool")
    assert "error" not in response


async def test_anonymous_does_not_see_a_scoped_tool(server: MCPServer) -> None:
    assert "scoped_tool" not in await names(server, ANONYMOUS)


async def test_token_without_a_user_holds_no_permission(server: MCPServer) -> None:
    assert "staff_tool" not in await names(server, principal_for(token(["reports:read"])))


async def test_token_user_needs_both_the_permission_and_the_scope() -> None:
    registry = MCPServer()
    registry.tool(name="both", permissions=[PERM], scopes=["admin"])(lambda: "x")
    alice = await _user("alice", PERM)
    bob = await _user("bob")
    assert await names(registry, principal_for(token(["admin"], alice))) == ["both"]
    assert await names(registry, principal_for(token([], alice))) == ["both"]  # step-up helps
    assert await names(registry, principal_for(token(["admin"], bob))) == []
    assert (await call(registry, principal_for(token([], alice)), "both"))["error"]
    assert "result" in await call(registry, principal_for(token(["admin"], alice)), "both")


# -- tools/call ------------------------------------------------------------------------------


async def test_call_of_a_hidden_tool_answers_like_an_unknown_tool(server: MCPServer) -> None:
    bob = await _user("bob")
    hidden = await call(server, principal_for(None, bob), "staff_tool")
    unknown = await call(server, principal_for(None, bob), "staff_tool_x")
    assert hidden["error"]["code"] == unknown["error"]["code"]
    assert hidden["error"]["message"] == "Unknown tool: staff_tool"
    assert unknown["error"]["message"] == "Unknown tool: staff_tool_x"
    assert hidden["error"]["data"] == {"name": "staff_tool"}


async def test_call_by_a_permitted_user_runs(server: MCPServer) -> None:
    alice = await _user("alice", PERM)
    response = await call(server, principal_for(None, alice), "staff_tool")
    assert response["result"]["content"][0]["text"] == "staff"


async def test_superuser_holds_every_permission(server: MCPServer) -> None:
    root = await get_user_model().objects.acreate(username="root", is_superuser=True)
    response = await call(server, principal_for(None, root), "staff_tool")
    assert response["result"]["content"][0]["text"] == "staff"


async def test_inactive_user_holds_no_permission(server: MCPServer) -> None:
    alice = await _user("alice", PERM)
    alice.is_active = False
    assert "staff_tool" not in await names(server, principal_for(None, alice))


# -- prompts and resources -------------------------------------------------------------------


async def test_hidden_prompt_is_absent_and_unknown(server: MCPServer) -> None:
    bob = await _user("bob")
    principal = principal_for(None, bob)
    assert await names(server, principal, "prompts/list") == []
    response = await run(
        server,
        request("prompts/get", {"name": "staff_prompt"}),
        modern_info(principal=principal, headers={"mcp-name": "staff_prompt"}),
    )
    assert response["error"]["message"] == "Unknown prompt: staff_prompt"


async def test_hidden_resource_is_absent_and_not_found(server: MCPServer) -> None:
    assert await names(server, ANONYMOUS, "resources/list") == []
    response = await run(
        server,
        request("resources/read", {"uri": "memo://secret"}),
        modern_info(principal=ANONYMOUS, headers={"mcp-name": "memo://secret"}),
    )
    assert response["error"]["message"] == "Resource not found"


async def test_resource_template_needs_its_scope(server: MCPServer) -> None:
    principal = principal_for(token(["memos:read"]))
    assert await names(server, principal, "resources/templates/list") == ["memo"]
    assert await names(server, ANONYMOUS, "resources/templates/list") == []
    response = await run(
        server,
        request("resources/read", {"uri": "memo://x"}),
        modern_info(principal=principal_for(token([])), headers={"mcp-name": "memo://x"}),
    )
    assert response["error"]["message"] == "Resource not found"


# -- cost and caching ------------------------------------------------------------------------


class _Counting:
    """A user whose permission checks are counted (and never touch the database)."""

    pk = 7
    is_authenticated = True
    is_active = True
    is_superuser = False

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.asked = 0

    def has_perms(self, perms: Any) -> bool:
        self.asked += 1
        return self.answer


async def test_open_item_never_asks_for_permissions() -> None:
    counting = _Counting(True)
    assert await allowed(Access(), Principal(scope="user:7", user=counting))
    assert counting.asked == 0


async def test_answer_is_cached_per_user_within_the_ttl() -> None:
    counting = _Counting(True)
    principal = Principal(scope="user:7", user=counting)
    access = Access(permissions=(PERM,))
    assert await allowed(access, principal)
    counting.answer = False
    assert await allowed(access, principal)  # still the cached answer
    assert counting.asked == 1


@override_settings(MCP_TASKS={"PERMISSION_CACHE_TTL": 0})
async def test_zero_ttl_asks_every_time() -> None:
    counting = _Counting(True)
    principal = Principal(scope="user:7", user=counting)
    access = Access(permissions=(PERM,))
    assert await allowed(access, principal)
    counting.answer = False
    assert not await allowed(access, principal)
    assert counting.asked == 2


async def _user(name: str, *perms: str) -> Any:
    from mcp_tasks.core.db import db

    return await db(user)(name, *perms)

"""``Context`` in background tasks: FastMCP's seed suite
(``tests/server/tasks/test_context_background_task.py`` at 3522a9876), ported.

One test per seed test, with the seed's names, each asserting the same behaviour on this
project's API. The unit tests build a ``Context`` directly. The integration tests use a real
client over real HTTP (raw httpx: the modern tasks extension, or a 2025-11-25 legacy session),
a live daphne server, a real ``manage.py rqworker`` and real Redis (a private ``redis-server``
for this module) with the real channel layer: nothing is mocked. The tools they call are in
``tests/live_tools/seed_tools.py``.

Where the seed patched internals, these tests reach the same state for real: a worker whose
channel layer points at an unreachable Redis (announcing fails), a short-lived bearer token
(expired by the time the worker looks), the task service called from another process as the
Django admin calls it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_tasks import Context
from mcp_tasks.authoring.lifespan import lifespan_context
from tests.conftest import LiveServer
from tests.live_tools.seed_tools import SEED_LIFESPAN_VALUE
from tests.support.live import (
    SIGNED_IN,
    legacy_headers,
    legacy_initialize,
    sse_messages,
)
from tests.support.results import task_text_of as text_of
from tests.support.task_driver import TaskDriver, django_shell, structured_of, task_capabilities
from tests.support.worker_fixtures import (
    RedisProcess,
    RqWorker,
    TaskStack,
    free_port,
    module_redis,
    module_task_stack,
)

# -- the live stack of this module: private Redis, one server, one worker -------------------


@pytest.fixture(scope="module")
def seed_redis(request: pytest.FixtureRequest) -> Iterator[RedisProcess]:
    yield from module_redis(request, "seed suite redis")


@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest, seed_redis: RedisProcess) -> Iterator[TaskStack]:
    env = {"MCP_TASKS_TEST_LIFESPAN": "tests.live_tools.seed_tools.seed_lifespan"}
    yield from module_task_stack(request, seed_redis, env, label="seed suite")


@pytest.fixture
def seed_stack(request: pytest.FixtureRequest, stack: TaskStack) -> TaskStack:
    """The module's stack, its output attached to this test's report when it fails."""
    stack.attach(request)
    return stack


DriverFactory = Callable[..., TaskDriver]


@pytest.fixture
def driver(seed_stack: TaskStack, http: httpx.AsyncClient) -> DriverFactory:
    """``driver(*kinds, token=None, extensions=None)``: a modern tasks client declaring the
    tasks extension plus ``kinds`` (``elicitation``, ``sampling``…)."""

    def make(
        *kinds: str, token: str | None = None, extensions: dict[str, Any] | None = None
    ) -> TaskDriver:
        return TaskDriver(
            http,
            seed_stack.url,
            capabilities=task_capabilities(*kinds, extensions=extensions),
            token=token,
        )

    return make


# -- a 2025-11-25 legacy session: its GET stream and its tasks -----------------------------


@dataclass
class LegacySession:
    http: httpx.AsyncClient
    url: str
    session_id: str
    next_id: int = 100

    async def post(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        response = await self.http.post(
            self.url, json=body, headers=legacy_headers(self.session_id)
        )
        assert response.status_code == 200, response.text
        message: dict[str, Any] = response.json()
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result

    async def start_task(self, tool: str, arguments: dict[str, Any] | None = None) -> str:
        """``tools/call`` with ``params.task`` (the 2025-11-25 experimental tasks)."""
        result = await self.post(
            "tools/call", {"name": tool, "arguments": arguments or {}, "task": {"ttl": 600_000}}
        )
        task_id: str = result["task"]["taskId"]
        return task_id

    async def wait_terminal(self, task_id: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task = await self.post("tasks/get", {"taskId": task_id})
            if task["status"] in ("completed", "failed", "cancelled"):
                return task
            assert time.monotonic() < deadline, f"task {task_id} did not finish: {task}"
            await asyncio.sleep(0.05)

    async def result(self, task_id: str) -> dict[str, Any]:
        return await self.post("tasks/result", {"taskId": task_id})


@contextlib.asynccontextmanager
async def legacy_session(
    http: httpx.AsyncClient, url: str, capabilities: dict[str, Any] | None = None
) -> AsyncIterator[LegacySession]:
    session_id = await legacy_initialize(http, url, capabilities=capabilities)
    try:
        yield LegacySession(http, url, session_id)
    finally:
        with contextlib.suppress(httpx.HTTPError):
            await http.delete(url, headers=legacy_headers(session_id))


@contextlib.asynccontextmanager
async def log_stream(session: LegacySession) -> AsyncIterator[list[dict[str, Any]]]:
    """The session's GET stream, open (subscribed) on entry; yields the list that
    ``notifications/message`` params are appended to as they arrive."""
    received: list[dict[str, Any]] = []
    headers = {**legacy_headers(session.session_id), "Accept": "text/event-stream"}
    del headers["Content-Type"]
    async with session.http.stream("GET", session.url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()

        async def read() -> None:
            async for message in sse_messages(response):
                if message.get("method") == "notifications/message":
                    received.append(message["params"])

        reader = asyncio.ensure_future(read())
        try:
            yield received
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await reader


async def wait_until(
    predicate: Callable[[], bool], timeout: float = 30.0, what: str = "the condition"
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def log_texts(received: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (params["level"], params["data"]) for params in received if params.get("logger") == "seed"
    ]


# =============================================================================================
# Unit tests: the Context API surface
# =============================================================================================


class TestContextBackgroundTaskSupport:
    def test_context_not_background_task_by_default(self) -> None:
        ctx = Context()
        assert ctx.is_background_task is False
        assert ctx.task_id is None

    def test_context_is_background_task_when_task_id_provided(self) -> None:
        ctx = Context(task_id="test-task-123")
        assert ctx.is_background_task is True
        assert ctx.task_id == "test-task-123"

    def test_context_task_id_is_readonly(self) -> None:
        ctx = Context(task_id="test-task-123")
        with pytest.raises(AttributeError):
            setattr(ctx, "task_id", "new-id")  # noqa: B010 - assigning the property is the point
        assert ctx.task_id == "test-task-123"


class TestContextSessionProperty:
    def test_session_raises_when_no_session_available(self) -> None:
        ctx = Context()  # no request, no stored session, not a task
        with pytest.raises(RuntimeError, match="session is not available"):
            _ = ctx.session

    @pytest.mark.live
    @pytest.mark.redis
    async def test_session_uses_stored_session_in_background_task(
        self, seed_stack: TaskStack, http: httpx.AsyncClient, driver: DriverFactory
    ) -> None:
        stored = object()
        assert Context(session=stored, task_id="test-task-123").session is stored
        # In a worker: the task of a legacy session has that session, as a plain call in the
        # same session does (``ctx.session.id``)…
        async with legacy_session(http, seed_stack.url) as session:
            task_id = await session.start_task("seed_session_probe")
            await session.wait_terminal(task_id)
            probe = (await session.result(task_id))["structuredContent"]
        assert probe == {
            "available": True,
            "session_id_attribute": session.session_id,
            "error": None,
        }
        # …and a stateless (modern) client's task has none: a clear RuntimeError.
        modern = driver()
        probe = structured_of(await modern.run(await modern.call("seed_session_probe")))
        assert probe["available"] is False
        assert "session is not available" in probe["error"]

    def test_session_uses_stored_session_during_on_initialize(self) -> None:
        stored = object()
        ctx = Context(session=stored)  # outside any request, not a task
        assert ctx.request_context is None
        assert ctx.session is stored


@pytest.mark.live
@pytest.mark.redis
class TestContextBackgroundTaskLogging:
    """A worker's logs reach the creating legacy session's GET stream, gated by the level the
    session chose with ``logging/setLevel``."""

    async def test_background_task_honors_session_level(
        self, seed_stack: TaskStack, http: httpx.AsyncClient
    ) -> None:
        async with legacy_session(http, seed_stack.url) as session:
            assert await session.post("logging/setLevel", {"level": "error"}) == {}
            async with log_stream(session) as received:
                messages = [["info", "info msg"], ["error", "error msg"], ["emergency", "last msg"]]
                task_id = await session.start_task("seed_log_messages", {"messages": messages})
                assert (await session.wait_terminal(task_id))["status"] == "completed"
                await wait_until(
                    lambda: ("emergency", "last msg") in log_texts(received), what="the last log"
                )
        # Messages of one worker reach the stream in order: had "info msg" been sent, it would
        # be here before the last one. "error msg" (at the level) arrives exactly once.
        assert log_texts(received) == [("error", "error msg"), ("emergency", "last msg")]

    async def test_background_task_without_session_level_sends_all(
        self, seed_stack: TaskStack, http: httpx.AsyncClient
    ) -> None:
        async with legacy_session(http, seed_stack.url) as session, log_stream(session) as received:
            messages = [["debug", "debug msg"], ["info", "info msg"], ["emergency", "last msg"]]
            task_id = await session.start_task("seed_log_messages", {"messages": messages})
            assert (await session.wait_terminal(task_id))["status"] == "completed"
            await wait_until(
                lambda: ("emergency", "last msg") in log_texts(received), what="the last log"
            )
        assert log_texts(received) == [
            ("debug", "debug msg"),
            ("info", "info msg"),
            ("emergency", "last msg"),
        ]


class TestContextClientExtensionBackgroundTask:
    """``client_supports_extension`` in a worker reads the capabilities recorded with the task."""

    @pytest.mark.live
    @pytest.mark.redis
    async def test_background_task_detects_advertised_extension(
        self, driver: DriverFactory
    ) -> None:
        client = driver(extensions={"ext-abc": {}})
        task_id = await client.call(
            "seed_client_extensions", {"extension_ids": ["ext-abc", "ext-missing"]}
        )
        seen = structured_of(await client.run(task_id))
        assert seen == {
            "supports": {"ext-abc": True, "ext-missing": False},
            "is_background_task": True,
            "request_context_is_none": True,
        }

    @pytest.mark.live
    @pytest.mark.redis
    async def test_background_task_no_extensions_returns_false(
        self, seed_stack: TaskStack, http: httpx.AsyncClient
    ) -> None:
        # A 2025-11-25 session whose client advertised no extensions at all.
        async with legacy_session(http, seed_stack.url, capabilities={}) as session:
            task_id = await session.start_task(
                "seed_client_extensions", {"extension_ids": ["ext-abc"]}
            )
            await session.wait_terminal(task_id)
            seen = (await session.result(task_id))["structuredContent"]
        assert seen["supports"] == {"ext-abc": False}
        assert seen["is_background_task"] is True

    def test_no_session_returns_false(self) -> None:
        ctx = Context(task_id="test-task-ext")  # nothing known about the client
        assert ctx.client_supports_extension("ext-abc") is False


class TestContextElicitBackgroundTask:
    async def test_elicit_raises_when_background_task_but_no_docket(self) -> None:
        """A task's Context without a task backend (this project's Docket) cannot ask: the
        error names the missing piece."""
        ctx = Context(
            task_id="test-task-123", session="test-session", client_capabilities={"elicitation": {}}
        )
        with pytest.raises(RuntimeError, match=r"(?i)task backend|TaskBackend"):
            await ctx.elicit("Need input", str)


class TestElicitFailFast:
    @pytest.mark.live
    @pytest.mark.redis
    async def test_elicit_returns_cancel_when_notification_push_fails(
        self,
        task_server: Callable[..., LiveServer],
        rq_worker: Callable[..., RqWorker],
        http: httpx.AsyncClient,
        tmp_path: Path,
    ) -> None:
        """The worker records the question but cannot announce it (its channel layer is an
        unreachable Redis): once ``REDIS_FAILOVER_WAIT`` (5 s) has passed, ``ctx.elicit``
        returns ``CancelledElicitation`` instead of holding the task, and the tool finishes. Only the worker's channel layer is broken;
        the database, the queue and the server are real and healthy."""
        # A hold window far beyond the wait below: only fail-fast lets the task finish in time.
        server = task_server({"MCP_TASKS_TEST_INPUT_HOLD_WINDOW": "600"})
        rq_worker(
            server, env={"MCP_TASKS_TEST_CHANNEL_LAYER_URL": f"redis://127.0.0.1:{free_port()}/0"}
        )
        client = TaskDriver(http, server.mcp_url, capabilities=task_capabilities("elicitation"))
        task_id = await client.call("seed_failfast_tool", {"marker_dir": str(tmp_path)})
        task = await client.wait_for(
            task_id, lambda t: t["status"] in ("completed", "failed", "cancelled"), timeout=60
        )
        assert text_of(task) == "done"
        assert (tmp_path / "elicit_result").read_text().split() == ["CancelledElicitation"]
        # The question was withdrawn: nothing is left waiting for an answer nobody was told of.
        statuses = await django_shell(
            server,
            "from mcp_tasks.models import InputRequest\n"
            "result = list(InputRequest.objects.filter(task_id=task_id).values_list('status', flat=True))",
            task_id=task_id,
        )
        assert statuses == ["closed"]


class TestContextDocumentation:
    def test_is_background_task_has_docstring(self) -> None:
        doc = Context.is_background_task.__doc__
        assert doc is not None
        assert "background task" in doc.lower()

    def test_task_id_has_docstring(self) -> None:
        doc = Context.task_id.fget.__doc__  # type: ignore[attr-defined]
        assert doc is not None
        assert "task ID" in doc

    def test_session_has_docstring(self) -> None:
        doc = Context.session.fget.__doc__  # type: ignore[attr-defined]
        assert doc is not None
        assert "background task" in doc.lower()


# =============================================================================================
# Integration tests: real client, real HTTP, real worker, real Redis and channel layer
# =============================================================================================


@pytest.mark.live
@pytest.mark.redis
class TestBackgroundTaskIntegration:
    async def test_report_progress_in_background_task(
        self, seed_stack: TaskStack, driver: DriverFactory
    ) -> None:
        client = driver()
        task_id = await client.call("seed_progress_tool")
        assert text_of(await client.run(task_id)) == "done"
        progress = await django_shell(
            seed_stack.server,
            "from mcp_tasks.models import Task\n"
            "result = list(Task.objects.filter(pk=task_id).values_list('progress', 'progress_total').get())",
            task_id=task_id,
        )
        assert progress == [100, 100]

    async def test_context_wiring_in_background_task(
        self, seed_stack: TaskStack, http: httpx.AsyncClient, driver: DriverFactory
    ) -> None:
        # A stateless (modern) client: the session id is the one recorded with the task.
        client = driver()
        task_id = await client.call("seed_verify_wiring")
        wiring = structured_of(await client.run(task_id))
        assert wiring["task_id"] == task_id
        assert wiring["is_background_task"] is True
        assert wiring["request_context_is_none"] is True
        assert wiring["session_id"]
        assert wiring["session_id"] == wiring["recorded_session_id"]
        # A legacy session: the session's own id.
        async with legacy_session(http, seed_stack.url) as session:
            legacy_task_id = await session.start_task("seed_verify_wiring")
            await session.wait_terminal(legacy_task_id)
            wiring = (await session.result(legacy_task_id))["structuredContent"]
        assert wiring["task_id"] == legacy_task_id
        assert wiring["session_id"] == session.session_id
        assert wiring["is_background_task"] is True

    async def test_origin_request_id_round_trips_through_background_task(
        self, driver: DriverFactory
    ) -> None:
        client = driver()
        for request_id in ("origin-request-42", 4242):
            task_id = await client.call("seed_check_origin_request_id", request_id=request_id)
            seen = structured_of(await client.run(task_id))
            assert seen == {
                "origin_request_id": request_id,
                "stored_origin_request_id": request_id,
                "is_background_task": True,
                "request_context_is_none": True,
            }

    async def test_sample_uses_origin_request_id_in_background_task(
        self, driver: DriverFactory
    ) -> None:
        """``ctx.sample`` from a worker returns the client's answer (FastMCP: expected failure)."""
        captured: list[dict[str, Any]] = []

        def sampling_handler(params: dict[str, Any]) -> dict[str, Any]:
            captured.append(params)
            return {
                "role": "assistant",
                "content": {"type": "text", "text": "hello from background"},
                "model": "test-model",
                "stopReason": "endTurn",
            }

        client = driver("sampling")
        task_id = await client.call("seed_ask_client")
        task = await client.run(task_id, {"sampling/createMessage": sampling_handler})
        assert text_of(task) == "hello from background"
        assert len(captured) == 1
        assert captured[0]["messages"] == [
            {"role": "user", "content": {"type": "text", "text": "Say hello"}}
        ]

    async def test_elicit_accept_flow(self, driver: DriverFactory) -> None:
        asked: list[dict[str, Any]] = []
        client = driver("elicitation")
        task_id = await client.call("seed_ask_name")
        task = await client.run(
            task_id,
            {
                "elicitation/create": lambda params: {
                    "action": "accept",
                    "content": {"value": "Bob"},
                }
            },
            asked=asked,
        )
        assert text_of(task) == "Hello, Bob!"
        assert [request["params"]["message"] for request in asked] == ["What is your name?"]
        assert asked[0]["params"]["requestedSchema"]["properties"]["value"]["type"] == "string"

    async def test_elicit_decline_flow(self, driver: DriverFactory) -> None:
        client = driver("elicitation")
        task_id = await client.call("seed_optional_input")
        task = await client.run(
            task_id, {"elicitation/create": lambda params: {"action": "decline"}}
        )
        assert text_of(task) == "User declined"

    async def test_elicit_with_pydantic_model(self, driver: DriverFactory) -> None:
        asked: list[dict[str, Any]] = []
        client = driver("elicitation")
        task_id = await client.call("seed_get_user_info")
        task = await client.run(
            task_id,
            {
                "elicitation/create": lambda params: {
                    "action": "accept",
                    "content": {"name": "Alice", "age": 30},
                }
            },
            asked=asked,
        )
        assert text_of(task) == "Alice is 30"
        schema = asked[0]["params"]["requestedSchema"]
        assert schema["properties"]["name"]["type"] == "string"
        assert schema["properties"]["age"]["type"] == "integer"
        assert sorted(schema["required"]) == ["age", "name"]

    async def test_handle_task_input_rejects_when_not_waiting(
        self, seed_stack: TaskStack, driver: DriverFactory, http: httpx.AsyncClient
    ) -> None:
        """The one answer path (``service.answer``) refuses a task that is not waiting — a
        finished one, an already answered question, another principal's task — and stores
        nothing."""
        client = driver("elicitation")
        # A finished task that never asked anything.
        simple = await client.call("seed_simple_tool")
        assert text_of(await client.run(simple)) == "done"
        # A finished task whose question was answered.
        asked = await client.call("seed_ask_name")
        assert (
            text_of(
                await client.run(
                    asked,
                    {
                        "elicitation/create": lambda p: {
                            "action": "accept",
                            "content": {"value": "Bob"},
                        }
                    },
                )
            )
            == "Hello, Bob!"
        )
        # A task waiting for its answer, to be answered by the wrong principal.
        waiting = await client.call("seed_ask_name")
        key = next(iter((await client.wait_for_input(waiting))["inputRequests"]))

        outcome = await django_shell(
            seed_stack.server,
            """
            from mcp_tasks.models import InputRequest
            from mcp_tasks.tasks.state import service

            def rows(task_id):
                return list(InputRequest.objects.filter(task_id=task_id).order_by("sequence").values("key", "status", "response", "answered_by"))

            too_late = {"action": "accept", "content": {"value": "too late"}}
            asked_key = rows(asked)[0]["key"]
            result = {
                "finished": service.answer(simple, "elicit-1", too_late, principal_scope="anonymous", answered_by="client"),
                "finished_admin": service.answer(simple, "elicit-1", too_late, principal_scope=None, answered_by="admin"),
                "answered_again": service.answer(asked, asked_key, too_late, principal_scope="anonymous", answered_by="client"),
                "other_principal": service.answer(waiting, key, too_late, principal_scope="client:client-mallory:mallory", answered_by="client"),
                "rows_simple": rows(simple),
                "rows_asked": rows(asked),
                "rows_waiting": rows(waiting),
            }
            """,
            simple=simple,
            asked=asked,
            waiting=waiting,
            key=key,
        )
        assert outcome["finished"] is False
        assert outcome["finished_admin"] is False
        assert outcome["answered_again"] is False
        assert outcome["other_principal"] is False
        assert outcome["rows_simple"] == []
        assert [(r["status"], r["response"]) for r in outcome["rows_asked"]] == [
            ("answered", {"action": "accept", "content": {"value": "Bob"}})
        ]
        assert [
            (r["key"], r["status"], r["response"], r["answered_by"])
            for r in outcome["rows_waiting"]
        ] == [(key, "pending", None, "")]
        # Over the wire, another principal does not even find the task.
        mallory = driver("elicitation", token="valid-mallory")
        message = await mallory.rpc(
            "tasks/update",
            {"taskId": waiting, "inputResponses": {key: {"action": "decline"}}},
            name=waiting,
        )
        assert message["error"]["code"] == -32602
        # The owner's answer still works.
        task = await client.run(
            waiting,
            {"elicitation/create": lambda p: {"action": "accept", "content": {"value": "Eve"}}},
        )
        assert text_of(task) == "Hello, Eve!"


@pytest.mark.live
@pytest.mark.redis
class TestAccessTokenInBackgroundTasks:
    """The access token of the creating request, as the worker restores it (tokens from
    ``tests.live_tools.task_tools.verify``)."""

    async def test_token_round_trips_through_background_task(self, driver: DriverFactory) -> None:
        client = driver(token="valid-alice")
        task_id = await client.call("seed_check_token")
        assert text_of(await client.run(task_id)) == "valid-alice|client-alice"

    async def test_no_token_when_unauthenticated(self, driver: DriverFactory) -> None:
        # The same worker has just run a job with a token: the next job must not see it.
        with_token = driver(token="valid-alice")
        assert (
            text_of(await with_token.run(await with_token.call("seed_check_token")))
            == "valid-alice|client-alice"
        )
        if SIGNED_IN:  # anonymous access off: the next caller has a token of its own
            bob = driver(token="valid-bob")
            assert (
                text_of(await bob.run(await bob.call("seed_check_token"))) == "valid-bob|client-bob"
            )
            return
        anonymous = driver()
        assert text_of(await anonymous.run(await anonymous.call("seed_check_token"))) == "no-token"

    async def test_expired_token_returns_none(self, driver: DriverFactory, tmp_path: Path) -> None:
        """A token valid when the task was created but expired when the tool looks."""
        gate = tmp_path / "gate"
        creator = driver(token="short-2-carol")  # expires within 2 s of being verified
        task_id = await creator.call("seed_check_token", {"gate": str(gate)})
        created_at = time.time()
        await asyncio.sleep(max(0.0, created_at + 2.5 - time.time()))
        gate.touch()
        poller = driver(token="short-3600-carol")  # the same principal, still valid
        assert text_of(await poller.run(task_id)) == "no-token"

    async def test_valid_token_with_future_expiry(self, driver: DriverFactory) -> None:
        client = driver(token="short-3600-dave")
        assert (
            text_of(await client.run(await client.call("seed_check_token")))
            == "short-3600-dave|client-dave"
        )

    async def test_token_without_expiry_always_valid(self, driver: DriverFactory) -> None:
        client = driver(token="user-erin")  # no expires_at
        assert (
            text_of(await client.run(await client.call("seed_check_token")))
            == "user-erin|user-client"
        )


class TestLifespanContextInBackgroundTasks:
    @pytest.mark.live
    @pytest.mark.redis
    async def test_lifespan_context_falls_back_to_server_result(
        self, driver: DriverFactory
    ) -> None:
        assert Context(task_id="test-task", lifespan_context={"db": "x"}).lifespan_context == {
            "db": "x"
        }
        # In a worker: the configured LIFESPAN's value, with no request.
        client = driver()
        probe = structured_of(await client.run(await client.call("seed_lifespan_probe")))
        assert probe == {"lifespan_context": SEED_LIFESPAN_VALUE, "request_context_is_none": True}

    async def test_lifespan_context_returns_empty_dict_when_no_lifespan(self) -> None:
        ctx = Context(task_id="test-task")
        assert ctx.request_context is None
        assert ctx.lifespan_context == {}
        assert await lifespan_context() == {}  # no MCP_TASKS["LIFESPAN"] in tests.settings

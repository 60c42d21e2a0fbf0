"""Hostile input over real HTTP (issue 10 §1, §2): every request gets an answer, no 5xx.

One live daphne server (``tests.support.live_settings``) on the session's private Redis, with a real
``manage.py rqworker`` for the tests that run tasks, on the run's database (SQLite, or
PostgreSQL when the run is on PostgreSQL: that is where a NUL cannot be stored).

The rule under test (README, "Hostile input"; ``mcp_tasks/jsontext.py``):

- a message holding a lone UTF-16 surrogate is refused whole: invalid UTF-8 bytes →
  ``-32700`` Parse error, a ``\\ud800`` escape → ``-32600`` Invalid Request, both HTTP 400
  with ``id: null`` (JSON-RPC 2.0 §5.1: the id cannot be echoed), and a warning is logged;
- a NUL in client data the server stores → ``-32602`` naming the field, nothing stored; a
  task id with a NUL is the same ``-32602`` "Task not found" as any unknown id;
- text a tool produces with a NUL or a lone surrogate is stored and sent with U+FFFD;
- whatever escapes a request's handling ends it with ``-32603`` (the catch-all).
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer
from tests.live_tools.hostile_tools import STORED
from tests.support.live import (
    LEGACY,
    final_message,
    legacy_headers,
    legacy_initialize,
    messages_of,
    modern_headers,
    modern_request,
    sse_messages,
)
from tests.support.results import task_text_of as text_of
from tests.support.task_driver import TaskDriver, task_capabilities
from tests.support.worker_fixtures import RedisProcess, RqWorker, db_rows, start_rq_worker

pytestmark = [pytest.mark.live, pytest.mark.redis, pytest.mark.usefixtures("show_server_output")]

#: A server that does not answer within this many seconds has left the request hanging.
REPLY_TIMEOUT = 15.0
TASKS = task_capabilities()
NUL_ID = "task\x00id"


@pytest.fixture(scope="module")
def server_env(task_redis: RedisProcess) -> dict[str, str]:
    return {"REDIS_URL": task_redis.url, "REDIS_PREFIX": f"mcp_tasks_h_{uuid.uuid4().hex[:10]}"}


@pytest.fixture(scope="module")
def worker(
    module_server: LiveServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RqWorker]:
    log = tmp_path_factory.mktemp("hostile-worker") / "worker.log"
    worker = start_rq_worker(module_server.env, log, label="hostile rq worker")
    try:
        worker.wait_ready(module_server.env["REDIS_URL"])
        yield worker
    finally:
        worker.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=REPLY_TIMEOUT) as client:
        yield client


@pytest.fixture
def driver(http: httpx.AsyncClient, server: LiveServer) -> TaskDriver:
    return TaskDriver(http, server.mcp_url, capabilities=task_capabilities("elicitation"))


async def session_for(http: httpx.AsyncClient, server: LiveServer) -> str:
    return await legacy_initialize(http, server.mcp_url)


def raw_json(message: dict[str, Any]) -> bytes:
    """``message`` as JSON text; lone surrogates and NULs travel as ``\\u`` escapes."""
    return json.dumps(message).encode()


def header_value(text: str) -> str:
    """An ``Mcp-Name`` value: plain when safe, else the ``=?base64?…?=`` sentinel."""
    if text.isascii() and text.isprintable():
        return text
    encoded = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()
    return f"=?base64?{encoded}?="


async def post(
    http: httpx.AsyncClient, server: LiveServer, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    """POST raw bytes; (HTTP status, the final JSON-RPC message). A hang fails the test."""
    try:
        response = await http.post(server.mcp_url, content=body, headers=headers)
    except httpx.TimeoutException:
        pytest.fail(f"no response within {REPLY_TIMEOUT:g}s to {body[:200]!r}", pytrace=False)
    return response.status_code, final_message(response)


async def post_modern(
    http: httpx.AsyncClient, server: LiveServer, method: str, params: dict[str, Any], **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    name = params.get("name", params.get("uri", params.get("taskId")))
    body = modern_request(method, params, **kwargs)
    headers = modern_headers(method, None if name is None else header_value(str(name)))
    return await post(http, server, raw_json(body), headers)


async def post_legacy(
    http: httpx.AsyncClient,
    server: LiveServer,
    session_id: str,
    method: str,
    params: dict[str, Any] | None = None,
    request_id: Any = 1,
) -> tuple[int, dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
    return await post(http, server, raw_json(body), legacy_headers(session_id))


def warnings_in(server: LiveServer) -> int:
    return server.output().count("WARNING mcp_tasks.transport: refused a message")


async def assert_still_serves(http: httpx.AsyncClient, server: LiveServer) -> None:
    status, message = await post_modern(
        http, server, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}
    )
    assert status == 200 and message["result"]["structuredContent"] == {"result": 5}, message


# -- §1: a lone surrogate anywhere: an immediate 400, never silence ----------------------------

SURROGATE = "\ud800"
MODERN_SURROGATE_CASES: dict[str, tuple[str, dict[str, Any], Any]] = {
    "id of tools/list": ("tools/list", {}, SURROGATE),
    "tool name": ("tools/call", {"name": SURROGATE, "arguments": {}}, 1),
    "prompt name": ("prompts/get", {"name": SURROGATE}, 1),
    "resource uri": ("resources/read", {"uri": f"live://static/{SURROGATE}"}, 1),
    "resource template variable": ("resources/read", {"uri": f"live://items/{SURROGATE}"}, 1),
    "object key": ("tools/call", {"name": "add", "arguments": {SURROGATE: 1}}, 1),
}


@pytest.mark.parametrize("case", list(MODERN_SURROGATE_CASES))
async def test_modern_lone_surrogate_is_an_invalid_request_with_a_null_id(
    http: httpx.AsyncClient, server: LiveServer, case: str
) -> None:
    method, params, request_id = MODERN_SURROGATE_CASES[case]
    before = warnings_in(server)
    status, message = await post_modern(http, server, method, params, request_id=request_id)
    assert status == 400
    assert message["id"] is None  # JSON-RPC 2.0 §5: an id that cannot be read is null
    assert message["error"]["code"] == -32600
    assert "lone UTF-16 surrogate" in message["error"]["message"]
    assert warnings_in(server) > before
    await assert_still_serves(http, server)


LEGACY_SURROGATE_CASES: dict[str, tuple[str, dict[str, Any], Any]] = {
    "id of tools/list": ("tools/list", {}, SURROGATE),
    "method name": (SURROGATE, {}, 1),
    "tool name": ("tools/call", {"name": SURROGATE, "arguments": {}}, 1),
    "prompt name": ("prompts/get", {"name": SURROGATE}, 1),
    "resource template variable": ("resources/read", {"uri": f"live://items/{SURROGATE}"}, 1),
}


@pytest.mark.parametrize("case", list(LEGACY_SURROGATE_CASES))
async def test_legacy_lone_surrogate_is_an_invalid_request_with_a_null_id(
    http: httpx.AsyncClient, server: LiveServer, case: str
) -> None:
    method, params, request_id = LEGACY_SURROGATE_CASES[case]
    session_id = await session_for(http, server)
    status, message = await post_legacy(http, server, session_id, method, params, request_id)
    assert status == 400
    assert message["id"] is None
    assert message["error"]["code"] == -32600


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize(
    "raw", [b"\xed\xa0\x80", b"\xff", b"\xc0\x80"], ids=["encoded-surrogate", "ff", "overlong-nul"]
)
async def test_invalid_utf8_in_the_body_is_a_parse_error(
    http: httpx.AsyncClient, server: LiveServer, era: str, raw: bytes
) -> None:
    """RFC 8259 §8.1: JSON text exchanged between systems is UTF-8; these bytes are not."""
    before = warnings_in(server)
    body = raw_json(modern_request("tools/list", request_id="ID")).replace(
        b'"ID"', b'"' + raw + b'"'
    )
    headers = modern_headers("tools/list") if era == "modern" else legacy_headers("any")
    status, message = await post(http, server, body, headers)
    assert (status, message["id"], message["error"]["code"]) == (400, None, -32700)
    assert "not valid UTF-8" in message["error"]["message"]
    assert warnings_in(server) > before


@pytest.mark.parametrize("number", [b"1e999", b"-1e400", b"NaN", b"Infinity", b"1" * 5000], ids=str)
async def test_numbers_json_cannot_carry_are_a_parse_error(
    http: httpx.AsyncClient, server: LiveServer, number: bytes
) -> None:
    """RFC 8259 §6: NaN and Infinity are not JSON; a number beyond a double is refused."""
    body = raw_json(modern_request("tools/call", {"name": "add", "arguments": {"a": 7, "b": 1}}))
    status, message = await post(
        http,
        server,
        body.replace(b'"a": 7', b'"a": ' + number),
        modern_headers("tools/call", "add"),
    )
    assert (status, message["error"]["code"]) == (400, -32700)


async def test_nesting_deeper_than_the_limit_is_an_invalid_request(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    deep: Any = "bottom"
    for _ in range(150):
        deep = [deep]
    body = modern_request("tools/call", {"name": "add", "arguments": {"a": deep, "b": 1}})
    status, message = await post(http, server, raw_json(body), modern_headers("tools/call", "add"))
    assert (status, message["error"]["code"]) == (400, -32600)
    assert "deeper than 100" in message["error"]["message"]


# -- §2: NUL in client data the server stores: -32602 naming the field -------------------------


def session_rows(server: LiveServer) -> int:
    return int(db_rows(server.database_url, "SELECT COUNT(*) FROM mcp_tasks_legacysession")[0][0])


def task_rows(server: LiveServer) -> int:
    return int(db_rows(server.database_url, "SELECT COUNT(*) FROM mcp_tasks_task")[0][0])


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"clientInfo": {"name": "a\x00b", "version": "1"}}, "params.clientInfo.name"),
        ({"capabilities": {"x\x00": {}}}, 'params.capabilities["x\\u0000"]'),
    ],
    ids=["clientInfo", "capabilities-key"],
)
async def test_initialize_with_a_nul_creates_no_session(
    http: httpx.AsyncClient, server: LiveServer, params: dict[str, Any], field: str
) -> None:
    before = session_rows(server)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {}, **params},
    }
    status, message = await post(http, server, raw_json(body), legacy_headers())
    assert status == 200  # a legacy method's JSON-RPC error travels with HTTP 200
    assert message["error"] == {
        "code": -32602,
        "message": f"{field}: NUL characters are not allowed",
    }
    assert session_rows(server) == before


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"value": "a\x00b"}, "params.arguments.value"),
        ({"value": "ok", "unknown": ["x", "\x00"]}, "params.arguments.unknown[1]"),
        ({"value": "ok", "\x00": 1}, 'params.arguments["\\u0000"]'),
    ],
    ids=["argument", "unknown-extra-key", "key"],
)
async def test_task_tool_argument_with_a_nul_is_refused_and_no_task_is_created(
    http: httpx.AsyncClient, server: LiveServer, arguments: dict[str, Any], field: str
) -> None:
    before = task_rows(server)
    status, message = await post_modern(
        http,
        server,
        "tools/call",
        {"name": "lt_quick", "arguments": arguments},
        capabilities=TASKS,
    )
    assert status == 400
    assert message["error"] == {
        "code": -32602,
        "message": f"{field}: NUL characters are not allowed",
    }
    assert task_rows(server) == before


async def test_task_call_with_a_nul_in_the_envelope_is_refused(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    body = modern_request("tools/call", {"name": "lt_quick", "arguments": {"value": "x"}})
    meta = body["params"]["_meta"]
    meta["io.modelcontextprotocol/clientCapabilities"] = TASKS
    meta["io.modelcontextprotocol/clientInfo"] = {"name": "n\x00", "version": "1"}
    status, message = await post(
        http, server, raw_json(body), modern_headers("tools/call", "lt_quick")
    )
    assert status == 400
    assert message["error"]["message"] == (
        'params._meta["io.modelcontextprotocol/clientInfo"].name: NUL characters are not allowed'
    )


@pytest.mark.parametrize(
    ("request_id", "token", "field"),
    [("id\x00", None, "id"), (1, "tok\x00", "params._meta.progressToken")],
    ids=["request-id", "progress-token"],
)
async def test_task_call_with_a_nul_in_what_the_snapshot_keeps_is_refused(
    http: httpx.AsyncClient, server: LiveServer, request_id: Any, token: Any, field: str
) -> None:
    status, message = await post_modern(
        http,
        server,
        "tools/call",
        {"name": "lt_quick", "arguments": {"value": "x"}},
        capabilities=TASKS,
        request_id=request_id,
        progress_token=token,
    )
    assert (status, message["error"]["code"]) == (400, -32602)
    assert message["error"]["message"] == f"{field}: NUL characters are not allowed"


async def test_legacy_task_call_with_a_nul_argument_is_refused(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    session_id = await session_for(http, server)
    status, message = await post_legacy(
        http,
        server,
        session_id,
        "tools/call",
        {"name": "lt_quick", "arguments": {"value": "\x00"}, "task": {"ttl": 60000}},
    )
    assert status == 200
    assert message["error"]["code"] == -32602
    assert message["error"]["message"] == "params.arguments.value: NUL characters are not allowed"


async def test_legacy_subscribe_with_a_nul_uri_is_refused_and_not_stored(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    session_id = await session_for(http, server)
    _, message = await post_legacy(
        http, server, session_id, "resources/subscribe", {"uri": "live://static/info\x00"}
    )
    assert message["error"] == {
        "code": -32602,
        "message": "params.uri: NUL characters are not allowed",
    }
    rows = db_rows(
        server.database_url,
        "SELECT subscriptions FROM mcp_tasks_legacysession WHERE id = %s",
        (session_id,),
    )
    stored = rows[0][0]
    assert (json.loads(stored) if isinstance(stored, str) else stored) == []


async def test_a_nul_is_fine_where_nothing_is_stored(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    """Only stored values are refused: a prompt argument with a NUL renders as sent."""
    status, message = await post_modern(
        http, server, "prompts/get", {"name": "live_greeting", "arguments": {"name": "A\x00B"}}
    )
    assert status == 200
    assert "A\x00B" in message["result"]["messages"][0]["content"]["text"]


@pytest.mark.parametrize(
    "method", ["tasks/get", "tasks/update", pytest.param("tasks/cancel", marks=pytest.mark.cancel)]
)
async def test_modern_task_id_with_a_nul_is_not_found_like_any_unknown_id(
    http: httpx.AsyncClient, server: LiveServer, method: str
) -> None:
    """Tasks extension: an invalid or nonexistent taskId is -32602, one message for all."""
    params: dict[str, Any] = {"inputResponses": {}} if method == "tasks/update" else {}
    answers = []
    for task_id in (NUL_ID, "no-such-task"):
        status, message = await post_modern(
            http, server, method, {"taskId": task_id, **params}, capabilities=TASKS
        )
        answers.append((status, message["error"]))
    assert answers[0] == answers[1] == (400, {"code": -32602, "message": "Task not found"})


@pytest.mark.parametrize(
    "method", ["tasks/get", "tasks/result", pytest.param("tasks/cancel", marks=pytest.mark.cancel)]
)
async def test_legacy_task_id_with_a_nul_is_not_found(
    http: httpx.AsyncClient, server: LiveServer, method: str
) -> None:
    session_id = await session_for(http, server)
    _, message = await post_legacy(http, server, session_id, method, {"taskId": NUL_ID})
    assert message["error"] == {"code": -32602, "message": "Task not found"}


async def test_listen_ignores_a_task_id_with_a_nul(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    body = modern_request(
        "subscriptions/listen",
        {"notifications": {"taskIds": [NUL_ID]}},
        capabilities=TASKS,
    )
    async with http.stream(
        "POST",
        server.mcp_url,
        content=raw_json(body),
        headers=modern_headers("subscriptions/listen"),
    ) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                acknowledged = json.loads(line[5:])
                break
    assert acknowledged["params"]["notifications"]["taskIds"] == []


async def test_update_with_a_nul_answer_names_it_and_still_records_the_others(
    driver: TaskDriver, worker: RqWorker
) -> None:
    """tasks/update: each response is handled on its own (tasks extension: partial sets are
    fine); the refused one is named in a -32602 and its question stays open."""
    task_id = await driver.call("multi_input")
    task = await driver.wait_for(
        task_id, lambda t: set(t.get("inputRequests") or {}) == {"name", "confirm"}
    )
    message = await driver.rpc(
        "tasks/update",
        {
            "taskId": task_id,
            "inputResponses": {
                "confirm": {"action": "accept", "content": {"confirm": True}},
                "name": {"action": "accept", "content": {"name": "Ada\x00"}},
            },
        },
        name=task_id,
    )
    assert message["error"]["code"] == -32602
    assert message["error"]["message"].startswith(
        "params.inputResponses.name.content.name: NUL characters are not allowed"
    )
    task = await driver.wait_for(task_id, lambda t: list(t.get("inputRequests") or {}) == ["name"])
    assert task["status"] == "input_required"
    final = await driver.run(
        task_id, {"elicitation/create": lambda p: {"action": "accept", "content": {"name": "Ada"}}}
    )
    assert "Ada" in text_of(final)


# -- text a tool produces: stored and sent with U+FFFD -------------------------------------------


async def test_task_output_with_a_nul_and_a_surrogate_is_stored_with_replacements(
    driver: TaskDriver, server: LiveServer, worker: RqWorker
) -> None:
    task_id = await driver.call("unstorable_output")
    task = await driver.run(task_id)
    assert text_of(task) == STORED
    assert task["statusMessage"] == "Completed"
    rows = db_rows(
        server.database_url,
        "SELECT logger_name, data FROM mcp_tasks_tasklogentry WHERE task_id = %s",
        (task_id,),
    )
    logger_name, data = rows[0]
    assert logger_name == f"logger{STORED}"
    assert (json.loads(data) if isinstance(data, str) else data) == {"line": STORED}
    assert "a log line of task" in worker.output()  # the warning the rule promises


async def test_task_question_with_a_nul_is_asked_with_replacements(
    driver: TaskDriver, worker: RqWorker
) -> None:
    task_id = await driver.call("unstorable_question")
    task = await driver.wait_for_input(task_id)
    (request,) = task["inputRequests"].values()
    assert request["params"]["message"] == f"question {STORED}"
    assert task["statusMessage"] == f"question {STORED}"
    await driver.rpc("tasks/cancel", {"taskId": task_id}, name=task_id)


async def test_plain_call_output_that_cannot_be_encoded_is_sent_repaired(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    """A lone surrogate in a result would make the JSON unencodable: U+FFFD instead."""
    status, message = await post_modern(
        http, server, "tools/call", {"name": "unsendable_output", "arguments": {}}
    )
    assert status == 200
    assert message["result"]["content"][0]["text"] == "a\x00b\ufffdc"


async def test_a_task_tool_called_plainly_answers_its_result_as_stored(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    """A client without the tasks extension gets the task's result as it was stored (a NUL
    cannot be stored either): what ``tasks/get`` gives a client of the extension."""
    status, message = await post_modern(
        http, server, "tools/call", {"name": "unstorable_output", "arguments": {}}
    )
    assert status == 200
    assert message["result"]["content"][0]["text"] == STORED


async def test_plain_call_returning_infinity_sends_null(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    status, message = await post_modern(
        http, server, "tools/call", {"name": "infinite_number", "arguments": {}}
    )
    assert status == 200
    assert message["result"]["structuredContent"] == {"result": None}


# -- the catch-all: whatever escapes a request ends it with -32603 ------------------------------


async def test_fault_past_every_handler_is_answered_with_internal_error(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    status, message = await post_modern(
        http, server, "tools/call", {"name": "break_request", "arguments": {}}, request_id=41
    )
    assert status == 500
    assert message == {
        "jsonrpc": "2.0",
        "id": 41,
        "error": {"code": -32603, "message": "Internal error"},
    }
    await assert_still_serves(http, server)


async def test_fault_after_the_stream_started_ends_it_with_internal_error(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    body = modern_request(
        "tools/call",
        {"name": "break_request", "arguments": {"stream_first": True}},
        request_id=42,
        progress_token="p",
    )
    response = await http.post(
        server.mcp_url,
        content=raw_json(body),
        headers=modern_headers("tools/call", "break_request"),
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = messages_of(response)
    assert messages[0]["method"] == "notifications/progress"
    assert messages[-1] == {
        "jsonrpc": "2.0",
        "id": 42,
        "error": {"code": -32603, "message": "Internal error"},
    }


async def test_legacy_fault_is_answered_with_internal_error(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    session_id = await session_for(http, server)
    status, message = await post_legacy(
        http, server, session_id, "tools/call", {"name": "break_request", "arguments": {}}, 7
    )
    assert (status, message["id"], message["error"]["code"]) == (500, 7, -32603)


# -- isolation: a fault or a dropped client never touches the requests beside it ---------------


async def _drop_mid_body(server: LiveServer) -> None:
    """Send the headers and half the body, then close the connection."""
    body = raw_json(modern_request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}))
    host, port = "127.0.0.1", server.port
    _reader, writer = await asyncio.open_connection(host, port)
    head = "".join(f"{k}: {v}\r\n" for k, v in modern_headers("tools/call", "add").items())
    writer.write(
        f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
        + body[: len(body) // 2]
    )
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def _drop_mid_response(http: httpx.AsyncClient, server: LiveServer) -> None:
    """Start a streaming call and leave after its first event."""
    body = modern_request(
        "tools/call", {"name": "progress_steps", "arguments": {"steps": 50}}, progress_token="t"
    )
    async with http.stream(
        "POST",
        server.mcp_url,
        content=raw_json(body),
        headers=modern_headers("tools/call", "progress_steps"),
    ) as response:
        async for _line in response.aiter_lines():
            break


async def test_a_fault_and_dropped_clients_do_not_affect_concurrent_requests(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    async def normal(n: int) -> dict[str, Any]:
        _, message = await post_modern(
            http, server, "tools/call", {"name": "add", "arguments": {"a": n, "b": n}}, request_id=n
        )
        return message

    async def streaming(n: int) -> dict[str, Any]:
        body = modern_request(
            "tools/call",
            {"name": "progress_steps", "arguments": {"steps": 5}},
            request_id=f"s{n}",
            progress_token=f"t{n}",
        )
        response = await http.post(
            server.mcp_url,
            content=raw_json(body),
            headers=modern_headers("tools/call", "progress_steps"),
        )
        return final_message(response)

    async def faulty(n: int) -> dict[str, Any]:
        _, message = await post_modern(
            http, server, "tools/call", {"name": "break_request", "arguments": {}}, request_id=n
        )
        return message

    results = await asyncio.gather(
        *[normal(n) for n in range(10)],
        *[streaming(n) for n in range(4)],
        *[faulty(100 + n) for n in range(3)],
        *[_drop_mid_body(server) for _ in range(3)],
        *[_drop_mid_response(http, server) for _ in range(3)],
    )
    for n, message in enumerate(results[:10]):
        assert message["id"] == n, message
        assert message["result"]["structuredContent"] == {"result": 2 * n}, message
    for message in results[10:14]:
        assert message["result"]["content"][0]["text"] == "done 5 steps", message
    for message in results[14:17]:
        assert message["error"]["code"] == -32603, message
    await assert_still_serves(http, server)


async def _legacy_drop_mid_response(http: httpx.AsyncClient, server: LiveServer, n: int) -> None:
    """A legacy call that streams progress, left after its first event."""
    session_id = await session_for(http, server)
    body = {
        "jsonrpc": "2.0",
        "id": f"p{n}",
        "method": "tools/call",
        "params": {
            "name": "progress_steps",
            "arguments": {"steps": 50},
            "_meta": {"progressToken": f"t{n}"},
        },
    }
    async with http.stream(
        "POST", server.mcp_url, content=raw_json(body), headers=legacy_headers(session_id)
    ) as response:
        async for _line in response.aiter_lines():
            break


async def test_legacy_faults_and_dropped_clients_leave_calls_and_get_streams_alone(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    sessions = [await session_for(http, server) for _ in range(3)]
    headers = legacy_headers(sessions[0], Accept="text/event-stream")
    async with http.stream("GET", server.mcp_url, headers=headers) as stream:
        assert stream.status_code == 200
        events = sse_messages(stream)

        async def normal(n: int) -> dict[str, Any]:
            _, message = await post_legacy(
                http, server, sessions[n % 3], "tools/call",
                {"name": "add", "arguments": {"a": n, "b": n}}, n,
            )  # fmt: skip
            return message

        async def faulty(n: int) -> dict[str, Any]:
            _, message = await post_legacy(
                http, server, sessions[n % 3], "tools/call",
                {"name": "break_request", "arguments": {}}, n,
            )  # fmt: skip
            return message

        results = await asyncio.gather(
            *[normal(n) for n in range(10)],
            *[faulty(100 + n) for n in range(3)],
            *[_legacy_drop_mid_response(http, server, n) for n in range(3)],
            *[_drop_mid_body(server) for _ in range(3)],
        )
        for n, message in enumerate(results[:10]):
            assert message["id"] == n, message
            assert message["result"]["structuredContent"] == {"result": 2 * n}, message
        for message in results[10:13]:
            assert message["error"]["code"] == -32603, message
        # The session's GET stream is still open and still delivers.
        await post_legacy(
            http,
            server,
            sessions[1],
            "tools/call",
            {"name": "announce", "arguments": {"kind": "tools"}},
        )
        notification = await asyncio.wait_for(anext(events), REPLY_TIMEOUT)
    assert notification["method"] == "notifications/tools/list_changed"
    await assert_still_serves(http, server)

"""Property-based fuzzing of the HTTP/JSON-RPC surface (issue 10), against a real daphne
subprocess on the run's database (SQLite, or PostgreSQL when the run is on it).

Hypothesis writes requests of every method of both eras — and methods that do not exist —
with arbitrary JSON in every field: strings with NULs and lone surrogates, huge integers,
deep nesting, wrong types; and raw bodies with invalid UTF-8, encoded surrogates and number
literals JSON does not have. Every answer must hold to:

- **an answer at all**: within :data:`REPLY_TIMEOUT` (a hang fails), for streams the final
  response (``subscriptions/listen``: its acknowledgement);
- **never 5xx**;
- **only documented error codes**: ``-32700 -32600 -32601 -32602 -32020 -32021 -32022``, the
  legacy ``-32002`` (resource not found, 2025-era resources/read), and ``-32603`` only where
  it is documented (a prompt or resource function that raised, a task that could not be
  queued or recorded, a cancelled legacy task's result) — never the catch-all's bare
  "Internal error";
- **HTTP statuses per the mapping** (``shared/mcp-notes.md`` §2): a modern JSON error travels
  with ``http_status_for(code)``; a legacy method's error with 200; a notification → 202;
- the response's ``id`` is the request's (or null when the request could not be read);
- and after each test the server still serves a normal call and has logged no catch-all.

CI runs a short pass (:data:`DEFAULT_EXAMPLES` per test, well under a minute per database);
``MCP_TASKS_FUZZ_EXAMPLES=5000`` runs a long one (README, "Tests").
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from mcp_tasks.protocol.constants import http_status_for
from tests.conftest import LiveServer
from tests.support.live import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    attach_server_output,
    legacy_headers,
    modern_headers,
    modern_request,
)

pytestmark = pytest.mark.live

#: Examples per test in CI; MCP_TASKS_FUZZ_EXAMPLES overrides it (a long run on demand).
DEFAULT_EXAMPLES = 500
EXAMPLES = int(os.environ.get("MCP_TASKS_FUZZ_EXAMPLES") or DEFAULT_EXAMPLES)
#: A server that does not answer within this many seconds has left the request hanging.
REPLY_TIMEOUT = 20.0

FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)

TASKS = "io.modelcontextprotocol/tasks"
DOCUMENTED = {-32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022}
#: The only -32603 errors the server documents (README, "Hostile input").
DOCUMENTED_INTERNAL = (
    "Error rendering prompt",
    "Error reading resource",
    "Could not start the task",
    "Could not record",
    "The task was cancelled",
)

# -- what the server has (quick, side-effect-free targets) -------------------------------------

TOOLS = [
    "add",
    "summarize",
    "forecast",
    "fail_for_client",
    "fail_internally",
    "whoami",
    "test_simple_text",
    "elicit_kind",
    "elicit_twice",
    "ask_model",
    "client_roots",
    "log_every_level",
    "progress_steps",
    "infinite_number",
    "unstorable_output",
    "trivial_task",
    "lt_quick",
    "lt_required",
    "lt_forbidden",
    "lt_optional",
    "lt_tool_error",
    "lt_elicit",
    "raising_task",
    "multi_input",
    "test_input_required_result_multiple_inputs",
]
ARGUMENT_NAMES = ["a", "b", "values", "city", "unit", "reason", "kind", "question", "n", "value"]
ARGUMENT_NAMES += ["steps"]
PROMPTS = ["live_greeting", "confirm_examples", "review_code"]
URIS = ["live://static/info", "live://bytes/logo", "demo://readme"]
TEMPLATES = ["live://items/{}", "demo://greeting/{}"]
MODERN_METHODS = [
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "subscriptions/listen",
]
LEGACY_METHODS = [
    "ping",
    "logging/setLevel",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "tasks/get",
    "tasks/list",
    "tasks/cancel",
    "tasks/result",
]
KNOWN = {*MODERN_METHODS, *LEGACY_METHODS, "initialize"}
EXTRA_METHODS = ["initialize", "tasks/result", "tasks/list", "ping", "notifications/cancelled"]

# -- strategies -----------------------------------------------------------------------------------


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of ``choices`` with the given odds (``st.one_of`` does not weight its branches).
    The first one is what a failing example shrinks towards."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda index: table[index])


NASTY = ["", "\x00", "a\x00b", "\ud800", "x\udfff", "\ud83d", "\ufeff", "\u2028", "%00"]
characters = st.one_of(
    st.characters(),
    st.integers(0xD800, 0xDFFF).map(chr),  # lone surrogates: Hypothesis leaves them out
    st.just("\x00"),
)
long_texts = st.integers(1000, 5000).map(lambda size: "A" * size)
hostile_texts = st.one_of(st.text(characters, max_size=24), st.sampled_from(NASTY), long_texts)
#: Mostly ordinary text (one lone surrogate anywhere refuses the whole message, so hostile
#: text everywhere would never get past the parser), hostile text one time in four.
texts = weighted((3, st.text(max_size=24)), (1, hostile_texts))
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=10**400),  # past int64 and a double
    st.floats(allow_nan=False, allow_infinity=False),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)
    ),
    max_leaves=10,
)


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


deep = st.integers(50, 400).map(nested)
anything = weighted((5, values), (1, deep))


def maybe(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value (four times in five), sometimes anything at all."""
    return weighted((4, plausible), (1, anything))


def field_dict(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with any subset of ``fields`` plus stray keys."""
    return st.fixed_dictionaries({}, optional={**fields, "stray": anything, "_meta": anything}).map(
        dict
    )


def _uris() -> st.SearchStrategy[str]:
    filled = st.tuples(st.sampled_from(TEMPLATES), texts).map(lambda t: t[0].format(t[1]))
    return st.one_of(st.sampled_from(URIS), filled, texts)


def _params(real_task_ids: list[str]) -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    task_id = maybe(st.sampled_from([*real_task_ids, "no-such-task"]) | texts)
    arguments = maybe(
        st.dictionaries(st.sampled_from(ARGUMENT_NAMES) | texts, anything, max_size=4)
    )
    responses = maybe(st.dictionaries(st.sampled_from(["name", "confirm"]) | texts, anything))
    return {
        "tools/call": field_dict(
            {
                "name": maybe(st.sampled_from(TOOLS)),
                "arguments": arguments,
                "task": maybe(st.fixed_dictionaries({"ttl": numbers})),
                "inputResponses": responses,
                "requestState": maybe(texts),
            }
        ),
        "prompts/get": field_dict(
            {
                "name": maybe(st.sampled_from(PROMPTS)),
                "arguments": maybe(st.dictionaries(texts, texts | anything, max_size=3)),
            }
        ),
        "resources/read": field_dict({"uri": maybe(_uris())}),
        "resources/subscribe": field_dict({"uri": maybe(_uris())}),
        "resources/unsubscribe": field_dict({"uri": maybe(_uris())}),
        "completion/complete": field_dict(
            {
                "ref": maybe(
                    st.fixed_dictionaries(
                        {
                            "type": st.sampled_from(["ref/prompt", "ref/resource"]),
                            "name": maybe(
                                st.sampled_from([*PROMPTS, "test_prompt_with_arguments"])
                            ),
                            "uri": maybe(st.just("test://template/{id}/data")),
                        }
                    )
                ),
                "argument": maybe(st.fixed_dictionaries({"name": texts, "value": anything})),
                "context": maybe(st.fixed_dictionaries({"arguments": anything})),
            }
        ),
        "tasks/get": field_dict({"taskId": task_id}),
        "tasks/cancel": field_dict({"taskId": task_id}),
        "tasks/result": field_dict({"taskId": task_id}),
        "tasks/update": field_dict({"taskId": task_id, "inputResponses": responses}),
        "tasks/list": field_dict({"cursor": maybe(texts)}),
        "logging/setLevel": field_dict({"level": maybe(st.sampled_from(["debug", "error"]))}),
        "subscriptions/listen": field_dict(
            {
                "notifications": maybe(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "toolsListChanged": anything,
                            "resourceSubscriptions": anything,
                            "taskIds": maybe(st.lists(task_id, max_size=3)),
                        },
                    )
                )
            }
        ),
        "initialize": field_dict(
            {
                "protocolVersion": maybe(st.sampled_from([LEGACY, "2025-03-26", MODERN])),
                "capabilities": anything,
                "clientInfo": anything,
            }
        ),
    }


def _request(
    methods: list[str], params: dict[str, st.SearchStrategy[dict[str, Any]]]
) -> st.SearchStrategy[tuple[Any, str, dict[str, Any]]]:
    """``(id, method, params)``; ids are mostly plain, sometimes anything."""
    method = weighted(
        (4, st.just("tools/call")),  # the method with the most behind it
        (7, st.sampled_from(methods)),
        (1, st.sampled_from(EXTRA_METHODS)),
        (1, texts),
    )
    request_id = weighted((4, st.integers(0, 10**6)), (1, texts), (1, anything))
    return method.flatmap(
        lambda name: st.tuples(request_id, st.just(name), params.get(name, field_dict({})))
    )


CAPABILITIES: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {},
        {"extensions": {TASKS: {}}},
        {"extensions": {TASKS: {}}, "elicitation": {"form": {}}, "sampling": {}, "roots": {}},
        {"elicitation": {"form": {}}},
    ]
)


def _meta() -> st.SearchStrategy[Any]:
    envelope = st.fixed_dictionaries(
        {
            "io.modelcontextprotocol/protocolVersion": maybe(st.just(MODERN)),
            "io.modelcontextprotocol/clientCapabilities": maybe(CAPABILITIES),
        },
        optional={
            "io.modelcontextprotocol/clientInfo": anything,
            "io.modelcontextprotocol/logLevel": maybe(st.sampled_from(["debug", "info"])),
            "progressToken": maybe(texts | st.integers()),
        },
    )
    return weighted((6, envelope), (1, anything))


# -- sending and judging -------------------------------------------------------------------------


def header_value(value: Any) -> str | None:
    """A header for a body field: plain when safe, else the ``=?base64?…?=`` sentinel."""
    if not isinstance(value, str):
        return None
    if value.isascii() and value.isprintable():
        return value
    raw = value.encode("utf-8", "surrogatepass")
    return f"=?base64?{base64.b64encode(raw).decode()}?="


def send(
    http: httpx.Client, server: LiveServer, body: bytes, headers: dict[str, str], listen: bool
) -> tuple[int, str, list[dict[str, Any]]]:
    """POST and read the answer: (status, content type, JSON-RPC messages). A stream is read
    until its final response (``subscriptions/listen``: its first message)."""
    deadline = time.monotonic() + REPLY_TIMEOUT
    messages: list[dict[str, Any]] = []
    try:
        with http.stream("POST", server.mcp_url, content=body, headers=headers) as response:
            kind = response.headers.get("content-type", "")
            if not kind.startswith("text/event-stream"):
                response.read()
                if response.content:
                    messages.append(json.loads(response.content))
                return response.status_code, kind, messages
            data: list[str] = []
            for line in response.iter_lines():
                if time.monotonic() > deadline:
                    pytest.fail(f"no final response within {REPLY_TIMEOUT:g}s: {body[:300]!r}")
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif line == "" and any(data):
                    messages.append(json.loads("".join(data)))
                    data = []
                    if listen or ("id" in messages[-1] and "method" not in messages[-1]):
                        break
            return response.status_code, kind, messages
    except httpx.TimeoutException:
        pytest.fail(f"no response within {REPLY_TIMEOUT:g}s to {body[:300]!r}")


def judge(
    status: int, kind: str, messages: list[dict[str, Any]], *, modern: bool, request_id: Any
) -> None:
    """The properties every answer has (module docstring)."""
    final_error = (messages[-1].get("error") or {}) if messages else {}
    event(f"HTTP {status} {final_error.get('code', 'result') if messages else 'no body'}")
    assert status < 500, (status, messages)
    if status == 202:
        assert not messages
        return
    assert messages, f"HTTP {status} without a JSON-RPC message"
    final = messages[-1]
    if "error" not in final:
        assert status == 200, (status, final)
        return
    error = final["error"]
    code = error["code"]
    legacy_only = {-32002} if not modern else set()
    assert code in DOCUMENTED | legacy_only, error
    if code == -32603:
        assert error["message"].startswith(DOCUMENTED_INTERNAL), error
    if kind.startswith("application/json"):
        expected = http_status_for(code)
        assert status in ((expected,) if modern else (expected, 200)), (status, error)
    if request_id is not ANY_ID:
        assert final["id"] in (request_id, None), (final["id"], request_id)


def post_and_judge(
    http: httpx.Client,
    server: LiveServer,
    body: dict[str, Any],
    headers: dict[str, str],
    *,
    modern: bool,
) -> None:
    raw = json.dumps(body).encode()  # lone surrogates and NULs go as \\u escapes
    listen = body.get("method") == "subscriptions/listen"
    event(f"method {body.get('method')}" if body.get("method") in KNOWN else "method (other)")
    status, kind, messages = send(http, server, raw, headers, listen)
    # As the server reads it: a surrogate pair drawn as two characters arrives as one.
    request_id = json.loads(json.dumps(body.get("id")))
    judge(status, kind, messages, modern=modern, request_id=request_id)


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(module_server: LiveServer) -> LiveServer:
    """Module-scoped, unlike the shared one: hypothesis runs every example of a test on one
    value of its fixtures, and refuses function-scoped ones."""
    return module_server


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=REPLY_TIMEOUT) as client:
        yield client


@pytest.fixture(scope="module")
def real_task_ids(server: LiveServer, http: httpx.Client) -> list[str]:
    """A completed task and one waiting for two answers, for the task methods to find."""
    ids = []
    caps: dict[str, Any] = {"extensions": {TASKS: {}}, "elicitation": {"form": {}}}
    for tool in ("trivial_task", "multi_input"):
        body = modern_request("tools/call", {"name": tool, "arguments": {}}, capabilities=caps)
        response = http.post(server.mcp_url, json=body, headers=modern_headers("tools/call", tool))
        ids.append(response.json()["result"]["taskId"])
    return ids


@pytest.fixture(scope="module")
def session_id(server: LiveServer, http: httpx.Client) -> str:
    """A 2025-11-25 session that declared no client capabilities (so no call waits for it)."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "fuzz"}},
    }
    response = http.post(server.mcp_url, json=body, headers=legacy_headers())
    return response.headers["mcp-session-id"]


@pytest.fixture(autouse=True)
def _still_serving(
    request: pytest.FixtureRequest, server: LiveServer, http: httpx.Client
) -> Iterator[None]:
    attach_server_output(request, server)
    yield
    body = modern_request("tools/call", {"name": "add", "arguments": {"a": 20, "b": 22}})
    response = http.post(server.mcp_url, json=body, headers=modern_headers("tools/call", "add"))
    assert response.json()["result"]["structuredContent"] == {"result": 42}
    output = server.output()
    for sign in (
        "MCP request failed",
        "Task exception was never retrieved",
        "Exception in callback",
    ):
        assert sign not in output, f"the server logged {sign!r}"


# -- the properties ------------------------------------------------------------------------------


@FUZZ_SETTINGS
@given(data=st.data())
def test_modern_requests_always_get_a_documented_answer(
    data: st.DataObject, server: LiveServer, http: httpx.Client, real_task_ids: list[str]
) -> None:
    request_id, method, params = data.draw(_request(MODERN_METHODS, _params(real_task_ids)))
    params["_meta"] = data.draw(_meta())
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    headers = modern_headers(method if method.isascii() and method.isprintable() else "x")
    name = header_value(params.get("name", params.get("uri", params.get("taskId"))))
    if name is not None and data.draw(st.integers(0, 9)):  # left out one time in ten
        headers["Mcp-Name"] = name
    post_and_judge(http, server, body, headers, modern=True)


@FUZZ_SETTINGS
@given(data=st.data())
def test_legacy_requests_always_get_a_documented_answer(
    data: st.DataObject,
    server: LiveServer,
    http: httpx.Client,
    real_task_ids: list[str],
    session_id: str,
) -> None:
    # Not the task that waits for answers: tasks/result would wait (and ask this session).
    request_id, method, params = data.draw(_request(LEGACY_METHODS, _params(real_task_ids[:1])))
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    if not data.draw(st.integers(0, 4)):
        del body["id"]  # a notification, one time in five
    post_and_judge(http, server, body, legacy_headers(session_id), modern=False)


RAW_TOKENS = [
    b"1e999",
    b"-1e400",
    b"NaN",
    b"-Infinity",
    b"1" * 5000,
    b'"\\ud800"',
    b'"\\udc00\\ud800"',
    b'"\xed\xa0\x80"',
    b'"\xff"',
    b'"\xc0\x80"',
    b'"\x00"',
    b"[" * 3000 + b"]" * 3000,
    b"{}{}",
    b"",
]
RAW_TEMPLATE = (
    b'{"jsonrpc": "2.0", "id": ID, "method": METHOD, "params": {"x": PARAM, '
    b'"_meta": META, "name": "add", "arguments": {"a": VALUE, "b": 2}}}'
)
ANY_ID = object()


@FUZZ_SETTINGS
@given(
    era=st.sampled_from(["modern", "legacy"]),
    method=st.sampled_from(["tools/list", "tools/call", "initialize", "tasks/get"]),
    spot=st.sampled_from([b"ID", b"METHOD", b"PARAM", b"VALUE"]),
    token=st.sampled_from(RAW_TOKENS) | st.binary(max_size=12),
    bom=st.booleans(),
)
def test_raw_bodies_always_get_a_documented_answer(
    server: LiveServer,
    http: httpx.Client,
    session_id: str,
    era: str,
    method: str,
    spot: bytes,
    token: bytes,
    bom: bool,
) -> None:
    """Bytes that no JSON encoder writes: invalid UTF-8, encoded surrogates, NaN, 1e999."""
    modern = era == "modern"
    meta = modern_request(method)["params"]["_meta"]
    defaults = {
        b"ID": b"1",
        b"METHOD": json.dumps(method).encode(),
        b"PARAM": b"null",
        b"VALUE": b"1",
    }
    body = RAW_TEMPLATE.replace(spot, token).replace(b"META", json.dumps(meta).encode())
    for placeholder, default in defaults.items():
        body = body.replace(placeholder, default)
    headers = modern_headers(method, "add") if modern else legacy_headers(session_id)
    status, kind, messages = send(
        http, server, (b"\xef\xbb\xbf" if bom else b"") + body, headers, False
    )
    judge(status, kind, messages, modern=modern, request_id=ANY_ID if spot == b"ID" else 1)


@FUZZ_SETTINGS
@given(
    name=st.sampled_from(
        ["mcp-session-id", "last-event-id", "origin", "mcp-name", "mcp-protocol-version"]
    ),
    value=st.binary(min_size=1, max_size=40).filter(lambda v: b"\r" not in v and b"\n" not in v),
)
def test_odd_header_bytes_always_get_an_answer(
    server: LiveServer, session_id: str, name: str, value: bytes
) -> None:
    """Header values a client library would not send (NUL, latin-1, control bytes), over a
    raw socket: an answer below 500, or the HTTP parser's own refusal."""
    import socket

    legacy = name in ("mcp-session-id", "last-event-id")
    method = "GET" if name == "last-event-id" else "POST"
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    head = [
        f"{method} /mcp HTTP/1.1".encode(),
        f"Host: 127.0.0.1:{server.port}".encode(),
        f"Accept: {ACCEPT_BOTH}".encode(),
        b"Content-Type: application/json",
        f"MCP-Protocol-Version: {LEGACY if legacy else MODERN}".encode(),
        b"Mcp-Method: tools/list",
        b"Connection: close",
        f"Content-Length: {len(body)}".encode(),
        name.encode() + b": " + value,
    ]
    if name == "last-event-id":
        head.append(f"Mcp-Session-Id: {session_id}".encode())
    with socket.create_connection(("127.0.0.1", server.port), timeout=REPLY_TIMEOUT) as sock:
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        received = b""
        try:
            while b"\r\n" not in received:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                received += chunk
        except TimeoutError:
            pytest.fail(f"no response within {REPLY_TIMEOUT:g}s to {name}: {value!r}")
    if received:  # a closed connection is the HTTP parser refusing the header
        status = int(received.split(b" ", 2)[1])
        assert status < 500, received[:300]

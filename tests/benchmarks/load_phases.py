"""The phases of the legacy load script (``legacy_load.py``), on the raw client of
``raw_http.py``: paced calls on many keep-alive connections (legacy sessions with their
``GET`` streams open, or modern-era calls), a burst of new connections, an overload.

Latency is measured from the moment a call was due, not from when it was sent: a call
that waits for the previous one on its connection counts its wait (no coordinated
omission).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.benchmarks.bench_client import percentile
from tests.benchmarks.raw_http import CONNECTION_ERRORS, Connection, Response

MODERN = "2026-07-28"
LEGACY_VERSIONS = ("2025-03-26", "2025-11-25")
ACCEPT = "application/json, text/event-stream"
PATH = "/mcp"
#: Seconds a burst or overload request may take before it counts as "no response".
NO_RESPONSE_AFTER = 30.0


@dataclass
class Tally:
    """What came back for one phase's calls."""

    offered: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds, answered calls
    refused: list[float] = field(default_factory=list)  # seconds, 503 answers
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def answered(self) -> int:
        return len(self.latencies)

    def ms(self, fraction: float, *, refused: bool = False) -> float:
        samples = self.refused if refused else self.latencies
        return percentile(samples, fraction) * 1000 if samples else float("nan")


def modern_call(n: int, spin_ms: float = 0) -> tuple[dict[str, str], bytes]:
    """Headers and body of a modern ``tools/call add`` (``spin`` for ``spin_ms`` > 0: a call
    that costs the server that much CPU)."""
    tool, arguments = ("spin", {"ms": spin_ms}) if spin_ms else ("add", {"a": n, "b": 1})
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "legacy-load", "version": "1"},
    }
    body = {
        "jsonrpc": "2.0",
        "id": n,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta},
    }
    headers = {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    return headers, json.dumps(body).encode()


def added(response: Response, n: int, spin_ms: float = 0) -> bool:
    """Whether ``response`` is the right answer to ``add(n, 1)`` (or ``spin(spin_ms)``)."""
    if response.status != 200:
        return False
    messages = response.messages()
    result = messages[-1].get("result", {}) if messages else {}
    if spin_ms:
        return bool(result.get("structuredContent") == {"result": spin_ms})
    content = result.get("content") or [{}]
    return bool(content[0].get("text") == str(n + 1))


class LegacySession:
    """One legacy client: its session, a connection for its calls, its ``GET`` stream."""

    def __init__(self, host: str, port: int, version: str) -> None:
        self.version = version
        self.calls = Connection(host, port)
        self.stream = Connection(host, port)
        self.session_id = ""
        self.drained: asyncio.Task[int] | None = None

    def headers(self) -> dict[str, str]:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if self.version >= "2025-06-18":
            headers["MCP-Protocol-Version"] = self.version
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    async def post(self, message: dict[str, Any]) -> Response:
        return await self.calls.request("POST", PATH, self.headers(), json.dumps(message).encode())

    async def start(self) -> None:
        """``initialize``, ``notifications/initialized``, then the ``GET`` stream."""
        params = {
            "protocolVersion": self.version,
            "capabilities": {},
            "clientInfo": {"name": "legacy-load", "version": "1"},
        }
        response = await self.post(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
        )
        if response.status != 200:
            raise RuntimeError(f"initialize: HTTP {response.status} {response.body[:300]!r}")
        self.session_id = response.headers["mcp-session-id"]
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await self.stream.send("GET", PATH, {**self.headers(), "Accept": "text/event-stream"}, b"")
        status, _ = await self.stream.head()
        if status != 200:
            raise RuntimeError(f"GET stream: HTTP {status}")
        self.drained = asyncio.ensure_future(self.stream.drain())

    async def call(self, n: int) -> Response:
        return await self.post(
            {
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": n, "b": 1}},
            }
        )

    def stream_open(self) -> bool:
        return self.drained is not None and not self.drained.done()

    async def stop(self) -> None:
        await self.stream.close()
        await self.calls.close()
        if self.drained is not None:
            self.drained.cancel()


async def start_sessions(host: str, port: int, count: int) -> list[LegacySession]:
    """``count`` legacy sessions, half of each version of :data:`LEGACY_VERSIONS`, each with
    its ``GET`` stream open (started 20 at a time)."""
    sessions = [LegacySession(host, port, LEGACY_VERSIONS[i % 2]) for i in range(count)]
    gate = asyncio.Semaphore(20)

    async def start(session: LegacySession) -> None:
        async with gate:
            await session.start()

    await asyncio.gather(*(start(session) for session in sessions))
    return sessions


async def paced(
    calls: list[Any], rate: float, seconds: float, tally: Tally, start_at: float
) -> None:
    """Each of ``calls`` (``async (n) -> Response``, one per connection) ``rate`` times a
    second for ``seconds``, the connections spread evenly over each period."""
    period = 1 / rate
    rounds = max(1, round(seconds * rate))

    async def drive(index: int, call: Any) -> None:
        offset = start_at + period * index / len(calls)
        for k in range(rounds):
            due = offset + k * period
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            n = index * 100_000 + k
            tally.offered += 1
            try:
                response = await call(n)
            except CONNECTION_ERRORS as exc:
                tally.outcomes[type(exc).__name__] += 1
                continue
            if added(response, n):
                tally.latencies.append(time.perf_counter() - due)
                tally.outcomes["ok"] += 1
            else:
                tally.outcomes[f"HTTP {response.status}"] += 1

    await asyncio.gather(*(drive(i, call) for i, call in enumerate(calls)))


def modern_callers(host: str, port: int, count: int) -> list[Any]:
    """``count`` keep-alive connections, each a ``(n) -> Response`` modern ``add`` call."""

    def caller(connection: Connection) -> Any:
        async def call(n: int) -> Response:
            headers, body = modern_call(n)
            return await connection.request("POST", PATH, headers, body)

        return call

    return [caller(Connection(host, port)) for _ in range(count)]


# -- burst and overload ---------------------------------------------------------------------


async def one_shot(
    host: str,
    port: int,
    n: int,
    tally: Tally,
    pool: list[Connection] | None = None,
    spin_ms: float = 0,
) -> None:
    """One modern ``add``, classified by what came back: on a new connection closed after
    (no ``pool``), or on an idle connection of ``pool`` (a new one when none is idle) that
    goes back to it when the exchange went well."""
    headers, body = modern_call(n, spin_ms)
    if pool is None:
        connection, headers = Connection(host, port), {**headers, "Connection": "close"}
    else:
        connection = pool.pop() if pool else Connection(host, port)
    started = time.perf_counter()
    tally.offered += 1
    reusable = False
    try:
        response = await asyncio.wait_for(
            connection.request("POST", PATH, headers, body), NO_RESPONSE_AFTER
        )
        reusable = pool is not None and connection.writer is not None
    except TimeoutError:
        tally.outcomes["no response"] += 1
        return
    except ConnectionResetError:
        tally.outcomes["reset"] += 1
        return
    except asyncio.IncompleteReadError:
        tally.outcomes["closed without a response"] += 1
        return
    except CONNECTION_ERRORS as exc:
        tally.outcomes[type(exc).__name__] += 1
        return
    finally:
        if reusable and pool is not None:
            pool.append(connection)
        else:
            await connection.close()
    elapsed = time.perf_counter() - started
    if added(response, n, spin_ms):
        tally.outcomes["ok"] += 1
        tally.latencies.append(elapsed)
    elif response.status == 503:
        refused_well = "retry-after" in response.headers and _is_error(response)
        tally.outcomes["503 + Retry-After" if refused_well else "503 without Retry-After"] += 1
        tally.refused.append(elapsed)
    else:
        tally.outcomes[f"HTTP {response.status}"] += 1


def _is_error(response: Response) -> bool:
    try:
        messages = response.messages()
    except ValueError:
        return False
    return bool(messages and "error" in messages[-1])


async def burst(host: str, port: int, count: int) -> Tally:
    """``count`` new connections at once, each with one call."""
    tally = Tally()
    await asyncio.gather(*(one_shot(host, port, n, tally) for n in range(count)))
    return tally


async def overload(host: str, port: int, rate: float, seconds: float, spin_ms: float) -> Tally:
    """Open loop: a call of ``spin(spin_ms)`` every ``1/rate`` s for ``seconds`` whatever the
    server's pace, each on an idle keep-alive connection, or a new one when all are busy."""
    tally = Tally()
    pool: list[Connection] = []
    pending: set[asyncio.Task[None]] = set()
    started = time.perf_counter()
    total = round(rate * seconds)
    for n in range(total):
        delay = started + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.ensure_future(one_shot(host, port, n, tally, pool, spin_ms))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)
    for connection in pool:
        await connection.close()
    return tally

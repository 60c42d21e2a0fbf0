"""Fixtures for the background-task tests: private Redis servers, task stacks (a live ASGI
server plus real ``manage.py rqworker`` processes), and raw MCP helpers for the tasks
extension.

Isolation: the machine's Redis is shared with everything else running here, and rq's queue
``mcp_tasks`` carries no prefix, so a worker of one test run would take (and silently drop)
another run's jobs. The task tests therefore run on a **private** ``redis-server`` started
for the test session on a free loopback port (``--save "" --appendonly no``: nothing
persists). When the binary is missing they fall back to the run's Redis (``redis_url``,
which skips — or fails on CI — when unreachable).

- ``task_redis``: the session's private Redis (a :class:`RedisProcess`).
- ``redis_process``: a factory of further private Redis servers (restart tests).
- ``task_server(env=None, *, redis=None, database_url=None)``: a live server with
  ``tests.support.live_settings`` on ``task_redis`` (or the given :class:`RedisProcess`); ``redis=False``
  gives an embedded-mode server (no REDIS_URL: fake Redis + worker thread in process).
- ``stack``: the module's live server with one rq worker, on the module's own Redis, shared
  by its tests (``module_stack`` for the worker too, ``stack_redis`` for the Redis): one
  stack per module instead of one per test.
- ``rq_worker(server, *, kind="task", env=None)``: ``python manage.py rqworker mcp_tasks``
  with the server's environment (same database, Redis and prefix): ``kind`` ``"task"`` is
  the settings' ``TaskWorker`` (many jobs at once in one process), ``"forking"``
  ``ForkingTaskWorker`` (a work-horse process per job), ``"simple"`` rq's ``SimpleWorker``;
  ``stop()``, ``kill()`` (SIGKILL).

Live servers and workers show their output in a failed test's report.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import _SERVERS, ROOT, AsgiServerFactory, LiveServer
from tests.support.live import CLIENT_TOKEN, LIVE_SETTINGS, start_module_server

MODERN = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
QUEUE = "mcp_tasks"
WORKER_START_TIMEOUT = 30.0
#: Seconds a stopped worker may finish its running jobs (warm) before a second SIGTERM cancels
#: them (cold), and the seconds that may take before SIGKILL.
WARM_STOP_WAIT = 2.0
COLD_STOP_WAIT = 10.0
#: Longest a test waits for something a worker does (a safety net, never a measurement).
WAIT = 60.0


# -- private Redis servers ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisProcess:
    """A ``redis-server`` of our own on a loopback port, without persistence: a restart
    loses every key, as a Redis without persistence does in production."""

    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    label: str = "private redis"
    external_url: str | None = None  # fallback: the run's shared Redis (never restarted)

    @property
    def url(self) -> str:
        return self.external_url or f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        if self.external_url:
            return
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.wait_until_up()

    def wait_until_up(self, timeout: float = 15.0) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.process.returncode}:\n{self.output()}"
                )
            with contextlib.suppress(Exception):
                client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
                client.ping()
                client.close()
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start:\n{self.output()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        """Stop and start again on the same port: every key (queued jobs…) is gone."""
        if self.external_url:
            raise RuntimeError("the shared Redis is never restarted by tests")
        self.stop()
        self.start()

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url)

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def module_redis(request: pytest.FixtureRequest, label: str) -> Iterator[RedisProcess]:
    """For a module-scoped fixture: a Redis for that module alone (rq's queue names carry
    no prefix, so a worker sharing a Redis with other tests' servers would take their
    jobs); the session's Redis when ``redis-server`` is not installed."""
    if _redis_binary() is None:
        yield request.getfixturevalue("task_redis")
        return
    log_dir = request.getfixturevalue("tmp_path_factory").mktemp("module-redis")
    redis = RedisProcess(port=free_port(), log_path=log_dir / "redis.log", label=label)
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()


@dataclass
class TaskStack:
    """A module's live server and its rq worker (:func:`module_task_stack`)."""

    server: LiveServer
    worker: RqWorker

    @property
    def url(self) -> str:
        return self.server.mcp_url

    def attach(self, request: pytest.FixtureRequest) -> None:
        """Show the server's and the worker's output when the current test fails."""
        request.node.stash.setdefault(_SERVERS, []).extend([self.server, self.worker])


def module_task_stack(
    request: pytest.FixtureRequest,
    redis: RedisProcess,
    env: Mapping[str, str] | None = None,
    *,
    label: str = "module",
) -> Iterator[TaskStack]:
    """For a module-scoped fixture: a live server on ``redis`` (give each module its own,
    :func:`module_redis`) and one rq worker; both stopped after the module. Its tests share
    them, so none may leave a task running that another would wait behind."""
    env = {"REDIS_URL": redis.url, "REDIS_PREFIX": f"m_{uuid.uuid4().hex[:10]}", **(env or {})}
    servers = cast(
        Generator[LiveServer, None, None],
        start_module_server(request, env, label=f"{label} server"),
    )
    server = next(servers)
    try:
        log_dir = request.getfixturevalue("tmp_path_factory").mktemp("module-worker")
        worker = start_rq_worker(server.env, log_dir / "worker.log", label=f"{label} rq worker")
        try:
            worker.wait_ready(redis.url)
            yield TaskStack(server, worker)
        finally:
            worker.stop()
    finally:
        servers.close()


@pytest.fixture(scope="module")
def stack_redis(request: pytest.FixtureRequest) -> Iterator[RedisProcess]:
    """The module's own Redis (:func:`module_redis`), under :func:`module_stack`."""
    yield from module_redis(request, f"{request.module.__name__} redis")


@pytest.fixture(scope="module")
def module_stack(request: pytest.FixtureRequest, stack_redis: RedisProcess) -> Iterator[TaskStack]:
    """The module's live server and rq worker on its own Redis (:func:`module_task_stack`):
    its tests share them, so every task a test starts must end (or park) before the test
    does, and a test counts what it made (jobs, tasks) by delta, never absolutely."""
    yield from module_task_stack(request, stack_redis, label=request.module.__name__)


@pytest.fixture
def stack(request: pytest.FixtureRequest, module_stack: TaskStack) -> LiveServer:
    """The server of :func:`module_stack`; its and its worker's output go to the report of
    a failed test."""
    module_stack.attach(request)
    return module_stack.server


def _redis_binary() -> str | None:
    return shutil.which("redis-server")


@pytest.fixture(scope="session")
def task_redis(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisProcess]:
    """The test session's private Redis (or the shared one when ``redis-server`` is missing)."""
    log_dir = tmp_path_factory.mktemp("task-redis")
    if _redis_binary() is None:
        url = request.getfixturevalue("redis_url")
        yield RedisProcess(
            port=0, log_path=log_dir / "none.log", external_url=url, label="shared redis"
        )
        return
    server = RedisProcess(port=free_port(), log_path=log_dir / "redis.log", label="session redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_process(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[], RedisProcess]]:
    """Factory of private Redis servers that a test may restart (stopped after the test)."""
    started: list[RedisProcess] = []
    log_dir = tmp_path_factory.mktemp("redis-process")

    def start() -> RedisProcess:
        if _redis_binary() is None:
            pytest.fail(
                "redis-server is not installed: apt-get install redis-server", pytrace=False
            )
        server = RedisProcess(
            port=free_port(),
            log_path=log_dir / f"redis-{len(started) + 1}.log",
            label="restartable redis",
        )
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


# -- task stacks: servers and workers -------------------------------------------------------


@dataclass
class RqWorker:
    """A ``manage.py rqworker`` subprocess."""

    process: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str]
    label: str
    url: str = "(rq worker)"
    _log: Any = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, redis_url: str, timeout: float = WORKER_START_TIMEOUT) -> None:
        """Until the worker has registered itself in Redis (it then takes jobs)."""
        import redis

        client = redis.Redis.from_url(redis_url)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise RuntimeError(
                        f"the rq worker exited with {self.process.returncode}:\n{self.output()}"
                    )
                for key in client.smembers(f"rq:workers:{QUEUE}"):
                    with contextlib.suppress(Exception):
                        if int(client.hget(key, "pid") or 0) == self.pid:
                            return
                time.sleep(0.05)
        finally:
            client.close()
        raise RuntimeError(
            f"the rq worker did not register within {timeout:.0f}s:\n{self.output()}"
        )

    def stop(self, warm_for: float = WARM_STOP_WAIT) -> None:
        """SIGTERM (warm shutdown: the running jobs finish), then, after ``warm_for`` seconds,
        a second SIGTERM (cold: they are cancelled and their tasks fail), then SIGKILL."""
        for wait in (warm_for, COLD_STOP_WAIT):
            if not self.alive():
                break
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=wait)
        self.kill()

    def kill(self) -> None:
        """SIGKILL the worker's main process (a forking worker's work-horse lives on)."""
        if self.alive():
            self.process.kill()
            self.process.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


#: ``kind`` of :func:`start_rq_worker` → its ``--worker-class`` (None: the settings' class).
WORKER_CLASSES: dict[str, str | None] = {
    "task": None,
    "forking": "mcp_tasks.tasks.worker.ForkingTaskWorker",
}


def start_rq_worker(
    env: Mapping[str, str], log_path: Path, *, kind: str = "task", label: str = "rq worker"
) -> RqWorker:
    command = [sys.executable, "manage.py", "rqworker", QUEUE]
    worker_class = WORKER_CLASSES[kind]
    if worker_class is not None:
        command += ["--worker-class", worker_class]
    log = log_path.open("wb")
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return RqWorker(process=process, log_path=log_path, env=dict(env), label=label, _log=log)


TaskServerFactory = Callable[..., LiveServer]
WorkerFactory = Callable[..., RqWorker]


@pytest.fixture
def task_server(asgi_server: AsgiServerFactory, task_redis: RedisProcess) -> TaskServerFactory:
    """Factory: a live server with ``tests.support.live_settings``.

    ``redis``: None → the session's private Redis; a :class:`RedisProcess` → that one;
    False → embedded mode (no REDIS_URL). ``env`` adds variables (``MCP_TASKS_TEST_*``…);
    ``database_url`` shares another server's database.
    """

    def start(
        env: Mapping[str, str] | None = None,
        *,
        redis: RedisProcess | bool | None = None,
        database_url: str | None = None,
        prefix: str | None = None,
        label: str = "",
    ) -> LiveServer:
        overrides = dict(LIVE_SETTINGS)
        if redis is not False:
            target = task_redis if redis is None or redis is True else redis
            overrides["REDIS_URL"] = target.url
            overrides["REDIS_PREFIX"] = prefix or f"mcp_tasks_t_{uuid.uuid4().hex[:10]}"
        overrides.update(env or {})
        return asgi_server(overrides, database_url=database_url, label=label)

    return start


@pytest.fixture
def rq_worker(
    request: pytest.FixtureRequest,
    asgi_server: AsgiServerFactory,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WorkerFactory]:
    """Factory: ``rq_worker(server, *, kind="task", env=None, wait=True)`` starts a real
    ``manage.py rqworker mcp_tasks`` with ``server``'s environment (plus ``env``)."""
    workers: list[RqWorker] = []
    log_dir = tmp_path_factory.mktemp("rq-worker")

    def start(
        server: LiveServer,
        *,
        kind: str = "task",
        env: Mapping[str, str] | None = None,
        wait: bool = True,
    ) -> RqWorker:
        worker_env = {**server.env, **(env or {})}
        number = len(workers) + 1
        worker = start_rq_worker(
            worker_env,
            log_dir / f"worker-{number}.log",
            kind=kind,
            label=f"rq worker {number} ({kind})",
        )
        workers.append(worker)
        # Shown in a failed test's report beside the servers (conftest's report hook).
        request.node.stash.setdefault(_SERVERS, []).append(worker)
        if wait:
            worker.wait_ready(worker_env["REDIS_URL"])
        return worker

    yield start
    for worker in workers:
        worker.stop()


# -- raw MCP for the tasks extension --------------------------------------------------------


def task_id_in_shard_of(task_id: str, *, same: bool = True) -> str:
    """A new random task id whose changes go to ``task_id``'s shard group (``same=False``:
    to another shard)."""
    from mcp_tasks.core.groups import task_shard_group

    shard = task_shard_group(task_id)
    while True:
        candidate = secrets.token_urlsafe(32)
        if (task_shard_group(candidate) == shard) == same:
            return candidate


def capabilities(
    *, tasks: bool = True, elicitation: bool = False, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    caps: dict[str, Any] = {}
    extensions: dict[str, Any] = dict(extra or {})
    if tasks:
        extensions[TASKS_EXTENSION] = {}
    if extensions:
        caps["extensions"] = extensions
    if elicitation:
        caps["elicitation"] = {"form": {}}
    return caps


def envelope(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    request_id: int | str | None = None,
    caps: Mapping[str, Any] | None = None,
    log_level: str | None = None,
) -> dict[str, Any]:
    body = dict(params or {})
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": dict(
            caps if caps is not None else capabilities()
        ),
        "io.modelcontextprotocol/clientInfo": {"name": "task-tests", "version": "1.0"},
    }
    if log_level:
        meta["io.modelcontextprotocol/logLevel"] = log_level
    body["_meta"] = meta
    return {
        "jsonrpc": "2.0",
        "id": request_id if request_id is not None else uuid.uuid4().hex[:12],
        "method": method,
        "params": body,
    }


def headers_for(
    method: str, name: str | None, token: str | None = None, **extra: str
) -> dict[str, str]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        headers["Mcp-Name"] = name
    if token:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(extra)
    return headers


def parse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = []
        for block in response.text.replace("\r\n", "\n").split("\n\n"):
            data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
            if data:
                messages.append(json.loads("\n".join(data)))
        return messages
    return [response.json()] if response.content else []


def _result(message: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = message["result"]
    return result


class TaskClient:
    """Raw modern-era MCP over httpx for one server URL and one principal."""

    def __init__(
        self, base_url: str, *, token: str | None = None, caps: Mapping[str, Any] | None = None
    ) -> None:
        self.base_url = base_url
        self.mcp_url = f"{base_url}/mcp"
        self.token = token if token is not None else CLIENT_TOKEN
        self.caps = dict(caps if caps is not None else capabilities())
        self.http = httpx.Client(timeout=60)

    def close(self) -> None:
        self.http.close()

    def post(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        caps: Mapping[str, Any] | None = None,
        request_id: int | str | None = None,
        log_level: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """POST one request; returns (HTTP status, the final JSON-RPC message)."""
        body = envelope(
            method,
            params,
            request_id=request_id,
            caps=self.caps if caps is None else caps,
            log_level=log_level,
        )
        response = self.http.post(
            self.mcp_url,
            json=body,
            headers={**headers_for(method, name, self.token), **(headers or {})},
        )
        messages = parse_messages(response)
        assert messages, (
            f"{method}: no JSON-RPC message in HTTP {response.status_code}: {response.text!r}"
        )
        return response.status_code, messages[-1]

    def call(
        self, tool: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """``tools/call``; returns the JSON-RPC message (``result`` or ``error``)."""
        return self.post(
            "tools/call", {"name": tool, "arguments": dict(arguments or {})}, name=tool, **kwargs
        )[1]

    def start(
        self, tool: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """``tools/call`` that must answer a ``CreateTaskResult``; returns it."""
        message = self.call(tool, arguments, **kwargs)
        assert "result" in message, message
        assert message["result"].get("resultType") == "task", message
        return _result(message)

    def task_request(
        self, method: str, task_id: str, extra: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> tuple[int, dict[str, Any]]:
        return self.post(method, {"taskId": task_id, **(extra or {})}, name=task_id, **kwargs)

    def get(self, task_id: str) -> dict[str, Any]:
        status, message = self.task_request("tasks/get", task_id)
        assert status == 200 and "result" in message, (status, message)
        return _result(message)

    def update(self, task_id: str, responses: Mapping[str, Any]) -> dict[str, Any]:
        status, message = self.task_request(
            "tasks/update", task_id, {"inputResponses": dict(responses)}
        )
        assert status == 200 and "result" in message, (status, message)
        return _result(message)

    def cancel(self, task_id: str) -> dict[str, Any]:
        status, message = self.task_request("tasks/cancel", task_id)
        assert status == 200 and "result" in message, (status, message)
        return _result(message)

    def wait_for(
        self, task_id: str, predicate: Callable[[dict[str, Any]], bool] | str, timeout: float = WAIT
    ) -> dict[str, Any]:
        """Poll ``tasks/get`` until ``predicate(task)`` (or the status equals the string)."""
        check = (
            (lambda task: task["status"] == predicate) if isinstance(predicate, str) else predicate
        )
        deadline = time.monotonic() + timeout
        task = self.get(task_id)
        while not check(task):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"task {task_id} never reached the expected state; last seen: {task}"
                )
            time.sleep(0.05)
            task = self.get(task_id)
        return task

    def wait_terminal(self, task_id: str, timeout: float = WAIT) -> dict[str, Any]:
        return self.wait_for(
            task_id, lambda task: task["status"] in ("completed", "failed", "cancelled"), timeout
        )

    def barrier(self) -> None:
        """Run a trivial task to its end: a server with one worker has then taken everything
        queued before it."""
        task_id = self.start("trivial_task", {"n": 0})["taskId"]
        assert self.wait_terminal(task_id)["status"] == "completed"


@pytest.fixture
def own_server(task_server: Any) -> LiveServer:
    """A server of the test's own beside the module's shared stack, without a worker until
    the test starts one (a worker started late, forking, killed, or with other settings)."""
    server: LiveServer = task_server()
    return server


@pytest.fixture
def own_client(own_server: LiveServer, task_client: Callable[..., TaskClient]) -> TaskClient:
    return task_client(own_server)


@pytest.fixture
def open_gates(tmp_path: Path) -> Iterator[None]:
    """After the test, open the gates of the gated tasks it left waiting in a shared worker
    (``tmp_path`` or a folder of it is a task's ``marker_dir``); modules whose tests share
    one worker use it for every test."""
    yield
    for directory in [tmp_path, *(path for path in tmp_path.iterdir() if path.is_dir())]:
        (directory / "gate").touch()


@pytest.fixture
def task_client() -> Iterator[Callable[..., TaskClient]]:
    """Factory: ``task_client(server_or_url, token=None, caps=None)``."""
    clients: list[TaskClient] = []

    def make(
        server: LiveServer | str, *, token: str | None = None, caps: Mapping[str, Any] | None = None
    ) -> TaskClient:
        base = server if isinstance(server, str) else server.url
        client = TaskClient(base, token=token, caps=caps)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


# -- looking behind the wire: the server's database and Redis ---------------------------------


def db_rows(database_url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run a read query on a live server's database (SQLite file or PostgreSQL); ``%s``
    placeholders work for both."""
    if database_url.startswith("sqlite:"):
        path = database_url.split("sqlite:///", 1)[1]
        with contextlib.closing(sqlite3.connect(path, timeout=20)) as conn:
            return list(conn.execute(sql.replace("%s", "?"), params).fetchall())
    import psycopg

    with psycopg.connect(database_url) as conn:
        return list(conn.execute(sql, params).fetchall())


def db_execute(database_url: str, sql: str, params: tuple[Any, ...] = ()) -> int:
    """Run a write statement on a live server's database; returns the row count."""
    if database_url.startswith("sqlite:"):
        path = database_url.split("sqlite:///", 1)[1]
        with contextlib.closing(sqlite3.connect(path, timeout=20)) as conn:
            cursor = conn.execute(sql.replace("%s", "?"), params)
            conn.commit()
            return cursor.rowcount
    import psycopg

    with psycopg.connect(database_url) as conn:
        return conn.execute(sql, params).rowcount


def task_exists(database_url: str, task_id: str) -> bool:
    rows = db_rows(database_url, "SELECT COUNT(*) FROM mcp_tasks_task WHERE id = %s", (task_id,))
    return bool(rows[0][0])


def task_row(database_url: str, task_id: str) -> dict[str, Any]:
    """A few columns of the task's row (the test fails when there is none)."""
    columns = (
        "status",
        "status_message",
        "progress",
        "progress_total",
        "runs",
        "attempt",
        "waiting_for",
        "worker_name",
        "result",
        "error",
    )
    rows = db_rows(
        database_url, f"SELECT {', '.join(columns)} FROM mcp_tasks_task WHERE id = %s", (task_id,)
    )
    assert rows, f"no row for task {task_id}"
    return dict(zip(columns, rows[0], strict=True))


def job_ids(redis_url: str, queue: str = QUEUE) -> list[str]:
    """Job ids waiting in the fair queue of ``queue``."""
    import redis

    from mcp_tasks.tasks.queues import fair_queue

    client = redis.Redis.from_url(redis_url)
    try:
        return fair_queue.job_ids(client, queue)
    finally:
        client.close()


def job_exists(redis_url: str, job_id: str) -> bool:
    """Whether rq holds the job (queued, running, or deferred): its ``rq:job:<id>`` hash.
    A finished task job leaves none (``result_ttl=0``)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return bool(client.exists(f"rq:job:{job_id}"))
    finally:
        client.close()


def run_manage(server: LiveServer, *args: str, env: Mapping[str, str] | None = None) -> str:
    """``manage.py <args>`` with ``server``'s environment; returns its output (fails on error)."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**server.env, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, (
        f"manage.py {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout + result.stderr


def wait_for_path(path: Path, timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return path.exists()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0): look at /proc.
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        return state != "Z"
    return True


def wait_for_exit(pid: int, timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def database_path(database_url: str) -> str:
    return urlsplit(database_url).path


# -- subscriptions/listen -----------------------------------------------------------------------


class ListenStream:
    """A ``subscriptions/listen`` SSE stream read by a background thread."""

    def __init__(
        self,
        client: TaskClient,
        notifications: Mapping[str, Any],
        *,
        caps: Mapping[str, Any] | None = None,
    ) -> None:
        import queue
        import threading

        self.messages: queue.Queue[dict[str, Any] | BaseException] = queue.Queue()
        self.status_code: int | None = None
        self._client = client
        self._body = envelope(
            "subscriptions/listen",
            {"notifications": dict(notifications)},
            caps=caps if caps is not None else client.caps,
        )
        self._http = httpx.Client(timeout=httpx.Timeout(120, connect=10))
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._closing = False
        self._socket: socket.socket | None = None

    @property
    def request_id(self) -> Any:
        return self._body["id"]

    def _run(self) -> None:
        try:
            with self._http.stream(
                "POST",
                self._client.mcp_url,
                json=self._body,
                headers=headers_for("subscriptions/listen", None, self._client.token),
            ) as response:
                self.status_code = response.status_code
                stream = response.extensions.get("network_stream")
                self._socket = stream.get_extra_info("socket") if stream is not None else None
                self._opened.set()
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    response.read()
                    self.messages.put(response.json())
                    return
                data: list[str] = []
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif line == "" and data:
                        self.messages.put(json.loads("\n".join(data)))
                        data = []
        except BaseException as exc:  # noqa: BLE001 - handed to the reader
            if not self._closing:
                self.messages.put(exc)
        finally:
            self._opened.set()

    def __enter__(self) -> ListenStream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing = True
        if self._socket is not None:
            # Wakes the reader at once: closing the client alone leaves it blocked in its
            # read until the server sends something more.
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)
        self._http.close()
        self._thread.join(timeout=10)

    def next(self, timeout: float = WAIT) -> dict[str, Any]:
        import queue

        try:
            item = self.messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message on the listen stream within {timeout:.0f}s") from None
        if isinstance(item, BaseException):
            raise AssertionError(f"the listen stream broke: {item!r}") from item
        return item

    def until(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT
    ) -> list[dict[str, Any]]:
        """Messages up to and including the first matching ``predicate``."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching message within {timeout:.0f}s; seen: {seen}")
            message = self.next(remaining)
            seen.append(message)
            if predicate(message):
                return seen

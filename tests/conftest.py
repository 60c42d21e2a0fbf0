"""Shared fixtures: service availability (Redis, PostgreSQL) and live ASGI servers.

Services: a test that needs Redis or PostgreSQL asks for ``redis_url`` / ``postgres_url``.
When the service is not reachable the test is skipped with a message saying so; with
``CI=true`` a missing service is a failure instead, never a skip.

Live servers: ``asgi_server(env=...)`` starts the example project (``project.asgi``) in a real
daphne subprocess on a free loopback port and returns a :class:`LiveServer`. Each server gets
a freshly migrated database unless ``database_url=`` names one to share, so two processes can
share one database (and, with ``redis=True``, one Redis channel layer)::

    def test_any_process_serves_any_session(asgi_server):
        a = asgi_server(redis=True)
        b = asgi_server(redis=True, database_url=a.database_url)

``live_server_url`` is the common case: one embedded-mode server, its base URL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = [
    "tests.support.live",
    "tests.support.worker_fixtures",
    "tests.support.legacy_client_fixtures",
    "tests.support.browser",
    "tests.support.ts_client",
]

CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/postgres"
SERVER_START_TIMEOUT = 30.0

# Variables of the parent environment that must not leak into a live server unasked.
_SERVER_ENV_OVERRIDES = ("DATABASE_URL", "REDIS_URL", "REDIS_PREFIX", "DJANGO_SETTINGS_MODULE")


# -- services --------------------------------------------------------------------------------


def service_missing(what: str, detail: str) -> NoReturn:
    """Skip the test because ``what`` is unreachable, or fail it when running on CI."""
    if CI:
        pytest.fail(
            f"{what} is not reachable ({detail}); CI=true, so a missing service is a failure. "
            "Start it (.ci/run does) or fix its URL.",
            pytrace=False,
        )
    pytest.skip(f"{what} is not reachable ({detail}); start it to run this test")


def _redis_target() -> str:
    return os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


def _postgres_target() -> str:
    """The PostgreSQL server to use: DATABASE_URL's when that is PostgreSQL, else local."""
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else DEFAULT_POSTGRES_URL


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture
async def orm_thread_closed() -> AsyncIterator[None]:
    """For async tests whose code reaches the ORM through ``mcp_tasks.core.db.db``: close the
    ORM thread's connection afterwards, so the test database can be dropped at the end."""
    yield
    from django.db import connections

    from mcp_tasks.core.db import db

    await db(connections.close_all)()


@pytest.fixture(autouse=True)
def _loop_databases_closed() -> Iterator[None]:
    """Close the event loops' own database connections (``LoopDatabase``: PostgreSQL) after
    every test, whatever loop made them, so the test database can be dropped at the end."""
    yield
    from mcp_tasks.tasks.state.loop_database import close_all_now

    close_all_now()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """URL of a reachable Redis server (skip, or fail on CI, when there is none)."""
    import redis

    url = _redis_target()
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
        client.close()
    except Exception as exc:
        service_missing("Redis", f"{url}: {type(exc).__name__}: {exc}")
    return url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a reachable PostgreSQL server's maintenance database (skip/fail when none)."""
    url = _postgres_target()
    try:
        import psycopg
    except ImportError as exc:
        service_missing(
            "PostgreSQL", f"psycopg is not installed: pip install -e '.[postgres]' ({exc})"
        )
    try:
        with psycopg.connect(_with_database(url, "postgres"), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        service_missing("PostgreSQL", f"{url}: {type(exc).__name__}: {exc}")
    return url


def uses_postgres() -> bool:
    """True when the test run itself is on PostgreSQL (then live servers use it too)."""
    return settings.DATABASES["default"]["ENGINE"].startswith("django.db.backends.postgresql")


# -- live ASGI servers -----------------------------------------------------------------------


@dataclass
class LiveServer:
    """An ASGI server subprocess (daphne or uvicorn) serving ``project.asgi:application``."""

    url: str  # "http://127.0.0.1:PORT"
    database_url: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path
    label: str = ""
    _log: Any = field(default=None, repr=False)
    #: Processes that serve with this one (``stop()`` each), stopped with it.
    companions: list[Any] = field(default_factory=list, repr=False)

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"  # project.settings' MCP_TASKS["PATH"]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def output(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        for companion in self.companions:
            companion.stop()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None


def _server_env(overrides: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SERVER_ENV_OVERRIDES}
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    env.update(overrides)
    return env


def _run_manage(env: Mapping[str, str], *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"manage.py {' '.join(args)} failed ({result.returncode}):\n"
            f"{result.stdout}\n{result.stderr}"
        )


class _Databases:
    """Fresh, migrated databases for live servers: SQLite files, or PostgreSQL databases
    cloned from one migrated template. ``migrate`` runs once per test run."""

    def __init__(self, tmp: Path, postgres: str | None) -> None:
        self.tmp = tmp
        self.postgres = postgres  # maintenance URL when the run is on PostgreSQL
        self.tag = uuid.uuid4().hex[:8]
        self.template: str | None = None
        self.created: list[str] = []
        self.count = 0

    def _admin(self) -> Any:
        import psycopg

        assert self.postgres
        return psycopg.connect(_with_database(self.postgres, "postgres"), autocommit=True)

    def new(self) -> str:
        self.count += 1
        if self.postgres is None:
            if self.template is None:
                self.template = str(self.tmp / "template.sqlite3")
                _run_manage(
                    _server_env({"DATABASE_URL": f"sqlite:///{self.template}"}),
                    "migrate",
                    "--noinput",
                )
            path = self.tmp / f"live-{self.count}.sqlite3"
            shutil.copyfile(self.template, path)
            return f"sqlite:///{path}"
        if self.template is None:
            name = f"mcp_tasks_live_{self.tag}_template"
            with self._admin() as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            self.created.append(name)
            url = _with_database(self.postgres, name)
            _run_manage(_server_env({"DATABASE_URL": url}), "migrate", "--noinput")
            self.template = name
        name = f"mcp_tasks_live_{self.tag}_{self.count}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        self.created.append(name)
        return _with_database(self.postgres, name)

    def drop_all(self) -> None:
        if not self.created:
            return
        with contextlib.suppress(Exception), self._admin() as conn:
            for name in reversed(self.created):
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def _live_databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Databases]:
    postgres = _postgres_target() if uses_postgres() else None
    databases = _Databases(tmp_path_factory.mktemp("live-db"), postgres)
    yield databases
    databases.drop_all()


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def _wait_until_serving(server: LiveServer, deadline: float) -> None:
    last_error = "no attempt"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"the live server exited with {server.process.returncode} before serving:\n"
                f"{server.output()}"
            )
        try:
            response = httpx.get(f"{server.url}/", timeout=2)
            if response.status_code < 500:
                return
            last_error = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            last_error = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(
        f"the live server did not answer within {SERVER_START_TIMEOUT:.0f}s ({last_error}):\n"
        f"{server.output()}"
    )


_SERVERS = pytest.StashKey[list[LiveServer]]()

AsgiServerFactory = Callable[..., LiveServer]


#: The ASGI server of live servers: ``daphne`` (what ``runserver`` uses) or ``uvicorn`` (the
#: README's production command); ``MCP_TASKS_TEST_SERVER`` picks it for a whole run.
ASGI_SERVERS = ("daphne", "uvicorn")


def asgi_server_name() -> str:
    name = os.environ.get("MCP_TASKS_TEST_SERVER", "daphne")
    if name not in ASGI_SERVERS:
        raise ValueError(f"MCP_TASKS_TEST_SERVER must be one of {ASGI_SERVERS}, not {name!r}")
    return name


def _server_command(name: str, fd: str) -> list[str]:
    if name == "uvicorn":
        return [sys.executable, "-m", "tests.support.uvicorn_fd", fd]
    return [sys.executable, "-m", "daphne", "--fd", fd, "-v", "1", "project.asgi:application"]


def launch_server(
    overrides: Mapping[str, str], log_path: Path, *, label: str, server: str | None = None
) -> LiveServer:
    """Start ``server`` (default: :func:`asgi_server_name`) with ``project.asgi:application``
    on a free loopback port, the environment of :func:`_server_env` plus ``overrides``
    (which must name DATABASE_URL), and wait until it answers. The caller stops it
    (:meth:`LiveServer.stop`)."""
    server_env = _server_env(overrides)
    sock = _listening_socket()
    port = sock.getsockname()[1]
    log = log_path.open("wb")
    try:
        fd = str(sock.fileno())
        process = subprocess.Popen(
            _server_command(server or asgi_server_name(), fd),
            cwd=ROOT,
            env=server_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
        )
    except BaseException:
        log.close()
        raise
    finally:
        sock.close()  # the child holds its own copy of the listening socket
    live = LiveServer(
        url=f"http://127.0.0.1:{port}",
        database_url=server_env["DATABASE_URL"],
        env=server_env,
        process=process,
        log_path=log_path,
        label=label,
        _log=log,
    )
    try:
        _wait_until_serving(live, time.monotonic() + SERVER_START_TIMEOUT)
    except BaseException:
        live.stop()
        raise
    return live


@pytest.fixture
def asgi_server(
    request: pytest.FixtureRequest,
    _live_databases: _Databases,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AsgiServerFactory]:
    """Factory: ``asgi_server(env=None, *, redis=False, database_url=None, label="",
    server=None)``.

    - ``env``: extra environment variables for the server (they win over the others, e.g.
      ``{"DJANGO_SETTINGS_MODULE": "tests.support.live_settings"}``);
    - ``redis=True``: use the test run's Redis (channel layer, queue) with the run's key
      prefix, so several servers share it (skips, or fails on CI, without Redis);
    - ``database_url``: share an already migrated database (e.g. ``other.database_url``);
      by default each server gets a fresh migrated one;
    - ``server``: ``"daphne"`` or ``"uvicorn"`` whatever ``MCP_TASKS_TEST_SERVER`` says.

    Servers are stopped after the test; a failed test's report shows their output.
    """
    servers: list[LiveServer] = []
    request.node.stash[_SERVERS] = servers
    log_dir = tmp_path_factory.mktemp("live-server")

    def start(
        env: Mapping[str, str] | None = None,
        *,
        redis: bool = False,
        database_url: str | None = None,
        label: str = "",
        server: str | None = None,
    ) -> LiveServer:
        overrides: dict[str, str] = {"DATABASE_URL": database_url or _live_databases.new()}
        if redis:
            overrides["REDIS_URL"] = request.getfixturevalue("redis_url")
            overrides["REDIS_PREFIX"] = settings.REDIS_PREFIX
        overrides.update(env or {})
        number = len(servers) + 1
        live = launch_server(
            overrides, log_dir / f"{number}.log", label=label or f"server {number}", server=server
        )
        servers.append(live)
        return live

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def live_server_url(asgi_server: AsgiServerFactory) -> str:
    """Base URL (``http://127.0.0.1:PORT``) of the example project in embedded mode."""
    return asgi_server().url


# -- what several modules share ---------------------------------------------------------------
#
# ``show_server_output`` and ``url`` use the ``server`` fixture the module defines (its
# module-scoped :class:`LiveServer`); a module with its own ``http`` or ``url`` overrides these.
# Modules whose every test needs one of them ask for it in ``pytestmark``:
# ``pytest.mark.usefixtures("show_server_output")`` / ``("embedded_queue")``.


@pytest.fixture
def show_server_output(request: pytest.FixtureRequest, server: LiveServer) -> None:
    """Show the module's ``server`` output in the report when the test fails."""
    from tests.support.live import attach_server_output  # tests.support.live imports this module

    attach_server_output(request, server)


@pytest.fixture
def url(server: LiveServer) -> str:
    """The ``/mcp`` URL of the module's ``server``."""
    return server.mcp_url


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=60) as client:
        yield client


@pytest.fixture
def embedded_queue(settings: Any) -> Iterator[Any]:
    """Jobs go to the embedded in-process fake Redis (``EMBEDDED_WORKER``), emptied before and
    after the test; the fixture's value is a connection to it."""
    from mcp_tasks.tasks.queues import embedded

    settings.MCP_TASKS = {"EMBEDDED_WORKER": True}
    connection = embedded.connection()
    connection.flushall()
    yield connection
    connection.flushall()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the live servers' output to the report of a failed test."""
    report = yield
    if report.failed:
        for server in item.stash.get(_SERVERS, []):
            report.sections.append(
                (f"live server output ({server.label}, {server.url})", server.output())
            )
    return report


#: The node ids of every test this session collected, each with its marker names, taken
#: before ``-m``, ``-k`` or ``--deselect`` set any aside (``tests/suite/test_markers.py``).
COLLECTED = pytest.StashKey[dict[str, set[str]]]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[COLLECTED] = {
        item.nodeid: {marker.name for marker in item.iter_markers()} for item in items
    }

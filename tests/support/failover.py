"""Services that fail over, and a load that counts what a fault costs
(``tests/resilience/test_redis_failover.py``, ``tests/resilience/test_postgres_restart.py``).

- :class:`SentinelSet`: a Redis primary, a replica and three Sentinels of our own on loopback
  ports (``redis-server``, ``redis-server --sentinel``), nothing persisted; the primary can
  be killed and the Sentinels promote the replica.
- :class:`PostgresCluster`: a PostgreSQL cluster of our own (``initdb`` in a temporary
  folder, ``postgres`` on a loopback port, run as an unprivileged user when the tests run as
  root); restarted, crashed, or replaced at the same address by a promoted standby.
- :class:`Load`: clients that start tasks (some sleep, some report progress, some ask a
  question), follow them with ``tasks/get`` and answer their questions, record every
  request (answered, an error, or no answer at all), and leave questions waiting across
  the fault; :func:`audit` reads the outcome from the database.

``MCP_TASKS_TEST_FAILOVER=long`` runs the long mode (more clients, longer load, repeated
faults); the default is the short mode CI runs.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tests.support.worker_fixtures import (
    WAIT,
    capabilities,
    db_rows,
    envelope,
    free_port,
    headers_for,
    parse_messages,
)

#: ``long``: the long mode (minutes); anything else: the short mode CI runs.
LONG = os.environ.get("MCP_TASKS_TEST_FAILOVER", "short") == "long"
TERMINAL = ("completed", "failed", "cancelled")


def _wait(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if predicate():
                return
        time.sleep(interval)
    raise RuntimeError(f"{what} within {timeout:g}s")


# -- Redis with Sentinel ------------------------------------------------------------------------


@dataclass
class _Node:
    """One ``redis-server`` (a data node or a Sentinel)."""

    port: int
    args: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                ["redis-server", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def client(self, **kwargs: Any) -> Any:
        import redis

        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2, **kwargs)

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


class SentinelSet:
    """A primary, a replica and three Sentinels (quorum 2) watching them as
    :attr:`master_name`. A master is declared down after :attr:`down_after_ms` without an
    answer; the Sentinels then promote the replica."""

    master_name = "mcp_tasks_failover"
    label = "redis sentinels"
    url = "(redis with sentinel)"

    def __init__(self, directory: Path, *, down_after_ms: int = 1000) -> None:
        self.directory = directory
        self.down_after_ms = down_after_ms
        data_ports = [free_port(), free_port()]
        self.data: dict[int, _Node] = {}
        for number, port in enumerate(data_ports):
            args = [
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
                "--dbfilename",
                f"dump-{port}.rdb",
            ]
            if number:
                args += ["--replicaof", "127.0.0.1", str(data_ports[0])]
            self.data[port] = _Node(port, args, directory / f"redis-{port}.log")
        self.first_primary = data_ports[0]
        self.sentinel_nodes: list[_Node] = []
        for _ in range(3):
            port = free_port()
            conf = directory / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\n"
                "bind 127.0.0.1\n"
                f"dir {directory}\n"
                f"sentinel monitor {self.master_name} 127.0.0.1 {data_ports[0]} 2\n"
                f"sentinel down-after-milliseconds {self.master_name} {down_after_ms}\n"
                f"sentinel failover-timeout {self.master_name} 5000\n"
                f"sentinel parallel-syncs {self.master_name} 1\n"
            )
            self.sentinel_nodes.append(
                _Node(port, [str(conf), "--sentinel"], directory / f"sentinel-{port}.log")
            )

    @property
    def sentinels(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", node.port) for node in self.sentinel_nodes]

    def env(self) -> dict[str, str]:
        """The example project's variables for this topology."""
        return {
            "REDIS_SENTINELS": ",".join(f"{host}:{port}" for host, port in self.sentinels),
            "REDIS_MASTER_NAME": self.master_name,
        }

    def start(self) -> None:
        for node in self.data.values():
            node.start()
        for node in self.data.values():
            _wait(node.client().ping, 15, f"redis on {node.port} is not up")
        for node in self.sentinel_nodes:
            node.start()
        self.wait_until_healthy(self.first_primary)

    def wait_until_healthy(self, master: int, timeout: float = 30.0) -> None:
        """Until every Sentinel names ``master``, knows the other Sentinels and sees every
        live data node replicating from it (a failover can then happen again)."""
        replicas = {port for port, node in self.data.items() if node.process and port != master}

        def healthy() -> bool:
            for node in self.sentinel_nodes:
                sentinel = node.client(decode_responses=True)
                try:
                    if self._master_of(sentinel) != master:
                        return False
                    if len(sentinel.sentinel_sentinels(self.master_name)) < 2:
                        return False
                    seen = {
                        int(r["port"])
                        for r in sentinel.sentinel_slaves(self.master_name)
                        if "s_down" not in r["flags"] and r.get("master-link-status") == "ok"
                    }
                    if not replicas <= seen:
                        return False
                finally:
                    sentinel.close()
            for port in replicas:
                info = self.data[port].client(decode_responses=True).info("replication")
                if info.get("master_port") != master or info.get("master_link_status") != "up":
                    return False
            return True

        _wait(healthy, timeout, f"the sentinels did not settle on master {master}", 0.1)

    def _master_of(self, sentinel: Any) -> int:
        _, port = sentinel.sentinel_get_master_addr_by_name(self.master_name)
        return int(port)

    def master(self) -> int:
        """The master's port, as the first Sentinel that answers names it."""
        for node in self.sentinel_nodes:
            with contextlib.suppress(Exception):
                sentinel = node.client(decode_responses=True)
                try:
                    return self._master_of(sentinel)
                finally:
                    sentinel.close()
        raise RuntimeError("no sentinel answers")

    def kill_master(self) -> int:
        """SIGKILL the master (what it had not sent its replica is lost); its port."""
        port = self.master()
        self.data[port].kill()
        return port

    def wait_for_new_master(self, old: int, timeout: float = 30.0) -> int:
        """Until the Sentinels name a master other than ``old``; its port."""
        _wait(lambda: self.master() != old, timeout, "the sentinels promoted no replica", 0.05)
        return self.master()

    def replicas(self) -> list[int]:
        """The ports of the running data nodes other than the master."""
        master = self.master()
        return [port for port, node in self.data.items() if node.process and port != master]

    def pause(self, port: int) -> None:
        """SIGSTOP the data node on ``port``: a replica then falls behind its master."""
        node = self.data[port]
        assert node.process is not None
        node.process.send_signal(signal.SIGSTOP)

    def resume(self, port: int) -> None:
        node = self.data[port]
        assert node.process is not None
        node.process.send_signal(signal.SIGCONT)

    def kill_master_ahead_of_its_replica(
        self, behind: float, meanwhile: Callable[[], object] | None = None
    ) -> int:
        """Pause the replica, let the master take writes alone for ``behind`` seconds, kill
        the master and resume the replica: the Sentinels promote a replica that never got
        those writes (jobs queued, jobs started), as when a master dies before its replica
        caught up. ``behind`` stays under the Sentinels' ``down-after`` so the replica is
        still eligible. ``meanwhile()`` runs while the master is ahead (within ``behind``
        seconds). The killed master's port."""
        (replica,) = self.replicas()
        master = self.data[self.master()]
        self.pause(replica)
        try:
            # What the master sent before now may still sit in the paused replica's socket;
            # from now on it sends nothing (the replica cannot connect again while paused).
            client = master.client()
            try:
                client.client_kill_filter(_type="replica")
            finally:
                client.close()
            ahead_since = time.monotonic()
            if meanwhile is not None:
                meanwhile()
            time.sleep(max(0.0, behind - (time.monotonic() - ahead_since)))
            return self.kill_master()
        finally:
            self.resume(replica)

    def restart(self, port: int) -> None:
        """Start the data node on ``port`` again (empty: nothing persists); the Sentinels
        make it a replica of the current master."""
        self.data[port].start()
        _wait(lambda: self.data[port].client().ping(), 15, f"redis on {port} is not up")

    def stop(self) -> None:
        for node in [*self.sentinel_nodes, *self.data.values()]:
            node.stop()

    def output(self) -> str:
        return "\n".join(
            f"--- {node.log_path.name} ---\n{node.output()[-4000:]}"
            for node in [*self.data.values(), *self.sentinel_nodes]
        )


# -- PostgreSQL -----------------------------------------------------------------------------------


def postgres_binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with ``initdb``, or None."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else None


def postgres_user() -> tuple[int, int] | None:
    """The uid and gid to run PostgreSQL as: this process's own unless it is root (the
    server refuses to run as root), then those of the ``postgres`` user (None: none)."""
    if os.geteuid() != 0:
        return os.geteuid(), os.getegid()
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def postgres_unavailable() -> str | None:
    """Why this machine cannot run a PostgreSQL cluster of the tests' own (None: it can)."""
    if postgres_binaries() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb)"
    if postgres_user() is None:
        return "the tests run as root and there is no 'postgres' user to run the server as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    return None


@dataclass
class _Instance:
    data: Path
    port: int
    process: subprocess.Popen[bytes] | None = None


class PostgresCluster:
    """A PostgreSQL primary of our own on a loopback port (trust authentication, no fsync:
    a test's data), optionally with a synchronous standby that can replace it."""

    label = "postgres"
    url = "(postgres)"

    def __init__(self, *, port: int | None = None) -> None:
        binaries = postgres_binaries()
        user = postgres_user()
        assert binaries is not None and user is not None, postgres_unavailable()
        self.bin = binaries
        self.uid, self.gid = user
        # Not under pytest's tmp_path: that folder is root's alone, and the server may not
        # run as root.
        self.root = Path(tempfile.mkdtemp(prefix="mcp_tasks_pg_"))
        os.chown(self.root, self.uid, self.gid)
        self.log_path = self.root / "postgres.log"
        self.port = port or free_port()
        self.primary = _Instance(self.root / "primary", self.port)
        self.standby: _Instance | None = None
        self.standbys = 0

    # running as the server's user

    def _run(self, *args: str) -> None:
        subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            user=self.uid,
            group=self.gid,
            cwd=self.root,
            timeout=120,
        )

    def init(self) -> None:
        self._run(
            "initdb", "-D", str(self.primary.data), "-U", "postgres", "-A", "trust", "--no-sync"
        )

    def _start(self, instance: _Instance, *settings: str) -> None:
        log = self.log_path.open("ab")
        try:
            instance.process = subprocess.Popen(
                [
                    str(self.bin / "postgres"),
                    "-D",
                    str(instance.data),
                    "-p",
                    str(instance.port),
                    "-k",
                    str(self.root),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "max_connections=200",
                    "-c",
                    "wal_level=replica",
                    *itertools.chain.from_iterable(("-c", setting) for setting in settings),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                user=self.uid,
                group=self.gid,
                cwd=self.root,
            )
        finally:
            log.close()
        self._wait_ready(instance)

    def _wait_ready(self, instance: _Instance, timeout: float = 30.0) -> None:
        import psycopg

        def ready() -> bool:
            assert instance.process is not None
            if instance.process.poll() is not None:
                raise RuntimeError(f"postgres exited:\n{self.output()}")
            with psycopg.connect(
                self.database_url("postgres", instance.port), connect_timeout=2
            ) as conn:
                conn.execute("SELECT 1")
            return True

        _wait(ready, timeout, f"postgres on {instance.port} did not start", 0.05)

    def start(self) -> None:
        self._start(self.primary)

    def database_url(self, database: str, port: int | None = None) -> str:
        return f"postgres://postgres@127.0.0.1:{port or self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.database_url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    # faults

    def stop(self, how: str = "fast") -> None:
        """Stop the primary: ``fast`` (SIGINT: clients disconnected, a clean shutdown),
        ``immediate`` (SIGQUIT: no checkpoint, crash recovery at the next start) or
        ``kill`` (SIGKILL of the postmaster; its backends follow)."""
        process = self.primary.process
        if process is None or process.poll() is not None:
            return
        sig = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT, "kill": signal.SIGKILL}[how]
        process.send_signal(sig)
        process.wait(timeout=60)
        if how == "kill":
            self._wait_for_backends_gone(self.primary)
        self.primary.process = None

    def _wait_for_backends_gone(self, instance: _Instance) -> None:
        """After a SIGKILLed postmaster its backends exit on their own; the next one may
        start only once they have (the shared memory is still attached)."""
        pid_file = instance.data / "postmaster.pid"
        _wait(lambda: not _attached(pid_file), 30, "the old backends did not exit", 0.05)
        with contextlib.suppress(FileNotFoundError):
            pid_file.unlink()

    def restart(self, how: str = "fast", down_for: float = 0.0) -> None:
        """Stop the primary as ``how`` says, wait ``down_for`` seconds, start it again."""
        self.stop(how)
        time.sleep(down_for)
        self.start()

    def add_standby(self) -> None:
        """A streaming standby on a port of its own, synchronous: a commit the primary
        acknowledged is on the standby too (what a failover without data loss needs)."""
        self.standbys += 1
        standby = _Instance(self.root / f"standby-{self.standbys}", free_port())
        self._run(
            "pg_basebackup",
            "-D",
            str(standby.data),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        )
        self._start(standby, "cluster_name=standby")
        self.standby = standby
        import psycopg

        # From now on each commit waits for the standby (set after the copy: the standby,
        # once promoted, waits for nobody).
        with psycopg.connect(self.database_url("postgres"), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            conn.execute("SELECT pg_reload_conf()")
        self._wait_streaming()

    def _wait_streaming(self) -> None:
        import psycopg

        def streaming() -> bool:
            with psycopg.connect(self.database_url("postgres"), connect_timeout=2) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'"
                ).fetchone()
            return bool(row and row[0])

        _wait(streaming, 30, "the standby is not streaming synchronously", 0.1)

    def replace_primary(self) -> None:
        """The primary dies (SIGKILL) and its standby, promoted, takes its address: the
        same host and port, another server with the same data."""
        assert self.standby is not None
        self.stop("kill")
        self._run("pg_ctl", "promote", "-w", "-D", str(self.standby.data))
        standby = self.standby
        assert standby.process is not None
        standby.process.send_signal(signal.SIGINT)
        standby.process.wait(timeout=60)
        old, self.primary = self.primary, _Instance(standby.data, self.port)
        self.standby = None
        shutil.rmtree(old.data, ignore_errors=True)
        self._start(self.primary)

    def close(self) -> None:
        for instance in (self.primary, self.standby):
            if instance is not None and instance.process is not None:
                with contextlib.suppress(Exception):
                    instance.process.send_signal(signal.SIGQUIT)
                    instance.process.wait(timeout=20)
        shutil.rmtree(self.root, ignore_errors=True)

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""


def _attached(pid_file: Path) -> bool:
    """Whether processes still use the shared memory of the cluster whose pid file this is."""
    try:
        lines = pid_file.read_text().splitlines()
    except FileNotFoundError:
        return False
    if len(lines) < 7:
        return False
    key = lines[6].split()
    if not key:
        return False
    shmid = key[-1]
    result = subprocess.run(["ipcs", "-m", "-i", shmid], capture_output=True, text=True)
    return result.returncode == 0 and "nattch=0" not in result.stdout.replace(" ", "")


# -- the load -------------------------------------------------------------------------------------


@dataclass
class Request:
    kind: str  # "create", "get", "update"
    started: float
    ended: float
    outcome: str  # "ok", "error", "unanswered"
    detail: str = ""


@dataclass
class Load:
    """Clients that start and follow tasks until :meth:`stop`, from threads.

    Each client runs one task at a time: ``tools/call`` of ``failover_task`` (in turn
    quick, sleeping ``sleep`` seconds, reporting progress, asking a question), then
    ``tasks/get`` until it ends, answering its question with ``tasks/update``. A request
    that fails is an answer (an HTTP error or a JSON-RPC error); one that gets no response
    within ``timeout`` seconds, or whose connection breaks, is *unanswered*. :meth:`park`
    leaves questions waiting, answered later by :meth:`answer_parked`.
    """

    url: str
    marker_dir: Path
    clients: int = 4
    sleep: float = 1.0
    timeout: float = 30.0
    requests: list[Request] = field(default_factory=list)
    created: dict[str, str] = field(default_factory=dict)  # task id → key
    parked: dict[str, str] = field(default_factory=dict)  # task id → question key
    asking: set[str] = field(default_factory=set)  # keys of the tasks that ask a question
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _keys: Iterator[int] = field(default_factory=itertools.count)

    # one request

    def _post(
        self, http: httpx.Client, kind: str, method: str, params: dict[str, Any], name: str
    ) -> dict[str, Any] | None:
        body = envelope(method, params, caps=capabilities(elicitation=True))
        started = time.monotonic()
        try:
            response = http.post(
                f"{self.url}/mcp",
                json=body,
                headers=headers_for(method, name),
                timeout=self.timeout,
            )
            messages = parse_messages(response)
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            self._record(kind, started, "unanswered", f"{type(exc).__name__}: {exc}")
            return None
        if not messages:
            self._record(kind, started, "unanswered", f"HTTP {response.status_code}, no message")
            return None
        message = messages[-1]
        if response.status_code != 200 or "error" in message:
            error = message.get("error") or {}
            detail = f"HTTP {response.status_code} {error.get('code')}: {error.get('message')}"
            self._record(kind, started, "error", detail)
            return None
        self._record(kind, started, "ok")
        result: dict[str, Any] = message["result"]
        return result

    def _record(self, kind: str, started: float, outcome: str, detail: str = "") -> None:
        with self._lock:
            self.requests.append(Request(kind, started, time.monotonic(), outcome, detail))

    def _create(self, http: httpx.Client, arguments: dict[str, Any]) -> str | None:
        key = f"k{next(self._keys)}"
        if arguments.get("ask"):
            with self._lock:
                self.asking.add(key)
        params = {"name": "failover_task", "arguments": {**arguments, "key": key}}
        result = self._post(http, "create", "tools/call", params, "failover_task")
        if result is None or result.get("resultType") != "task":
            return None
        task_id = str(result["taskId"])
        with self._lock:
            self.created[task_id] = key
        return task_id

    def _get(self, http: httpx.Client, task_id: str) -> dict[str, Any] | None:
        return self._post(http, "get", "tasks/get", {"taskId": task_id}, task_id)

    def _answer(self, http: httpx.Client, task_id: str, keys: list[str]) -> bool:
        answers = {key: {"action": "accept", "content": {"value": "yes"}} for key in keys}
        params = {"taskId": task_id, "inputResponses": answers}
        return self._post(http, "update", "tasks/update", params, task_id) is not None

    # the clients

    def start(self) -> None:
        for number in range(self.clients):
            thread = threading.Thread(target=self._client, args=(number,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _client(self, number: int) -> None:
        kinds: Iterator[dict[str, Any]] = itertools.cycle(
            [
                {},
                {"seconds": self.sleep},
                {"progress": True},
                {"ask": True},
                {"seconds": self.sleep / 2, "ask": True, "progress": True},
            ]
        )
        for _ in range(number):
            next(kinds)
        with httpx.Client() as http:
            while not self._stop.is_set():
                arguments = {"marker_dir": str(self.marker_dir), **next(kinds)}
                task_id = self._create(http, arguments)
                if task_id is None:
                    time.sleep(0.1)
                    continue
                self._follow(http, task_id)

    def _follow(self, http: httpx.Client, task_id: str) -> None:
        """``tasks/get`` until the task ends (or the load stops and it waits for nothing),
        answering its questions."""
        answered: set[str] = set()
        while True:
            task = self._get(http, task_id)
            if task is None:
                time.sleep(0.1)
                continue
            if task["status"] in TERMINAL:
                return
            if task["status"] == "input_required":
                keys = [key for key in task.get("inputRequests") or {} if key not in answered]
                if keys and self._answer(http, task_id, keys):
                    answered.update(keys)
            elif (
                self._stop.is_set()
                and task.get("statusMessage") == "Queued"
                and self.created.get(task_id) not in self.asking
            ):
                # Queued when the load stopped: the audit follows it. Not one that will ask
                # a question (its job lost in the fault and queued again, say): nobody else
                # would answer it, and it would never end.
                return
            time.sleep(0.05)

    def burst(self, count: int, seconds: float) -> None:
        """Start ``count`` tasks that sleep ``seconds`` at once, without following them (a
        backlog: some wait in the queue, some run)."""
        with httpx.Client() as http:
            for _ in range(count):
                self._create(http, {"marker_dir": str(self.marker_dir), "seconds": seconds})

    def park(self, count: int) -> None:
        """Start ``count`` tasks that ask a question and leave them waiting for it."""
        with httpx.Client() as http:
            for _ in range(count):
                task_id = None
                while task_id is None:
                    task_id = self._create(http, {"marker_dir": str(self.marker_dir), "ask": True})
                deadline = time.monotonic() + WAIT
                while time.monotonic() < deadline:
                    task = self._get(http, task_id)
                    if task is not None and task.get("inputRequests"):
                        self.parked[task_id] = next(iter(task["inputRequests"]))
                        break
                    time.sleep(0.05)
                else:
                    raise AssertionError(f"parked task {task_id} never asked its question")

    def answer_parked(self, deadline: float = WAIT) -> None:
        """Answer the questions parked so far (again after an error answer, until one is
        taken or the task no longer waits for it)."""
        with httpx.Client() as http:
            for task_id, key in list(self.parked.items()):
                del self.parked[task_id]
                end = time.monotonic() + deadline
                while time.monotonic() < end and not self._answer(http, task_id, [key]):
                    task = self._get(http, task_id)
                    if task is not None and key not in (task.get("inputRequests") or {}):
                        break  # the error said it was answered already (the first went in)
                    time.sleep(0.1)

    def stop(self, settle: float = WAIT) -> None:
        """Stop starting tasks; wait (at most ``settle`` seconds) for the clients to
        finish following theirs."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=settle)

    # what it saw

    def outcomes(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter((request.kind, request.outcome) for request in self.requests)

    def unanswered(self) -> list[Request]:
        with self._lock:
            return [request for request in self.requests if request.outcome == "unanswered"]

    def errors(self) -> Counter[str]:
        with self._lock:
            return Counter(
                f"{request.kind}: {request.detail}"
                for request in self.requests
                if request.outcome == "error"
            )

    def longest_gap(self, kind: str, since: float, until: float) -> float:
        """The longest time between ``since`` and ``until`` in which no request of ``kind``
        got a successful answer (by when the answers came)."""
        with self._lock:
            ends = sorted(
                request.ended
                for request in self.requests
                if request.kind == kind and request.outcome == "ok" and since <= request.ended
            )
        points = [since, *[end for end in ends if end <= until], until]
        return max(b - a for a, b in itertools.pairwise(points))

    def completions(self) -> Counter[str]:
        """How many runs of each task key ran to completion (marker files)."""
        return Counter(path.name.split("-")[1] for path in self.marker_dir.glob("done-*"))

    def started_twice(self) -> list[str]:
        """The keys of tasks without a question whose tool started more than once (a
        task that asks runs again from the start when it resumes: not counted)."""
        starts = Counter(path.name.split("-")[1] for path in self.marker_dir.glob("start-*"))
        return [key for key, count in starts.items() if count > 1 and key not in self.asking]


@dataclass
class Audit:
    """The tasks of a run as the database has them at the end."""

    statuses: Counter[str]
    failures: Counter[str]
    stuck: list[tuple[str, str, str]]
    runs_twice: list[str]
    #: Tasks without a question whose tool started twice (a job run twice at once).
    started_twice: list[str]
    rows: int
    ids: set[str]
    #: Tasks whose lost job was queued again from the database.
    requeued: int
    #: Questions withdrawn unasked (the tool was told "cancel").
    withdrawn: int

    def summary(self) -> str:
        return (
            f"{self.rows} tasks: {dict(self.statuses)}; failed: {dict(self.failures)}; "
            f"stuck: {len(self.stuck)}; ran twice to completion: {len(self.runs_twice)}; "
            f"started twice: {len(self.started_twice)}; "
            f"queued again: {self.requeued}; questions withdrawn: {self.withdrawn}"
        )


def audit(database_url: str, load: Load, settle: float, since: datetime) -> Audit:
    """Wait (at most ``settle`` seconds) until every task created since ``since`` has
    ended, then count them: by status, failures by reason, the ones that never ended
    (stuck), and the keys that ran (to completion) more than once."""
    deadline = time.monotonic() + settle
    stamp: Any = since.astimezone(UTC)
    if database_url.startswith("sqlite:"):  # Django's text form there
        stamp = stamp.strftime("%Y-%m-%d %H:%M:%S.%f")
    while True:
        rows = db_rows(
            database_url,
            "SELECT id, status, status_message FROM mcp_tasks_task WHERE created_at >= %s",
            (stamp,),
        )
        open_rows = [row for row in rows if row[1] not in TERMINAL]
        if not open_rows or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    completions = load.completions()
    requeued = db_rows(
        database_url,
        "SELECT COUNT(DISTINCT task_id) FROM mcp_tasks_tasklogentry "
        "WHERE CAST(data AS TEXT) LIKE %s AND created_at >= %s",
        ("%queued again%", stamp),
    )[0][0]
    withdrawn = sum(1 for path in load.marker_dir.glob("done-*") if path.read_text() == "cancel")
    return Audit(
        requeued=int(requeued),
        withdrawn=withdrawn,
        statuses=Counter(str(row[1]) for row in rows),
        failures=Counter(str(row[2]) for row in rows if row[1] == "failed"),
        stuck=[(str(row[0]), str(row[1]), str(row[2])) for row in open_rows],
        runs_twice=[key for key, count in completions.items() if count > 1],
        started_twice=load.started_twice(),
        rows=len(rows),
        ids={str(row[0]) for row in rows},
    )


def report(title: str, load: Load, audit_: Audit, outage: dict[str, float]) -> str:
    """The figures of one fault, for the test's output (``-s``) and the README."""
    outcomes = load.outcomes()
    lines = [
        f"== {title} ({'long' if LONG else 'short'} mode)",
        f"   tasks submitted (answered by a CreateTaskResult): {len(load.created)}, "
        f"rows: {audit_.rows}",
        f"   {audit_.summary()}",
        "   requests: "
        + ", ".join(f"{kind} {outcome}: {n}" for (kind, outcome), n in sorted(outcomes.items())),
        f"   errors answered: {dict(load.errors())}",
        f"   unanswered: {len(load.unanswered())}",
        "   longest outage: " + ", ".join(f"{name} {value:.2f}s" for name, value in outage.items()),
    ]
    text = "\n".join(lines)
    print(text, flush=True)
    path = os.environ.get("MCP_TASKS_TEST_FAILOVER_REPORT")
    if path:
        with open(path, "a") as out:
            out.write(text + "\n")
    return text

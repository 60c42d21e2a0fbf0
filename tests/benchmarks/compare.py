"""Side-by-side benchmark: mcp_tasks against FastMCP 4 + fastmcp-tasks (and the SDK's own
MCPServer for plain calls), driven from outside over HTTP. A script, not a test::

    python tests/benchmarks/compare.py --workers 1            # the comparison, 3 rounds
    python tests/benchmarks/compare.py --workers 2 --rounds 5
    python tests/benchmarks/compare.py --quick --only ours    # CI smoke: seconds, no peer
    python tests/benchmarks/compare.py tasks-get-scaling      # mcp_tasks only: tasks/get vs rows
    python tests/benchmarks/compare.py parked --parked 1000   # mcp_tasks only: parked questions
    python tests/benchmarks/compare.py handles                # mcp_tasks only: clients without tasks
    python tests/benchmarks/compare.py questions              # mcp_tasks only: a question's phases
    python tests/benchmarks/compare.py embedded               # mcp_tasks only: ./scripts/dev mode
    python tests/benchmarks/compare.py fairness               # one caller's flood, another's wait
    python tests/benchmarks/compare.py --only ours,observed   # the cost of traces and metrics

Setup (README "Production"): a fresh PostgreSQL database (``--database-url`` names the server)
and a private ``redis-server`` (or ``--redis-url``) shared by all servers; mcp_tasks on daphne
with ``DJANGO_DEBUG=0`` and ``--workers`` ``manage.py rqworker mcp_tasks`` processes; the peer
(``peers/fastmcp_tasks_server.py``, in ``.venv-bench-peer``, built on first use) on uvicorn,
whose HTTP process runs no tasks, with ``--workers`` Docket worker processes; the SDK's
``MCPServer`` on uvicorn. The same client drives them all the same way (``bench_client.py``:
raw HTTP/1.1 on asyncio streams, or ``--client httpx``). Each round measures every server
once, in turn; the tables show the median of the rounds. Server logs go to a temporary directory; their last lines are printed
when something fails, and every process is stopped at the end (Ctrl-C too).

``fairness`` (``fairness.py``) runs each server alone, with 4 workers by default: a fresh
stack on its own private Redis (mcp_tasks: and a fresh database) per server and round,
stopped as soon as it is measured, which stops the flood it was given.

``observed`` (only when named in ``--only``) is mcp_tasks again, on a database of its own,
with ``TRACING`` and ``METRICS`` on: an OpenTelemetry SDK ``BatchSpanProcessor`` whose
exporter encodes each batch as OTLP protobuf and drops it (the network send excluded), and
``prometheus_client`` in multiprocess mode. Its table gives the cost of both beside ``ours``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks import fairness, report  # noqa: E402
from tests.benchmarks.bench_client import (  # noqa: E402
    TRANSPORTS,
    BenchClient,
    BenchError,
    Transport,
)
from tests.benchmarks.measure import Sizes, measure_stack, warm_up  # noqa: E402
from tests.benchmarks.stacks import (  # noqa: E402
    Stack,
    ours_slots,
    peer_slots,
    start_embedded,
    start_ours,
    start_peer,
    start_sdk,
)
from tests.benchmarks.submodes import (  # noqa: E402
    run_handles,
    run_parked,
    run_questions,
    run_scaling,
)
from tests.conftest import _Databases, _postgres_target  # noqa: E402
from tests.support.legacy_client_fixtures import build_client_venv  # noqa: E402
from tests.support.worker_fixtures import RedisProcess, db_rows, free_port  # noqa: E402

SERVERS = ("ours", "observed", "peer", "sdk")
DEFAULT_SERVERS = ("ours", "peer", "sdk")
TITLES = {
    "ours": "mcp_tasks",
    "observed": "mcp_tasks, observed",
    "peer": "fastmcp-tasks",
    "sdk": "SDK MCPServer",
}
CLIENTS = {
    "raw": "raw HTTP/1.1 keep-alive connections on asyncio streams (--client raw)",
    "httpx": "httpx AsyncClients, 10 connections each (--client httpx)",
}
MODES = ("compare", "tasks-get-scaling", "parked", "handles", "questions", "embedded", "fairness")
ROUNDS = ("compare", "embedded")  # the modes that measure in rounds


@dataclass
class Services:
    """The database and Redis the servers share."""

    database_url: str
    database: str  # "PostgreSQL 15.2", for the report
    redis_url: str
    redis_pid: int | None  # a private redis-server's pid (its CPU is reported)
    redis: str


# -- services ------------------------------------------------------------------------------


def start_services(args: argparse.Namespace, cleanup: contextlib.ExitStack, logs: Path) -> Services:
    database_url, database = fresh_database(args.database_url, cleanup, logs)
    return Services(database_url, database, *start_redis(args, cleanup, logs))


def start_redis(
    args: argparse.Namespace, cleanup: contextlib.ExitStack, logs: Path
) -> tuple[str, int | None, str]:
    """``--redis-url``, or a private ``redis-server`` stopped at the end: its URL, its pid
    (None for a given Redis) and its description."""
    if args.redis_url:
        redis_url, redis_pid, kind = args.redis_url, None, "given"
    else:
        if shutil.which("redis-server") is None:
            sys.exit("redis-server is not installed: install it or pass --redis-url")
        redis = RedisProcess(port=free_port(), log_path=logs / "redis.log")
        cleanup.callback(redis.stop)
        redis.start()
        assert redis.process is not None
        redis_url, redis_pid, kind = redis.url, redis.process.pid, "private redis-server"
    return redis_url, redis_pid, f"Redis {redis_version(redis_url)} ({kind})"


def database_source(server_url: str, cleanup: contextlib.ExitStack, logs: Path) -> _Databases:
    """Where new migrated databases come from: ``server_url`` (``sqlite://``: temporary
    files); every one is dropped at the end."""
    if server_url.startswith("sqlite"):
        return _Databases(logs, None)
    databases = _Databases(logs, server_url)
    cleanup.callback(databases.drop_all)
    return databases


def describe_database(url: str) -> str:
    if url.startswith("sqlite"):
        return "SQLite"
    version = db_rows(url, "SHOW server_version")[0][0]
    return f"PostgreSQL {str(version).split()[0]}"


def fresh_database(server_url: str, cleanup: contextlib.ExitStack, logs: Path) -> tuple[str, str]:
    """A new migrated database on ``server_url`` (``sqlite://``: a temporary file), dropped
    at the end, and its description."""
    url = database_source(server_url, cleanup, logs).new()
    return url, describe_database(url)


def redis_version(url: str) -> str:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return str(client.info("server")["redis_version"])
    finally:
        client.close()


# -- the comparison ------------------------------------------------------------------------


def start_stacks(
    args: argparse.Namespace, services: Services, cleanup: contextlib.ExitStack, logs: Path
) -> list[Stack]:
    stacks = []
    if "peer" in args.only:
        python = build_client_venv("bench-peer")
        stacks.append(
            start_peer(
                cleanup, logs, python=python, redis_url=services.redis_url, workers=args.workers
            )
        )
    if "ours" in args.only:
        stacks.append(
            start_ours(
                cleanup,
                logs,
                database_url=services.database_url,
                redis_url=services.redis_url,
                workers=args.workers,
                database=services.database,
            )
        )
    if "observed" in args.only:
        stacks.append(start_observed(args, services, cleanup, logs))
    if "sdk" in args.only:
        stacks.append(start_sdk(cleanup, logs))
    return stacks


def start_observed(
    args: argparse.Namespace, services: Services, cleanup: contextlib.ExitStack, logs: Path
) -> Stack:
    """mcp_tasks with ``TRACING`` and ``METRICS`` on (``tests.support.live_settings``:
    ``MCP_TASKS_TEST_TRACING=otlp``, ``PROMETHEUS_MULTIPROC_DIR``), on a database of its own
    and database 1 of the shared Redis."""
    metrics_dir = Path(tempfile.mkdtemp(prefix="bench-metrics-"))
    cleanup.callback(shutil.rmtree, metrics_dir, ignore_errors=True)
    database_url, database = fresh_database(args.database_url, cleanup, logs)
    stack = start_ours(
        cleanup,
        logs,
        database_url=database_url,
        # rq's keys have no prefix: another database of the same redis-server, whose CPU
        # is measured while this stack runs.
        redis_url=urlunsplit(urlsplit(services.redis_url)._replace(path="/1")),
        workers=args.workers,
        database=database,
        env={
            **({"MCP_TASKS_TEST_TRACING": "otlp"} if "tracing" in args.observe else {}),
            **({"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)} if "metrics" in args.observe else {}),
        },
        key="observed",
        title=TITLES["observed"],
    )
    if "tracing" in args.observe:
        stack.setup += "; TRACING on (BatchSpanProcessor, OTLP protobuf encoded and dropped)"
    if "metrics" in args.observe:
        stack.setup += "; METRICS on (prometheus_client multiprocess)"
    return stack


async def run_rounds(
    stacks: list[Stack],
    sizes: Sizes,
    rounds: int,
    redis_pid: int | None,
    transport: Transport = "raw",
) -> dict[str, dict[str, float]]:
    """Every stack measured once per round, in turn (the order rotates); the medians."""
    clients = {
        s.key: BenchClient(s.mcp_url, in_flight=sizes.in_flight, transport=transport)
        for s in stacks
    }
    samples: dict[str, dict[str, list[float]]] = {s.key: {} for s in stacks}
    try:
        for stack in stacks:
            await warm_up(stack, clients[stack.key])
        for number in range(rounds):
            shift = number % len(stacks)
            for stack in stacks[shift:] + stacks[:shift]:
                progress(f"round {number + 1}/{rounds}: {stack.title}")
                values = await measure_stack(stack, clients[stack.key], sizes, redis_pid)
                progress(f"  {stack.title}: {round_summary(values)}")
                for key, value in values.items():
                    samples[stack.key].setdefault(key, []).append(value)
    finally:
        for client in clients.values():
            await client.aclose()
    return {
        key: {metric: statistics.median(values) for metric, values in metrics.items()}
        for key, metrics in samples.items()
    }


def round_summary(values: dict[str, float]) -> str:
    """One round's headline figures, for the progress lines (the spread behind a median)."""
    shown = [
        ("task_p50", "task p50 {:.2f} ms"),
        ("tasks_per_s", "{:.0f} tasks/s"),
        ("cpu_per_task", "CPU {:.2f} ms/task"),
        ("question_p50", "question {:.1f} ms"),
        ("plain_per_s", "plain {:.0f}/s"),
    ]
    return ", ".join(text.format(values[key]) for key, text in shown if key in values)


def run_compare(
    args: argparse.Namespace, sizes: Sizes, cleanup: contextlib.ExitStack, logs: Path
) -> list[str]:
    services = start_services(args, cleanup, logs)
    stacks = start_stacks(args, services, cleanup, logs)
    started = Started()
    results = asyncio.run(run_rounds(stacks, sizes, args.rounds, services.redis_pid, args.client))
    lines = header(args, stacks, services, started)
    if {"ours", "peer"} & set(args.only):
        lines += ["", *report.task_table(results, sizes)]
    if "observed" in args.only:
        lines += ["", *report.observed_table(results, sizes)]
    if "sdk" in args.only:
        lines += ["", *report.sdk_table(results, sizes)]
    return lines


# -- the sub-modes (mcp_tasks only) ----------------------------------------------------------


def run_embedded(
    args: argparse.Namespace, sizes: Sizes, cleanup: contextlib.ExitStack, logs: Path
) -> list[str]:
    started = Started()
    database_url, _ = fresh_database("sqlite://", cleanup, logs)
    stack = start_embedded(cleanup, logs, database_url=database_url)
    results = asyncio.run(run_rounds([stack], sizes, args.rounds, None, args.client))
    body = report.single_table(results["embedded"], sizes, stack.title)
    return [*header(args, [stack], None, started), "", *body]


def run_submode(
    args: argparse.Namespace, sizes: Sizes, cleanup: contextlib.ExitStack, logs: Path
) -> list[str]:
    """``tasks-get-scaling``, ``parked``, ``handles`` or ``questions`` on one mcp_tasks
    stack."""
    started = Started()
    services = start_services(args, cleanup, logs)
    env = (
        {"MCP_TASKS_TEST_INPUT_HOLD_WINDOW": str(args.hold_window)} if args.mode == "parked" else {}
    )
    stack = start_ours(
        cleanup,
        logs,
        database_url=services.database_url,
        redis_url=services.redis_url,
        workers=args.workers,
        database=services.database,
        env=env,
    )
    if args.mode in ("tasks-get-scaling", "questions") and not services.database.startswith(
        "PostgreSQL"
    ):
        sys.exit(f"{args.mode} needs PostgreSQL (--database-url postgres://...)")
    if args.mode == "tasks-get-scaling":
        body = asyncio.run(run_scaling(stack, sizes, services.database_url))
    elif args.mode == "questions":
        body = asyncio.run(run_questions(stack, sizes, services.database_url))
    elif args.mode == "handles":
        body = asyncio.run(run_handles(stack, sizes, services.redis_url))
    else:
        body = asyncio.run(run_parked(stack, sizes, services.redis_url, args.hold_window))
    return [*header(args, [stack], services, started), "", *body]


# -- fairness (mcp_tasks and the peer) -----------------------------------------------------------


def run_fairness(
    args: argparse.Namespace, sizes: Sizes, cleanup: contextlib.ExitStack, logs: Path
) -> list[str]:
    """``fairness``: per round, each server in turn on a fresh stack of its own, measured
    (``fairness.py``) and stopped at once, with the rest of its flood."""
    started = Started()
    flood = fairness.Flood.quick() if args.quick else fairness.Flood()
    if args.tasks:
        flood = replace(flood, tasks=args.tasks)
    python = build_client_venv("bench-peer") if "peer" in args.only else None
    databases = database_source(args.database_url, cleanup, logs)
    samples: dict[str, list[dict[str, float]]] = {key: [] for key in args.only}
    stacks: dict[str, Stack] = {}
    slots: dict[str, int] = {}
    database = redis = ""
    for number in range(args.rounds):
        shift = number % len(args.only)
        for key in args.only[shift:] + args.only[:shift]:
            progress(f"round {number + 1}/{args.rounds}: {TITLES[key]}")
            with contextlib.ExitStack() as run_cleanup:
                redis_url, _, redis = start_redis(args, run_cleanup, logs)
                if key == "ours":
                    database_url = databases.new()
                    database = describe_database(database_url)
                    stack = start_ours(
                        run_cleanup,
                        logs,
                        database_url=database_url,
                        redis_url=redis_url,
                        workers=args.workers,
                        database=database,
                        env=fairness.OURS_ENV,
                    )
                    slots[key] = ours_slots(stack)
                else:
                    assert python is not None
                    stack = start_peer(
                        run_cleanup,
                        logs,
                        python=python,
                        redis_url=redis_url,
                        workers=args.workers,
                        redis="its own keys" if args.redis_url else "its own Redis",
                    )
                    slots[key] = peer_slots(stack)
                stacks.setdefault(key, stack)
                # A shared Redis keeps mcp_tasks' queue: cancel the rest of the flood first.
                shared = bool(args.redis_url) and key == "ours"
                values = asyncio.run(
                    fairness.measure_fairness(stack, flood, progress, cancel_rest=shared)
                )
                progress(f"  {stack.title}: {fairness.round_summary(values)}; stopping it")
                samples[key].append(values)
            if args.redis_url and key == "peer":
                forget_docket(args.redis_url, stack)
    results = {
        key: fairness.with_derived(values, slots[key])
        for key, values in fairness.medians(samples).items()
    }
    where = "per server and run" if not args.redis_url else "shared by every run"
    services = f"{database or 'no database'} (a fresh one per mcp_tasks run), {redis} {where}"
    lines = header(args, list(stacks.values()), services, started)
    return [*lines, "", *fairness.report(results, flood)]


def forget_docket(redis_url: str, stack: Stack) -> None:
    """Delete the keys a stopped peer left in a shared Redis (its Docket's, by name)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        name = stack.http.env["FASTMCP_DOCKET_NAME"]
        keys = list(client.scan_iter(match=f"{name}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start : start + 1000])
    finally:
        client.close()


# -- report header -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    """When the measuring started, and how busy the machine was then."""

    at: float = field(default_factory=time.monotonic)
    load: tuple[float, float, float] = field(default_factory=os.getloadavg)


def header(
    args: argparse.Namespace,
    stacks: list[Stack],
    services: Services | str | None,
    started: Started,
) -> list[str]:
    """The machine, the setup and the command that reproduces the run (``services``: the
    services line's text, when not a :class:`Services`)."""
    rounds = ""
    if args.mode in ROUNDS:
        rounds = f", median of {args.rounds} interleaved round(s)"
    elif args.mode == "fairness":
        rounds = f", median of {args.rounds} round(s)"
    lines = [
        f"mcp_tasks benchmark: {args.mode}{rounds}",
        f"machine: {machine()}; load average (1 min) {started.load[0]:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end",
        *(f"setup: {stack.setup}" for stack in stacks),
    ]
    if isinstance(services, str):
        lines.append(f"services: {services}")
    elif services is not None:
        lines.append(f"services: {services.database} (a fresh database), {services.redis}")
    lines += [
        f"client: {CLIENTS[args.client]} in this process; tasks/get at once, "
        "then after 20 ms, doubling, capped by pollIntervalMs",
        f"measured in {time.monotonic() - started.at:.0f}s; reproduce: "
        "python tests/benchmarks/compare.py " + shlex.join(sys.argv[1:]),
    ]
    return lines


def machine() -> str:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (
        f"{os.cpu_count()} cores ({model or platform.machine()}), {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def progress(message: str) -> None:
    print(f"[compare] {message}", file=sys.stderr, flush=True)


# -- command line --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", nargs="?", default="compare", choices=MODES)
    parser.add_argument(
        "--workers",
        type=int,
        help="worker processes per server (default 1; fairness: 4, with --quick 2)",
    )
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3; fairness: 1)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1 round, few iterations (CI); fairness: mcp_tasks only, a flood of 200",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="ours|observed|peer|sdk",
        help="servers to measure (repeat or comma-separate; default all)",
    )
    parser.add_argument(
        "--database-url",
        default=_postgres_target(),
        help="PostgreSQL server to create the database on (default %(default)s: DATABASE_URL "
        "when that is PostgreSQL, else the local server); "
        "sqlite:// for a temporary SQLite file",
    )
    parser.add_argument("--redis-url", help="use this Redis instead of a private redis-server")
    parser.add_argument(
        "--tasks",
        type=int,
        help="trivial tasks of the throughput run (default 200: the issue's burst; "
        "1000 or more measures sustained throughput); fairness: the flood's tasks "
        "(default 3000)",
    )
    parser.add_argument(
        "--client",
        choices=TRANSPORTS,
        default="raw",
        help="the driver's HTTP client (default raw: keep-alive connections on asyncio "
        "streams; httpx: httpx.AsyncClient, about 4x the driver's CPU per request)",
    )
    parser.add_argument(
        "--observe",
        default="tracing,metrics",
        help="observed: what it turns on (default tracing,metrics; or tracing, or metrics)",
    )
    parser.add_argument("--parked", type=int, help="parked: tasks to park (default 1000)")
    parser.add_argument(
        "--hold-window",
        type=float,
        default=0.1,
        help="parked: INPUT_HOLD_WINDOW of the server, seconds (default 0.1)",
    )
    parser.add_argument(
        "--rows",
        help="tasks-get-scaling: comma-separated table sizes (default 1000,100000,1000000)",
    )
    args = parser.parse_args(argv)
    fair = args.mode == "fairness"
    servers = DEFAULT_SERVERS if not fair else ("ours",) if args.quick else ("ours", "peer")
    only = [name for item in args.only or servers for name in item.split(",") if name]
    if unknown := set(only) - set(SERVERS):
        parser.error(f"--only: unknown server(s) {', '.join(sorted(unknown))}")
    if fair and {"sdk", "observed"} & set(only):
        parser.error("fairness: only ours and peer (--only ours,peer)")
    args.only = [name for name in SERVERS if name in only]
    args.observe = {item for item in args.observe.split(",") if item}
    if not args.observe or args.observe - {"tracing", "metrics"}:
        parser.error("--observe: tracing, metrics or both (comma-separated)")
    if args.workers is None:
        args.workers = (2 if args.quick else 4) if fair else 1
    if args.rounds is None:
        args.rounds = 1 if fair else 3
    if args.quick:
        args.rounds = 1
    if args.workers < 1 or args.rounds < 1:
        parser.error("--workers and --rounds must be at least 1")
    return args


def sizes_for(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.tasks:
        sizes = replace(sizes, tasks=args.tasks)
    if args.parked:
        sizes = replace(sizes, parked=args.parked)
    if args.rows:
        sizes = replace(sizes, scaling=tuple(int(n) for n in args.rows.split(",")))
    return sizes


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the ``finally`` blocks stop every process."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def print_logs(logs: Path) -> None:
    for log in sorted(logs.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()[-30:]
        print(f"--- {log.name} (last lines)", *lines, sep="\n", file=sys.stderr)


def main() -> None:
    args = parse_args()
    sizes = sizes_for(args)
    logs = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        with interruptible(), contextlib.ExitStack() as cleanup:
            run = {
                "compare": run_compare,
                "embedded": run_embedded,
                "fairness": run_fairness,
            }.get(args.mode, run_submode)
            lines = run(args, sizes, cleanup, logs)
            progress("stopping the servers")
    except KeyboardInterrupt:
        progress(f"interrupted; logs kept in {logs}")
        raise SystemExit(130) from None
    except (BenchError, Exception):
        print_logs(logs)
        progress(f"failed; logs kept in {logs}")
        raise
    print("\n".join(lines))
    shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Legacy calls under load (issue 10 §3), on one server process as README "Production" runs
it. A script, not a test::

    python tests/benchmarks/legacy_load.py                 # 60 s per run, 200 sessions
    python tests/benchmarks/legacy_load.py --quick         # a few seconds (CI smoke)
    python tests/benchmarks/legacy_load.py --seconds 30 --overload-rate 2000

Setup: ``uvicorn project.asgi:application --workers 1 --lifespan off --no-access-log
--backlog 2048 --http mcp_tasks.contrib.uvicorn_http:HttpToolsProtocol`` (uvloop,
httptools, connections accepted after ``MAX_ACCEPT_WAIT`` refused) with ``DJANGO_DEBUG=0``, a fresh PostgreSQL database
and a private ``redis-server`` (``compare.py``'s services); no task workers (``add`` is a
plain call). The client is this process, on raw asyncio streams (``raw_http.py``).

Phases, in order:

1. modern: ``--sessions`` keep-alive connections each call ``add`` (2026-07-28) once a
   second for ``--seconds``: the server's CPU per modern call;
2. legacy: ``--sessions`` legacy sessions (half 2025-03-26, half 2025-11-25), each holding
   its ``GET`` stream open, each call ``add`` once a second for ``--seconds``; meanwhile a
   separate modern client calls 10 times a second. Latency p50/p95/max, the server's CPU per
   legacy call (the separate client's share taken out at the modern cost);
3. burst: ``--burst`` new connections at once, each with one call, while the streams are
   still open: resets and connections left without a response;
4. overload: calls of the ``spin`` test tool (``--overload-ms`` of server CPU each: a process
   serves ~1000/ms of them a second) at ``--overload-rate`` a second, open loop, for
   ``--overload-seconds``, on keep-alive connections (a new one when all are busy): every
   call is answered, served or refused (503 + ``Retry-After``), none dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.benchmarks import load_phases as phases  # noqa: E402
from tests.benchmarks.compare import (  # noqa: E402
    Services,
    interruptible,
    machine,
    print_logs,
    progress,
    start_services,
)
from tests.benchmarks.stacks import cpu_seconds, ours_env, settings_value  # noqa: E402
from tests.conftest import (  # noqa: E402
    SERVER_START_TIMEOUT,
    LiveServer,
    _postgres_target,
    _server_env,
    _wait_until_serving,
)
from tests.support.worker_fixtures import free_port  # noqa: E402

HOST = "127.0.0.1"
OBSERVER_RATE = 10.0  # calls a second of the separate modern client
#: The server's admission limits, as ``manage.py shell`` prints them.
LIMITS = (
    "'MAX_ACCEPT_WAIT=%(MAX_ACCEPT_WAIT)s, MAX_REQUESTS_IN_PROGRESS=%(MAX_REQUESTS_IN_PROGRESS)s'"
    " % __import__('mcp_tasks.conf', fromlist=['_']).get_config().model_dump()"
)


#: README "Production", on one process and a loopback port.
def production_command(port: int) -> list[str]:
    return [
        sys.executable, "-m", "uvicorn", "project.asgi:application",
        "--host", HOST, "--port", str(port), "--workers", "1", "--lifespan", "off",
        "--no-access-log", "--backlog", "2048", "--loop", "uvloop",
        "--http", "mcp_tasks.contrib.uvicorn_http:HttpToolsProtocol",
    ]  # fmt: skip


def start_server(
    args: argparse.Namespace, services: Services, cleanup: contextlib.ExitStack, logs: Path
) -> LiveServer:
    import subprocess

    extra = dict(item.split("=", 1) for item in args.server_env)
    env = _server_env(ours_env(services.database_url, services.redis_url, **extra))
    port = free_port()
    log_path = logs / "uvicorn.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        production_command(port),
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = LiveServer(
        f"http://{HOST}:{port}", services.database_url, env, process, log_path, "uvicorn", log
    )
    cleanup.callback(server.stop)
    _wait_until_serving(server, time.monotonic() + SERVER_START_TIMEOUT)
    return server


@contextlib.contextmanager
def profiled(args: argparse.Namespace, pid: int, name: str) -> Iterator[None]:
    """With ``--profile DIR``: py-spy samples ``pid`` meanwhile, into ``DIR/name.txt``
    (collapsed stacks; ``--summary`` of ``profile_summary.py`` reads them)."""
    if not args.profile:
        yield
        return
    import subprocess

    out = Path(args.profile) / f"{name}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "-o",
         str(out), "-f", "raw", "--rate", "200", "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(30)


async def measure(args: argparse.Namespace, server: LiveServer) -> dict[str, object]:
    port = int(server.url.rsplit(":", 1)[1])
    pid = server.process.pid
    results: dict[str, object] = {}
    warm = phases.Tally()
    await phases.paced(phases.modern_callers(HOST, port, 20), 5, 1, warm, time.perf_counter())

    progress(f"modern: {args.sessions} connections x 1 call/s for {args.seconds:g}s")
    modern = phases.Tally()
    callers = phases.modern_callers(HOST, port, args.sessions)
    before = cpu_seconds(pid)
    with profiled(args, pid, "modern"):
        await phases.paced(callers, 1.0, args.seconds, modern, time.perf_counter() + 0.2)
    modern_cpu = (cpu_seconds(pid) - before) / max(1, modern.answered)
    results |= {"modern": modern, "modern_cpu": modern_cpu}

    progress(f"legacy: opening {args.sessions} sessions with their GET streams")
    sessions = await phases.start_sessions(HOST, port, args.sessions)
    try:
        progress(f"legacy: {args.sessions} sessions x 1 call/s for {args.seconds:g}s")
        legacy, observer = phases.Tally(), phases.Tally()
        start_at = time.perf_counter() + 0.2
        before = cpu_seconds(pid)
        with profiled(args, pid, "legacy"):
            await asyncio.gather(
                phases.paced([s.call for s in sessions], 1.0, args.seconds, legacy, start_at),
                phases.paced(
                    phases.modern_callers(HOST, port, 1),
                    OBSERVER_RATE,
                    args.seconds,
                    observer,
                    start_at,
                ),
            )
        used = cpu_seconds(pid) - before
        legacy_cpu = (used - observer.answered * modern_cpu) / max(1, legacy.answered)
        results |= {
            "legacy": legacy,
            "observer": observer,
            "legacy_cpu": legacy_cpu,
            "legacy_rate": legacy.answered / args.seconds,
            "server_load": used / args.seconds,
        }
        progress(f"burst: {args.burst} new connections at once, the streams open")
        results["burst"] = await phases.burst(HOST, port, args.burst)
        results["streams_open"] = sum(session.stream_open() for session in sessions)
    finally:
        for session in sessions:
            await session.stop()
    progress(f"overload: {args.overload_rate:g} calls/s for {args.overload_seconds:g}s")
    await asyncio.sleep(1)
    before, client_before = cpu_seconds(pid), time.process_time()
    started = time.perf_counter()
    results["overload"] = await phases.overload(
        HOST, port, args.overload_rate, args.overload_seconds, args.overload_ms
    )
    results["overload_time"] = time.perf_counter() - started
    elapsed = max(time.perf_counter() - started, 1.0)  # 0 s of overload: no figure worth a ratio
    results["overload_load"] = (cpu_seconds(pid) - before) / elapsed
    results["overload_client"] = (time.process_time() - client_before) / elapsed
    return results


# -- report ----------------------------------------------------------------------------------


def row(metric: str, value: str, target: str = "", met: bool | None = None) -> str:
    verdict = "" if met is None else ("yes" if met else "NO")
    return f"| {metric} | {value} | {target} | {verdict} |"


def outcomes(tally: phases.Tally) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(tally.outcomes.items())) or "-"


def report(args: argparse.Namespace, results: dict[str, object], limit: str) -> list[str]:
    modern, legacy, observer = (results[k] for k in ("modern", "legacy", "observer"))
    burst, over = results["burst"], results["overload"]
    assert isinstance(modern, phases.Tally) and isinstance(legacy, phases.Tally)
    assert isinstance(observer, phases.Tally) and isinstance(burst, phases.Tally)
    assert isinstance(over, phases.Tally)
    modern_cpu, legacy_cpu = float(results["modern_cpu"]), float(results["legacy_cpu"])  # type: ignore[arg-type]
    ratio = legacy_cpu / modern_cpu if modern_cpu else math.nan
    offered_rate = args.sessions
    served, refused = over.outcomes["ok"], over.outcomes["503 + Retry-After"]
    dropped = over.offered - served - refused
    burst_lost = burst.offered - burst.outcomes["ok"] - burst.outcomes["503 + Retry-After"]
    return [
        "| metric | measured | target (issue 10 §3) | met |",
        "| --- | --- | --- | --- |",
        row("legacy calls answered / offered", f"{legacy.answered} / {legacy.offered}",
            "all", legacy.answered == legacy.offered),
        row("legacy rate (calls/s)", f"{results['legacy_rate']:.1f}", f"{offered_rate} offered"),
        row("legacy latency p50 (ms)", f"{legacy.ms(0.5):.1f}"),
        row("legacy latency p95 (ms)", f"{legacy.ms(0.95):.1f}", "≤ 50", legacy.ms(0.95) <= 50),
        row("legacy latency max (ms)", f"{max(legacy.latencies, default=math.nan) * 1000:.1f}"),
        row("separate client's p50 / p95 (ms)", f"{observer.ms(0.5):.1f} / {observer.ms(0.95):.1f}",
            "≤ 50 (p95)", observer.ms(0.95) <= 50),
        row("modern-only run p50 / p95 (ms)", f"{modern.ms(0.5):.1f} / {modern.ms(0.95):.1f}"),
        row("server CPU per modern call (ms)", f"{modern_cpu * 1000:.2f}"),
        row("server CPU per legacy call (ms)", f"{legacy_cpu * 1000:.2f}"),
        row("legacy / modern CPU", f"{ratio:.2f}", "≤ 1.5", ratio <= 1.5),
        row("server CPU during the legacy run", f"{float(results['server_load']) * 100:.0f}% of a core"),  # type: ignore[arg-type]
        row("GET streams still open after the run", f"{results['streams_open']} / {args.sessions}",
            "all", results["streams_open"] == args.sessions),
        row(f"burst: {args.burst} new connections at once", outcomes(burst)),
        row("burst: reset or no response", str(burst_lost), "0", burst_lost == 0),
        row(f"overload: {over.offered} calls of spin({args.overload_ms:g} ms) at "
            f"{args.overload_rate:g}/s", outcomes(over), "more than one process serves"),
        row("overload: served / refused 503 + Retry-After / dropped",
            f"{served} / {refused} / {dropped}", "0 dropped", dropped == 0),
        row("overload: 503 answer p50 / p95 (ms)",
            f"{over.ms(0.5, refused=True):.1f} / {over.ms(0.95, refused=True):.1f}", "fast"),
        row("overload: served call p50 / p95 / max (ms)",
            f"{over.ms(0.5):.0f} / {over.ms(0.95):.0f} / {over.ms(1.0):.0f}",
            f"queued within a bound ({limit})"),
        row("overload: server / client CPU",
            f"{float(results['overload_load']) * 100:.0f}% / "  # type: ignore[arg-type]
            f"{float(results['overload_client']) * 100:.0f}% of a core"),  # type: ignore[arg-type]
    ]  # fmt: skip


# -- command line ------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="per paced run (default 60)")
    parser.add_argument("--sessions", type=int, default=200, help="legacy sessions (default 200)")
    parser.add_argument("--burst", type=int, default=1000, help="new connections at once")
    parser.add_argument(
        "--overload-rate", type=float, default=600.0, help="overload: calls/s offered (600)"
    )
    parser.add_argument(
        "--overload-ms",
        type=float,
        default=5.0,
        help="overload: server CPU per call, ms (the spin tool; default 5: ~200 calls/s a core)",
    )
    parser.add_argument("--overload-seconds", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="a few seconds of each (CI)")
    parser.add_argument(
        "--database-url",
        default=_postgres_target(),
        help="PostgreSQL server to create the database on (default %(default)s)",
    )
    parser.add_argument("--redis-url", help="use this Redis instead of a private redis-server")
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable of the server (tests.support.live_settings reads MCP_TASKS_TEST_*)",
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy the server during the paced runs, into DIR"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.sessions, args.burst = 3.0, 40, 200
        args.overload_rate, args.overload_seconds = 600.0, 1.5
    return args


def main() -> None:
    args = parse_args()
    logs = Path(tempfile.mkdtemp(prefix="legacy-load-"))
    try:
        with interruptible(), contextlib.ExitStack() as cleanup:
            services = start_services(args, cleanup, logs)
            server = start_server(args, services, cleanup, logs)
            limit = settings_value(server, LIMITS)
            started = time.monotonic()
            results = asyncio.run(measure(args, server))
            if server.process.poll() is not None:
                raise RuntimeError(f"the server exited with {server.process.returncode}")
            lines = [
                "mcp_tasks legacy load (issue 10 §3)",
                f"machine: {machine()}",
                "setup: "
                + shlex.join(production_command(0)[2:]).replace("--port 0 ", "")
                + f", DJANGO_DEBUG=0; {services.database} (a fresh database), {services.redis}",
                f"measured in {time.monotonic() - started:.0f}s; reproduce: "
                "python tests/benchmarks/legacy_load.py " + shlex.join(sys.argv[1:]),
                "",
                *report(args, results, limit),
            ]
            progress("stopping the server")
    except KeyboardInterrupt:
        progress(f"interrupted; logs kept in {logs}")
        raise SystemExit(130) from None
    except Exception:
        print_logs(logs)
        progress(f"failed; logs kept in {logs}")
        raise
    print("\n".join(lines))
    shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    main()

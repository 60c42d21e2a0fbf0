"""Smoke tests of the benchmark driver (``tests/benchmarks/compare.py``): its quick modes
start the servers, measure and print a complete table. They never assert on times (CI
machines vary); the real runs are ``compare.py`` without ``--quick``. They carry the
``benchmark`` marker: the drivers start their own servers whatever the leg, so CI runs them
once, on the PostgreSQL leg (``noxfile.py``)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.fairness import ROWS as FAIRNESS_ROWS
from tests.benchmarks.report import MISSING, PLAIN_ROWS, TASK_ROWS
from tests.benchmarks.submodes import PHASES as QUESTION_PHASES
from tests.conftest import ROOT

COMPARE = ROOT / "tests" / "benchmarks" / "compare.py"
TIMEOUT = 300

pytestmark = pytest.mark.benchmark


def run_script(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a benchmark script in a session of its own. On a timeout it gets SIGTERM, which it
    handles like Ctrl-C: it stops the servers it started (``subprocess.run``'s SIGKILL would
    leave them running)."""
    process = subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
        pytest.fail(f"{script.name} {' '.join(args)} took over {TIMEOUT} s:\n{stdout}\n{stderr}")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run_compare(*args: str) -> str:
    """Run compare.py; its standard output (the test fails with both outputs on an error)."""
    done = run_script(COMPARE, *args)
    assert done.returncode == 0, f"compare.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def tables(output: str) -> list[list[list[str]]]:
    """The cells of each Markdown table in ``output`` (header and rule left out)."""
    found: list[list[list[str]]] = []
    rows: list[str] = []
    for line in [*output.splitlines(), ""]:
        if line.startswith("| "):
            rows.append(line)
        elif rows:
            found.append([[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]])
            rows = []
    return found


def table(output: str) -> list[list[str]]:
    """The cells of the first Markdown table in ``output``."""
    return tables(output)[0]


def is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", ""))
    except ValueError:
        return False
    return True


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.live
def test_quick_comparison_prints_a_number_for_every_metric(
    request: pytest.FixtureRequest, postgres_url: str
) -> None:
    """mcp_tasks alone, and again with TRACING and METRICS on (the cost table)."""
    args = ["--quick", "--only", "ours,observed", "--database-url", postgres_url]
    if shutil.which("redis-server") is None:  # then Redis CPU is not measured
        args += ["--redis-url", request.getfixturevalue("redis_url")]
    output = run_compare(*args)

    against_peer, cost = tables(output)
    metrics = len(TASK_ROWS) + len(PLAIN_ROWS) + 1
    assert len(against_peer) == len(cost) == metrics, output
    for label, peer, ours, ratio in against_peer:
        assert (peer, ratio) == (MISSING, MISSING), output  # the peer was not asked for
        assert is_number(ours) or ("Redis" in label and "--redis-url" in args), output
    for label, off, on, on_off in cost:
        redis_unmeasured = "Redis" in label and "--redis-url" in args
        assert (is_number(off) and is_number(on)) or redis_unmeasured, output
        assert on_off.endswith("x") or redis_unmeasured or off in ("0", "0.00"), output
    assert "TRACING on (BatchSpanProcessor" in output
    assert "reproduce: python tests/benchmarks/compare.py --quick --only ours,observed" in output


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.live
def test_quick_handles_mode_prints_both_ways_side_by_side(postgres_url: str) -> None:
    """A trivial task called with and without the tasks extension (README "Clients without
    tasks"): the same figures for both, and one request per task without it."""
    output = run_compare("handles", "--quick", "--database-url", postgres_url)
    rows = {label: values for label, *values in table(output)}
    assert len(rows) == 5, output
    assert all(is_number(value) for values in rows.values() for value in values), output
    assert rows["HTTP requests per task"][1] == "1.00", output


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.live
def test_quick_questions_mode_prints_every_phase_of_a_round_trip(postgres_url: str) -> None:
    """A question round trip split where its rows say it moved: every phase a time, and the
    phases in the order they happen (a worker claims the task before it asks)."""
    output = run_compare("questions", "--quick", "--database-url", postgres_url)
    rows = {label: values for label, *values in table(output)}
    assert list(rows) == [label for label, _, _ in QUESTION_PHASES], output
    assert all(is_number(value) for values in rows.values() for value in values), output
    claimed_to_asked = rows["claimed → the question recorded (tool ran, asked)"][0]
    assert float(claimed_to_asked.replace(",", "")) > 0, output


@pytest.mark.live
def test_quick_embedded_mode_prints_a_number_for_every_metric() -> None:
    output = run_compare("embedded", "--quick")

    rows = table(output)
    no_redis_no_workers = 3  # rows the one process of embedded mode has no figures for
    assert len(rows) == len(TASK_ROWS) + len(PLAIN_ROWS) + 1 - no_redis_no_workers, output
    assert all(is_number(value) for _, value in rows), output


LEGACY_LOAD = ROOT / "tests" / "benchmarks" / "legacy_load.py"
LEGACY_LOAD_METRICS = (
    "legacy calls answered / offered",
    "legacy latency p95 (ms)",
    "separate client's p50 / p95 (ms)",
    "server CPU per modern call (ms)",
    "server CPU per legacy call (ms)",
    "legacy / modern CPU",
    "GET streams still open after the run",
    "burst: reset or no response",
    "overload: served / refused 503 + Retry-After / dropped",
)
#: Rows without a number when nothing was refused (a fast machine serves the quick overload).
LEGACY_LOAD_MAYBE_EMPTY = ("overload: 503 answer p50 / p95 (ms)",)


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.live
def test_quick_legacy_load_prints_every_metric_next_to_its_target(
    request: pytest.FixtureRequest, postgres_url: str
) -> None:
    args = ["--quick", "--database-url", postgres_url]
    if shutil.which("redis-server") is None:
        args += ["--redis-url", request.getfixturevalue("redis_url")]
    done = run_script(LEGACY_LOAD, *args)
    assert done.returncode == 0, f"legacy_load.py:\n{done.stdout}\n{done.stderr}"

    rows = {metric: (measured, target) for metric, measured, target, _ in table(done.stdout)}
    for metric in LEGACY_LOAD_METRICS:
        assert metric in rows, done.stdout
        assert any(ch.isdigit() for ch in rows[metric][0]), done.stdout
    assert all(metric in rows for metric in LEGACY_LOAD_MAYBE_EMPTY), done.stdout
    assert rows["legacy latency p95 (ms)"][1] == "≤ 50"
    assert rows["legacy / modern CPU"][1] == "≤ 1.5"
    assert rows["burst: reset or no response"][1] == "0"
    assert "reproduce: python tests/benchmarks/legacy_load.py --quick" in done.stdout


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.live
def test_quick_fairness_prints_every_metric_and_both_targets(
    request: pytest.FixtureRequest, postgres_url: str
) -> None:
    args = ["fairness", "--quick", "--database-url", postgres_url]
    if shutil.which("redis-server") is None:
        args += ["--redis-url", request.getfixturevalue("redis_url")]
    output = run_compare(*args)

    rows = table(output)
    assert len(rows) == len(FAIRNESS_ROWS), output
    for label, peer, ours, ratio in rows:
        assert (peer, ratio) == (MISSING, MISSING), output  # --quick: mcp_tasks only
        # None of A's tasks ending while B ran (a slot was free) leaves that one row empty.
        assert is_number(ours) or "to end after B started" in label, output
    labels = [label for label, *_ in rows]
    assert any("alone: p50" in label for label in labels), output
    assert any("under A's flood: p50" in label for label in labels), output
    assert any("200 x bench_sleep(0.5)" in label for label in labels), output
    assert "2 x manage.py rqworker mcp_tasks" in output
    assert re.search(r"TASK_CONCURRENCY \d+ per worker: \d+ task slots; FAIR_SHARE", output)
    targets = [line for line in output.splitlines() if line.startswith("target, mcp_tasks: ")]
    assert len(targets) == 2, output
    assert all(line.endswith((": PASS", ": FAIL")) for line in targets), output
    assert "fastmcp-tasks (no fair share" not in output  # the peer was not run
    assert "reproduce: python tests/benchmarks/compare.py fairness --quick" in output

"""A real third-party client of the tasks extension: FastMCP 4.1.4 with ``fastmcp-tasks``
4.1.4 (``fastmcp_tasks.call_tool_task`` handles and the transparent ``Client.call_tool``),
against a live server with a real rq worker on a real Redis.

FastMCP 4 pins its own dependencies, so it lives in a virtualenv of its own at the
repository root (``.venv-fastmcp4/``, gitignored), built once by :func:`fastmcp4_python`
(``build_client_venv``) and reused while its marker names the same requirements. Each test runs a small script there;
the script prints one JSON document as its last line.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_tools.task_tools import SECRET_DETAIL
from tests.support.legacy_client_fixtures import VenvBuildError, build_client_venv

pytestmark = [pytest.mark.live, pytest.mark.redis]

SCRIPT_TIMEOUT = 120


@pytest.fixture(scope="session")
def fastmcp4_python() -> Path:
    """The python of ``.venv-fastmcp4`` (built when missing or stale; fails, never skips,
    when it cannot be built)."""
    try:
        return build_client_venv("fastmcp4")
    except VenvBuildError as exc:
        pytest.fail(str(exc), pytrace=False)


PRELUDE = textwrap.dedent(
    """
    import asyncio, json, os, sys, time
    from pathlib import Path

    from fastmcp import Client as _Client
    from fastmcp.exceptions import ToolError
    from fastmcp_tasks import call_tool_task

    URL = sys.argv[1]
    ARG = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}

    def Client(url, **kwargs):  # signed in when the tests run with anonymous access off
        kwargs.setdefault("auth", os.environ.get("MCP_TASKS_TEST_TOKEN"))
        return _Client(url, **kwargs)

    def text_of(result):
        return "".join(getattr(block, "text", "") for block in result.content)

    async def wait_path(path, timeout=60):
        deadline = time.monotonic() + timeout
        while not Path(path).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(path)
            await asyncio.sleep(0.05)

    def done(value):
        print(json.dumps(value))
    """
)


@pytest.fixture
def run_client(fastmcp4_python: Path, tmp_path: Path) -> Iterator[Any]:
    """``run_client(server, body, arg=None)`` runs ``async def main()`` (``body``) with
    FastMCP 4 and returns the JSON it printed."""

    def run(server: Any, body: str, arg: Any = None) -> Any:
        script = tmp_path / f"client_{abs(hash(body))}.py"
        script.write_text(PRELUDE + textwrap.dedent(body) + "\nasyncio.run(main())\n")
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV")
        }
        result = subprocess.run(
            [str(fastmcp4_python), str(script), server.mcp_url, json.dumps(arg or {})],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
            env=env,
            check=False,
        )
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        assert result.returncode == 0 and lines, (
            f"the FastMCP 4 client failed ({result.returncode}):\n{result.stdout}\n{result.stderr[-6000:]}"
        )
        return json.loads(lines[-1])

    yield run


# -- transparent Client.call_tool ---------------------------------------------------------------


def test_transparent_call_tool_of_a_task_tool_returns_the_tool_result(
    stack: Any, run_client: Any
) -> None:
    out = run_client(
        stack,
        """
        async def main():
            async with Client(URL) as client:
                result = await client.call_tool("slow_compute", {"seconds": 0.3, "label": "fm4"})
                done({"text": text_of(result), "is_error": result.is_error})
        """,
    )
    assert out == {"text": "slow_compute fm4 finished after 0.3s", "is_error": False}


def test_transparent_call_tool_reads_structured_output(stack: Any, run_client: Any) -> None:
    out = run_client(
        stack,
        """
        async def main():
            async with Client(URL) as client:
                result = await client.call_tool("trivial_task", {"n": 41})
                done({"text": text_of(result), "structured": result.structured_content})
        """,
    )
    assert out == {"text": "41", "structured": {"result": 41}}


def test_transparent_call_tool_raises_the_masked_tool_error(stack: Any, run_client: Any) -> None:
    out = run_client(
        stack,
        """
        async def main():
            async with Client(URL) as client:
                try:
                    await client.call_tool("raising_task", {})
                except ToolError as exc:
                    done({"raised": True, "message": str(exc)})
                else:
                    done({"raised": False})
        """,
    )
    assert out["raised"] is True
    assert SECRET_DETAIL not in out["message"]
    assert "raising_task" in out["message"]


def test_transparent_call_tool_of_a_failed_task_raises_its_error_message(
    stack: Any, run_client: Any
) -> None:
    out = run_client(
        stack,
        """
        async def main():
            async with Client(URL) as client:
                try:
                    await client.call_tool("protocol_error_job", {})
                except ToolError as exc:
                    done({"raised": True, "message": str(exc)})
                else:
                    done({"raised": False})
        """,
    )
    assert out == {"raised": True, "message": "protocol_error_job: simulated internal failure"}


def test_transparent_call_tool_answers_a_question_through_the_elicitation_handler(
    stack: Any, run_client: Any
) -> None:
    out = run_client(
        stack,
        """
        async def main():
            asked = []

            async def on_elicit(message, response_type, params, context):
                asked.append(message)
                return {"confirm": True}

            async with Client(URL, elicitation_handler=on_elicit) as client:
                result = await client.call_tool("confirm_delete", {"filename": "fm4.txt"})
                done({"text": text_of(result), "asked": asked})
        """,
    )
    assert out == {"text": "Deleted fm4.txt.", "asked": ["Delete fm4.txt?"]}


# -- call_tool_task handles -----------------------------------------------------------------------


def test_call_tool_task_handle_status_wait_and_result(
    stack: Any, run_client: Any, tmp_path: Path
) -> None:
    out = run_client(
        stack,
        """
        async def main():
            marker = ARG["marker_dir"]
            async with Client(URL) as client:
                task = await call_tool_task(client, "gated_task", {"marker_dir": marker, "message": "fm4 progress"})
                created = task.create_result
                await wait_path(marker + "/started")
                deadline = time.monotonic() + 60
                status = await task.status()
                while status.status_message != "fm4 progress" and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                    status = await task.status()
                Path(marker, "gate").touch()
                final = await task.wait(timeout=60)
                result = await task.result()
                done({
                    "task_id": task.task_id,
                    "created_status": created.status,
                    "running": [status.status, status.status_message],
                    "final": final.status,
                    "text": text_of(result),
                })
        """,
        {"marker_dir": str(tmp_path)},
    )
    assert out["created_status"] == "working"
    assert out["running"] == ["working", "fm4 progress"]
    assert out["final"] == "completed"
    assert out["text"] == "gate opened after fm4 progress"
    assert len(out["task_id"]) >= 40


def test_call_tool_task_handle_is_awaitable(stack: Any, run_client: Any) -> None:
    out = run_client(
        stack,
        """
        async def main():
            async with Client(URL) as client:
                task = await call_tool_task(client, "trivial_task", {"n": 3})
                result = await task
                done({"structured": result.structured_content})
        """,
    )
    assert out == {"structured": {"result": 3}}


@pytest.mark.cancel
def test_call_tool_task_handle_cancel_cancels_the_running_tool(
    stack: Any, run_client: Any, tmp_path: Path
) -> None:
    out = run_client(
        stack,
        """
        async def main():
            marker = ARG["marker_dir"]
            async with Client(URL) as client:
                task = await call_tool_task(client, "async_wait_task", {"marker_dir": marker})
                await wait_path(marker + "/started")
                await task.cancel()
                final = await task.wait(timeout=60)
                try:
                    await task.result()
                except ToolError as exc:
                    message = str(exc)
                else:
                    message = None
                done({"final": final.status, "result_error": message})
        """,
        {"marker_dir": str(tmp_path)},
    )
    assert out["final"] == "cancelled"
    assert out["result_error"] and "cancelled" in out["result_error"]
    assert (tmp_path / "cancelled").exists() or not (tmp_path / "finished").exists()


def test_call_tool_task_handle_waits_for_input_required(stack: Any, run_client: Any) -> None:
    out = run_client(
        stack,
        """
        async def main():
            async def on_elicit(message, response_type, params, context):
                return {"confirm": False}

            async with Client(URL, elicitation_handler=on_elicit) as client:
                task = await call_tool_task(client, "confirm_delete", {"filename": "keep.txt"})
                parked = await task.wait(state="input_required", timeout=60)
                requests = parked.input_requests or {}
                result = await task.result()
                done({
                    "parked": parked.status,
                    "methods": sorted(r.get("method") if isinstance(r, dict) else getattr(r, "method", None) for r in requests.values()),
                    "text": text_of(result),
                })
        """,
    )
    assert out["parked"] == "input_required"
    assert out["methods"] == ["elicitation/create"]
    assert out["text"] == "Kept keep.txt (accept)."


def test_call_tool_task_of_a_plain_call_without_a_task_is_refused_by_the_client(
    stack: Any, run_client: Any
) -> None:
    out = run_client(
        stack,
        """
        async def main():
            async with Client(URL) as client:
                try:
                    await call_tool_task(client, "greet", {"name": "x"})
                except ToolError as exc:
                    done({"raised": True, "message": str(exc)})
                else:
                    done({"raised": False})
        """,
    )
    assert out["raised"] is True and "did not run as a task" in out["message"]

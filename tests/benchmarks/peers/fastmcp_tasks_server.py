"""The peer of ``tests/benchmarks/compare.py``: FastMCP 4 with fastmcp-tasks (Docket on Redis).

Runs in its own virtualenv (``.venv-bench-peer``: ``fastmcp==4.1.4 fastmcp-tasks==4.1.4
uvicorn``). Two roles, configured through fastmcp-tasks' own ``FASTMCP_DOCKET_*`` environment
variables (``FASTMCP_DOCKET_URL``, ``FASTMCP_DOCKET_NAME``; concurrency stays at its default):

- HTTP: ``python fastmcp_tasks_server.py --fd FD`` serves ``/mcp`` on uvicorn. It creates
  tasks and answers ``tasks/*`` but runs none: fastmcp-tasks' lifespan starts a Docket worker
  in every process that serves, so here that worker's loop is replaced by an idle wait (its
  Redis connection and registrations stay as they are);
- worker: ``python -m fastmcp_tasks.worker_cli worker fastmcp_tasks_server.py`` (the package's
  own out-of-process worker command) loads this file and runs the tasks.

The tools mirror the ones compare.py calls on mcp_tasks: ``add`` (plain), ``trivial_task``
(a task that returns at once), ``bench_sleep`` (a task that sleeps, the flood of the
``fairness`` mode), ``bench_ask`` (a task that asks one form question; FastMCP's
guard pattern, since ``ctx.elicit`` is not supported inside its tasks) and ``bench_pid``
(the pid of the process that ran the task: the harness checks it is a worker).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("bench-fastmcp-tasks")
mcp.add_extension(TasksExtension())

QUESTION = "What is your name?"
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "string"}},
    "required": ["value"],
}


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool(task=True)
async def trivial_task(n: int = 0) -> int:
    """Returns ``n`` at once."""
    return n


@mcp.tool(task=True)
async def bench_sleep(seconds: float = 0.5) -> float:
    """Sleeps ``seconds``; returns when it woke (``time.time()``): the flood of
    ``compare.py fairness``, which counts the flood's tasks done by a given moment."""
    await asyncio.sleep(seconds)
    return time.time()


@mcp.tool(task=True)
async def bench_ask(ctx: Context) -> str:
    """Asks one form question (a string ``value``) and returns the answer."""
    answer = (ctx.input_responses or {}).get("name")
    if isinstance(answer, mcp_types.ElicitResult) and answer.action == "accept":
        return str((answer.content or {}).get("value"))
    if answer is not None:
        return f"no answer ({getattr(answer, 'action', answer)!r})"
    request = mcp_types.ElicitRequest(
        params=mcp_types.ElicitRequestFormParams(message=QUESTION, requested_schema=ANSWER_SCHEMA)
    )
    return mcp_types.InputRequiredResult(input_requests={"name": request})  # type: ignore[return-value]


@mcp.tool(task=True)
async def bench_pid() -> int:
    """The pid of the process that runs the task."""
    return os.getpid()


def _serve_without_worker() -> None:
    """Keep this (HTTP) process from taking tasks: the Docket worker fastmcp-tasks starts
    in its lifespan idles instead of reading the queue."""
    from docket import Worker

    async def idle(self: Worker) -> None:
        await asyncio.Event().wait()

    Worker.run_forever = idle  # type: ignore[method-assign]


def main() -> None:
    from _serve import serve

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fd", type=int, required=True, help="a listening socket to serve on")
    args = parser.parse_args()
    _serve_without_worker()
    serve(mcp.http_app(), args.fd)


if __name__ == "__main__":
    main()

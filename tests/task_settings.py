"""Settings of the live servers and rq workers the background-task tests start.

``tests.live_settings`` (the example project plus the test tools and token verifier) with a
few ``TASKS_*`` environment variables that shrink the engine's timings per process, so the
worker-death and lost-job tests run in seconds instead of minutes:

- ``TASKS_HEARTBEAT_INTERVAL``, ``TASKS_LOST_AFTER``, ``TASKS_REQUEUE_AFTER``,
  ``TASKS_MAINTENANCE_INTERVAL``,
  ``TASKS_INPUT_HOLD_WINDOW``, ``TASKS_TTL``, ``TASKS_POLL_INTERVAL``,
  ``TASKS_SESSION_CACHE_TTL`` (seconds) →
  ``MCP_TASKS["TASK_HEARTBEAT_INTERVAL"]`` …;
- ``TASKS_MAX_ACCEPT_WAIT`` (seconds, or ``none``) → ``MCP_TASKS["MAX_ACCEPT_WAIT"]``;
- ``TASKS_LIFESPAN`` → ``MCP_TASKS["LIFESPAN"]``;
- ``TASKS_MAX_REQUESTS_IN_PROGRESS`` (an integer) → ``MCP_TASKS["MAX_REQUESTS_IN_PROGRESS"]``;
- ``TASKS_SECRET_KEY_FALLBACKS`` (comma-separated) → ``SECRET_KEY_FALLBACKS``
  (``DJANGO_SECRET_KEY`` already sets ``SECRET_KEY``).

The token verifier also accepts ``short-<seconds>-<name>`` tokens that expire that many
seconds after they are verified (see ``tests.live_tools.task_tools.verify``).
"""

import os

from tests.live_settings import *  # noqa: F403
from tests.live_settings import MCP_TASKS

_SECONDS = {
    "TASKS_HEARTBEAT_INTERVAL": "TASK_HEARTBEAT_INTERVAL",
    "TASKS_LOST_AFTER": "TASK_LOST_AFTER",
    "TASKS_REQUEUE_AFTER": "TASK_REQUEUE_AFTER",
    "TASKS_INPUT_HOLD_WINDOW": "INPUT_HOLD_WINDOW",
    "TASKS_TTL": "TASK_TTL",
    "TASKS_POLL_INTERVAL": "TASK_POLL_INTERVAL",
    "TASKS_MAINTENANCE_INTERVAL": "TASK_MAINTENANCE_INTERVAL",
    "TASKS_SESSION_CACHE_TTL": "SESSION_CACHE_TTL",
}

MCP_TASKS = {
    **MCP_TASKS,
    "TOKEN_VERIFIER": "tests.live_tools.task_tools.verify",
    **{key: float(os.environ[name]) for name, key in _SECONDS.items() if os.environ.get(name)},
}
if os.environ.get("TASKS_MAX_REQUESTS_IN_PROGRESS"):
    MCP_TASKS["MAX_REQUESTS_IN_PROGRESS"] = int(os.environ["TASKS_MAX_REQUESTS_IN_PROGRESS"])
if os.environ.get("TASKS_MAX_ACCEPT_WAIT"):
    _wait = os.environ["TASKS_MAX_ACCEPT_WAIT"]
    MCP_TASKS["MAX_ACCEPT_WAIT"] = None if _wait == "none" else float(_wait)
if os.environ.get("TASKS_LIFESPAN"):
    MCP_TASKS["LIFESPAN"] = os.environ["TASKS_LIFESPAN"]

SECRET_KEY_FALLBACKS = [
    key for key in os.environ.get("TASKS_SECRET_KEY_FALLBACKS", "").split(",") if key
]

"""Settings of the live servers the client and guard tests start.

The example project's settings plus the test-only tools app (``tests.live_tools``) and a
test token verifier. A few ``LIVE_*`` environment variables adjust ``MCP_TASKS`` per
server (pass them with ``asgi_server(env={...})``):

- ``LIVE_ALLOW_ANONYMOUS=0`` → ``ALLOW_ANONYMOUS: False``;
- ``LIVE_MAX_BODY_BYTES`` → ``MAX_BODY_BYTES``;
- ``LIVE_REQUEST_STATE_TTL`` → ``REQUEST_STATE_TTL``;
- ``LIVE_ALLOWED_ORIGINS`` (comma-separated) → ``ALLOWED_ORIGINS``;
- ``LIVE_SSE_KEEPALIVE`` → ``SSE_KEEPALIVE`` (seconds);
- ``LIVE_TOKEN_VERIFIER`` → ``TOKEN_VERIFIER`` (default: the test verifier; the OAuth
  end-to-end test uses the project's ``mcp_tasks.verifiers.dot.verify``).
- ``LIVE_ADMIN_LIVE_PATH`` → ``ADMIN_LIVE_PATH`` (``none``: no live admin WebSocket);
- ``LIVE_ADMIN_REFRESH_INTERVAL`` → ``ADMIN_REFRESH_INTERVAL`` (seconds).
"""

import os

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS, MCP_TASKS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.live_tools"]

MCP_TASKS = {
    **MCP_TASKS,
    "TOKEN_VERIFIER": os.environ.get("LIVE_TOKEN_VERIFIER") or "tests.live_tools.auth.verify",
    "ALLOW_ANONYMOUS": os.environ.get("LIVE_ALLOW_ANONYMOUS", "1") != "0",
    "MAX_BODY_BYTES": int(os.environ.get("LIVE_MAX_BODY_BYTES", 4 * 1024 * 1024)),
    "REQUEST_STATE_TTL": int(os.environ.get("LIVE_REQUEST_STATE_TTL", 900)),
    "SSE_KEEPALIVE": float(os.environ.get("LIVE_SSE_KEEPALIVE", 15.0)),
    "ADMIN_LIVE_PATH": (
        None
        if os.environ.get("LIVE_ADMIN_LIVE_PATH") == "none"
        else os.environ.get("LIVE_ADMIN_LIVE_PATH") or MCP_TASKS["ADMIN_LIVE_PATH"]
    ),
    "ADMIN_REFRESH_INTERVAL": float(os.environ.get("LIVE_ADMIN_REFRESH_INTERVAL", 5)),
    "ALLOWED_ORIGINS": [
        item.strip()
        for item in os.environ.get("LIVE_ALLOWED_ORIGINS", "").split(",")
        if item.strip()
    ],
}

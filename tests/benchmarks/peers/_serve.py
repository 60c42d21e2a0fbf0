"""Serve an ASGI app with uvicorn on an inherited listening socket (``--fd``)."""

from __future__ import annotations

import socket
from typing import Any

import uvicorn


def serve(app: Any, fd: int) -> None:
    """Until SIGTERM, with uvicorn's defaults (an access log line per request, as daphne
    writes for mcp_tasks). ``socket.socket(fileno=...)`` keeps the socket's real family:
    uvicorn's own ``fd=`` takes it for AF_UNIX, so asyncio would leave Nagle on (40 ms
    stalls)."""
    sock = socket.socket(fileno=fd)
    uvicorn.Server(uvicorn.Config(app)).run(sockets=[sock])

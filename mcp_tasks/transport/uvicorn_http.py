"""Deprecated: now :mod:`mcp_tasks.contrib.uvicorn_http` (``uvicorn --http
mcp_tasks.contrib.uvicorn_http:HttpToolsProtocol``); this path goes away in 0.3."""

from __future__ import annotations

import warnings

from ..contrib.uvicorn_http import *  # noqa: F403  (H11Protocol, and HttpToolsProtocol)

warnings.warn(
    "mcp_tasks.transport.uvicorn_http moved to mcp_tasks.contrib.uvicorn_http; the old path "
    "goes away in mcp_tasks 0.3.",
    DeprecationWarning,
    stacklevel=2,
)

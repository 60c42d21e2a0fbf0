"""Serve MCP tools from Django over Channels, with durable background tasks.

Public API::

    from mcp_tasks import mcp, Context, TaskConfig, Retry, RetryTask, ToolError
"""

from __future__ import annotations

from .auth import AccessToken
from .context import Context
from .elicitation import AcceptedElicitation, CancelledElicitation, DeclinedElicitation
from .exceptions import ClientCapabilityError, ProtocolError, ToolError
from .inputs import ElicitInput, RootsInput, SampleInput
from .retries import Retry, RetryTask
from .server import MCPServer, TaskConfig, mcp

__version__ = "0.1.0"

__all__ = [
    "AcceptedElicitation",
    "AccessToken",
    "CancelledElicitation",
    "ClientCapabilityError",
    "Context",
    "DeclinedElicitation",
    "ElicitInput",
    "MCPServer",
    "ProtocolError",
    "Retry",
    "RetryTask",
    "RootsInput",
    "SampleInput",
    "TaskConfig",
    "ToolError",
    "mcp",
]

"""Serve MCP tools from Django over Channels, with durable background tasks.

Public API (among others): ``mcp``, ``Context``, ``TaskConfig``, ``Retry``, ``RetryTask``,
``ToolError``, ``Approval``."""

from __future__ import annotations

from .auth import AccessToken
from .authoring.approval import Approval
from .authoring.context import Context
from .authoring.elicitation import AcceptedElicitation, CancelledElicitation, DeclinedElicitation
from .authoring.inputs import ElicitInput, RootsInput, SampleInput
from .authoring.registry import MCPServer, TaskConfig, mcp
from .authoring.retries import Retry, RetryTask
from .exceptions import ClientCapabilityError, ProtocolError, ToolError

__version__ = "0.1.0"

__all__ = [
    "AcceptedElicitation",
    "AccessToken",
    "Approval",
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

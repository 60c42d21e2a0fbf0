"""Exceptions that tool authors raise or catch."""

from __future__ import annotations

from typing import Any

from .core.jsonrpc import error_object


class ToolError(Exception):
    """An error meant for the client: its message is shown as the tool's ``isError`` result.

    Any other exception raised by a tool is logged with its traceback and reported to the
    client as a generic failure, so internal details never leak."""


class ProtocolError(Exception):
    """A JSON-RPC error to answer instead of a result (``{"error": {code, message, data}}``)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return error_object(self.code, self.message, self.data)


class ClientCapabilityError(RuntimeError):
    """The tool asked the client for something (elicitation, sampling, roots) it did not declare."""


class InputRequired(BaseException):
    """Raised in a tool to end this round of a modern (MRTR) call with ``input_required``; a
    ``BaseException`` so ``except Exception`` misses it. Tool code never raises or catches it."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(", ".join(requests))
        self.requests = requests

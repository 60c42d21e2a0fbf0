"""JSON-RPC 2.0: the envelopes and error codes every layer writes (a leaf module)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

Message = dict[str, Any]


def wire_dict(model: BaseModel) -> dict[str, Any]:
    """A pydantic model (the ``mcp`` SDK's types) as JSON-ready data under its wire names."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


# JSON-RPC 2.0's own codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Server-defined codes (-32000 … -32099).
#: The process is full (HTTP 503, ``Retry-After``).
SERVER_BUSY = -32000
#: A legacy-era ``resources/read`` of an unknown URI (the modern era answers ``INVALID_PARAMS``).
RESOURCE_NOT_FOUND = -32002
#: A modern request's ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*`` header disagrees with its body.
HEADER_MISMATCH = -32020
#: The request needs a client capability (or extension) the client did not declare.
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
#: A task call past ``MAX_ACTIVE_TASKS`` (or ``MAX_ACTIVE_TASKS_PER_CLIENT``): nothing was
#: started (HTTP 429 with ``Retry-After`` on the modern era).
TASK_QUOTA_EXCEEDED = -32029


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """The ``error`` member of a response (also what a failed task records)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def result_response(request_id: Any, result: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, error: dict[str, Any]) -> Message:
    """A response carrying ``error`` (an :func:`error_object`); ``request_id`` None when the
    request's id could not be read."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def notification(method: str, params: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request(request_id: str | int, method: str, params: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

"""Protocol versions, ``_meta`` keys, JSON-RPC error codes and their HTTP statuses."""

from __future__ import annotations

MODERN_VERSION = "2026-07-28"
MODERN_VERSIONS = (MODERN_VERSION,)
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: The legacy revision with the experimental tasks of SEP-1686.
LEGACY_TASKS_VERSION = "2025-11-25"
#: A legacy request without ``MCP-Protocol-Version`` is assumed to be this version.
LEGACY_DEFAULT_VERSION = "2025-03-26"

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
META_RELATED_TASK = "io.modelcontextprotocol/related-task"

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
#: Implementation-defined server error: the process is full (HTTP 503, ``Retry-After``).
SERVER_BUSY = -32000

#: HTTP status for a JSON-RPC error answered on its own (not inside an SSE stream).
ERROR_HTTP_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def http_status_for(code: int) -> int:
    """The HTTP status of a plain JSON error response with this JSON-RPC code."""
    return ERROR_HTTP_STATUS.get(code, 200)


def is_modern(version: str | None) -> bool:
    """The routing rule of the SDK: no header or a legacy version → legacy."""
    return version is not None and version not in LEGACY_VERSIONS

"""Protocol versions, ``_meta`` keys, and the HTTP status of each JSON-RPC error code."""

from __future__ import annotations

from typing import Any

from ..core.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    TASK_QUOTA_EXCEEDED,
    UNSUPPORTED_PROTOCOL_VERSION,
)

MODERN_VERSION = "2026-07-28"
MODERN_VERSIONS = (MODERN_VERSION,)
LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: The legacy revision with the experimental tasks of SEP-1686.
LEGACY_TASKS_VERSION = "2025-11-25"

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
META_RELATED_TASK = "io.modelcontextprotocol/related-task"

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

#: HTTP status for a JSON-RPC error answered on its own (not inside an SSE stream).
ERROR_HTTP_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
    TASK_QUOTA_EXCEEDED: 429,
}


def http_status_for(code: int) -> int:
    """The HTTP status of a plain JSON error response with this JSON-RPC code."""
    return ERROR_HTTP_STATUS.get(code, 200)


def http_headers_for(error: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    """Extra headers of a plain JSON error: ``Retry-After`` when its data has ``retryAfter`` (s)."""
    data = error.get("data")
    retry_after = data.get("retryAfter") if isinstance(data, dict) else None
    if isinstance(retry_after, int) and not isinstance(retry_after, bool):
        return [(b"retry-after", str(retry_after).encode())]
    return []


def is_modern(version: str | None) -> bool:
    """The routing rule of the SDK: no header or a legacy version → legacy."""
    return version is not None and version not in LEGACY_VERSIONS

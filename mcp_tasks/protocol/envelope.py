"""Per-request checks of the modern era: the ``_meta`` envelope and the standard headers
(a plain ``{lower-case name: value}`` mapping)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..authoring.context import LOG_LEVELS
from ..core import is_id
from ..core.jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION
from ..exceptions import ProtocolError
from .constants import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
)

_SAFE_HEADER_VALUE = re.compile(r"^[\x20-\x7e\t]*$")
_BASE64_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$", re.S)

#: Methods whose ``Mcp-Name`` header carries this body field.
NAME_FIELDS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


@dataclass(frozen=True)
class ModernEnvelope:
    """What a modern request declares about its client in ``params._meta``."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any]
    log_level: str | None
    progress_token: str | int | None


def decode_header_value(value: str) -> str:
    """Undo the ``=?base64?…?=`` sentinel encoding; reject unsafe plain values."""
    found = _BASE64_SENTINEL.match(value)
    if found:
        try:
            return base64.b64decode(found.group(1), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise ProtocolError(
                HEADER_MISMATCH, "Header mismatch: invalid base64 header value"
            ) from exc
    if not _SAFE_HEADER_VALUE.match(value):
        raise ProtocolError(HEADER_MISMATCH, "Header mismatch: header value has invalid characters")
    return value


def _header_once(headers: Mapping[str, str | list[str]], name: str) -> str | None:
    value = headers.get(name)
    if isinstance(value, list):
        if len(value) != 1:
            raise ProtocolError(HEADER_MISMATCH, f"Header mismatch: {name} header is duplicated")
        return value[0]
    return value


def check_modern_envelope(
    method: str, params: Mapping[str, Any], headers: Mapping[str, str | list[str]]
) -> ModernEnvelope:
    """Validate ``params._meta`` and the standard headers of a modern request."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise ProtocolError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying the required {META_PROTOCOL_VERSION!r} "
            f"and {META_CLIENT_CAPABILITIES!r} envelope keys",
        )
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise ProtocolError(
            INVALID_PARAMS,
            f"params._meta is missing the required envelope key(s): {', '.join(missing)}",
        )
    version = meta[META_PROTOCOL_VERSION]
    capabilities = meta[META_CLIENT_CAPABILITIES]
    client_info = meta.get(META_CLIENT_INFO) or {}
    log_level = meta.get(META_LOG_LEVEL)
    if not isinstance(version, str):
        raise ProtocolError(INVALID_PARAMS, f"{META_PROTOCOL_VERSION} must be a string")
    if not isinstance(capabilities, dict):
        raise ProtocolError(INVALID_PARAMS, f"{META_CLIENT_CAPABILITIES} must be an object")
    if not isinstance(client_info, dict):
        raise ProtocolError(INVALID_PARAMS, f"{META_CLIENT_INFO} must be an object")
    if log_level is not None and log_level not in LOG_LEVELS:
        raise ProtocolError(
            INVALID_PARAMS, f"{META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}"
        )

    header_version = _header_once(headers, "mcp-protocol-version")
    if header_version is None:
        raise ProtocolError(
            HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version header is missing"
        )
    if header_version != version:
        raise ProtocolError(
            HEADER_MISMATCH,
            "Header mismatch: MCP-Protocol-Version header does not match the request "
            "envelope's protocol version",
        )
    if version not in MODERN_VERSIONS:
        raise ProtocolError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS), "requested": version},
        )
    check_standard_headers(method, params, headers)
    token = meta.get("progressToken")
    return ModernEnvelope(
        protocol_version=version,
        client_capabilities=capabilities,
        client_info=client_info,
        log_level=log_level,
        progress_token=token if is_id(token) else None,
    )


def check_standard_headers(
    method: str, params: Mapping[str, Any], headers: Mapping[str, str | list[str]]
) -> None:
    """``Mcp-Method`` must equal the method and ``Mcp-Name`` the named body field."""
    header_method = _header_once(headers, "mcp-method")
    if header_method is None:
        raise ProtocolError(HEADER_MISMATCH, "Header mismatch: Mcp-Method header is missing")
    if header_method != method:
        raise ProtocolError(
            HEADER_MISMATCH,
            f"Header mismatch: Mcp-Method header value {header_method!r} does not match "
            f"body value {method!r}",
        )
    field = NAME_FIELDS.get(method)
    if field is None:
        return
    header_name = _header_once(headers, "mcp-name")
    if header_name is None:
        if method.startswith("tasks/"):
            # The tasks extension says clients MUST send it, but a widely used client
            # (fastmcp-tasks 4.1) does not: accept its absence, never a mismatch.
            return
        raise ProtocolError(HEADER_MISMATCH, "Header mismatch: Mcp-Name header is missing")
    body_value = params.get(field)
    if decode_header_value(header_name) != body_value:
        raise ProtocolError(
            HEADER_MISMATCH,
            f"Header mismatch: Mcp-Name header value {header_name!r} does not match "
            f"body value {body_value!r}",
        )


def _header_param_paths(
    schema: Mapping[str, Any], prefix: tuple[str, ...] = ()
) -> list[tuple[str, tuple[str, ...]]]:
    found: list[tuple[str, tuple[str, ...]]] = []
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        if "x-mcp-header" in prop:
            found.append((str(prop["x-mcp-header"]), (*prefix, name)))
        found.extend(_header_param_paths(prop, (*prefix, name)))
    return found


def _same_number(decoded: str, value: int | float) -> bool:
    """Whether a header names the number ``value``; an integer is compared exactly (one past
    a double's range or precision too), as Python compares a float with an int."""
    if isinstance(value, int):
        try:
            return int(decoded) == value
        except ValueError:
            pass  # "3.0", "3e0": a float
    try:
        return float(decoded) == value
    except ValueError:
        return False


def check_param_headers(
    input_schema: Mapping[str, Any],
    arguments: Mapping[str, Any],
    headers: Mapping[str, str | list[str]],
) -> None:
    """``Mcp-Param-{Name}`` headers must match the ``x-mcp-header`` arguments."""
    for header, path in _header_param_paths(input_schema):
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        raw = _header_once(headers, f"mcp-param-{header.lower()}")
        if value is None:
            continue
        if raw is None:
            raise ProtocolError(
                HEADER_MISMATCH, f"Header mismatch: Mcp-Param-{header} header is missing"
            )
        decoded = decode_header_value(raw)
        if isinstance(value, bool):
            matches = decoded == ("true" if value else "false")
        elif isinstance(value, int | float):
            matches = _same_number(decoded, value)
        else:
            matches = decoded == str(value)
        if not matches:
            raise ProtocolError(
                HEADER_MISMATCH,
                f"Header mismatch: Mcp-Param-{header} header does not match the argument value",
            )

"""The protocol layer's entry point: a decoded JSON-RPC message in, a response out.

The transport decides the era (``MCP-Protocol-Version`` header), resolves the caller and,
for the legacy era, the session; everything else about a message happens here.
"""

from __future__ import annotations

import codecs
import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any, NoReturn

from .. import jsontext
from ..auth import Principal
from ..conf import get_config
from ..exceptions import ProtocolError
from ..server import MCPServer
from .constants import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    META_SERVER_INFO,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from .envelope import check_modern_envelope
from .handlers import CACHEABLE, LEGACY_METHODS, MODERN_METHODS, server_info
from .request import RequestInfo, Sink

logger = logging.getLogger("mcp_tasks.protocol")

Message = dict[str, Any]


class _NotJsonError(ValueError):
    """A literal that JSON (RFC 8259) does not have, or a number out of a double's range."""


def _not_json(literal: str) -> NoReturn:
    raise _NotJsonError(f"{literal} is not a JSON value")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotJsonError(f"the number {text[:40]} is out of range")
    return number


def _decode(body: bytes) -> Any:
    """JSON text in UTF-8 (RFC 8259 §8.1), finite numbers only; raises ``-32700``."""
    try:
        text = body.removeprefix(codecs.BOM_UTF8).decode("utf-8")
        return json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except UnicodeDecodeError as exc:
        reason = f"the body is not valid UTF-8 (byte {exc.start})"
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg} (character {exc.pos})"
    except _NotJsonError as exc:
        reason = str(exc)
    except ValueError:  # an integer longer than Python converts (sys.int_info)
        reason = "a number is out of range"
    except RecursionError:
        reason = "nested too deeply"
    raise ProtocolError(PARSE_ERROR, f"Parse error: {reason}")


#: A ``\uD800``…``\uDFFF`` escape: the only way a surrogate gets into JSON that is valid UTF-8.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _check_text(message: Any, body: bytes) -> None:
    """Refuse what no layer below can carry: strings with a lone UTF-16 surrogate (no UTF-8
    encoding, so never echoed, sent or stored) and very deep nesting (``-32600``). The body
    tells when the walk can be skipped: no surrogate escape in it, or fewer brackets than
    the depth limit."""
    where = (
        jsontext.find(message, jsontext.LONE_SURROGATE) if _SURROGATE_ESCAPE.search(body) else None
    )
    if where is not None:
        raise ProtocolError(
            INVALID_REQUEST,
            f"Invalid Request: {jsontext.describe('', where) or 'the message'} is not valid "
            "Unicode (a lone UTF-16 surrogate)",
        )
    brackets = body.count(b"[") + body.count(b"{")
    if brackets > jsontext.MAX_DEPTH and jsontext.deeper_than(message, jsontext.MAX_DEPTH):
        raise ProtocolError(
            INVALID_REQUEST,
            f"Invalid Request: objects and arrays nest deeper than {jsontext.MAX_DEPTH} levels",
        )


def parse_body(body: bytes) -> Message:
    """Decode one JSON-RPC message; batches, non-objects and text that cannot be carried
    further (:mod:`mcp_tasks.jsontext`) are rejected."""
    message = _decode(body)
    _check_text(message, body)
    if isinstance(message, list):
        raise ProtocolError(
            INVALID_REQUEST, "Body must be a single JSON-RPC request or notification object"
        )
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise ProtocolError(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 object")
    return message


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def kind_of(message: Message) -> str:
    """``request``, ``notification`` or ``response`` — or raise ``-32600``."""
    if "method" in message:
        if not isinstance(message["method"], str):
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: method must be a string")
        if "params" in message and not isinstance(message["params"], dict):
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: params must be an object")
        if "id" not in message:
            return "notification"
        if not _valid_id(message["id"]):
            raise ProtocolError(
                INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
            )
        return "request"
    if ("result" in message or "error" in message) and _valid_id(message.get("id")):
        return "response"
    raise ProtocolError(INVALID_REQUEST, "Invalid Request: not a request, notification or response")


def response(request_id: Any, result: dict[str, Any]) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, error: ProtocolError) -> Message:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()}


def modern_request_info(
    message: Message,
    headers: Mapping[str, str | list[str]],
    principal: Principal,
    lifespan_context: Any = None,
) -> RequestInfo:
    """Validate a modern request's envelope and headers and describe the request."""
    params = message.get("params") or {}
    envelope = check_modern_envelope(message["method"], params, headers)
    return RequestInfo(
        era="modern",
        protocol_version=envelope.protocol_version,
        principal=principal,
        request_id=message.get("id"),
        client_capabilities=envelope.client_capabilities,
        client_info=envelope.client_info,
        log_level=envelope.log_level,
        progress_token=envelope.progress_token,
        headers=headers,
        lifespan_context=lifespan_context,
    )


def _finish_modern(method: str, result: dict[str, Any]) -> dict[str, Any]:
    result.setdefault("resultType", "complete")
    if method in CACHEABLE and result["resultType"] == "complete":
        result.setdefault("ttlMs", get_config()["LIST_TTL_MS"])
        result.setdefault("cacheScope", "private")
    meta = result.setdefault("_meta", {})
    meta.setdefault(META_SERVER_INFO, server_info())
    return result


async def handle_request(
    server: MCPServer, message: Message, info: RequestInfo, sink: Sink
) -> Message:
    """Run one request and return its JSON-RPC response (result or error)."""
    method = message["method"]
    params = message.get("params") or {}
    table = MODERN_METHODS if info.modern else LEGACY_METHODS
    handler = table.get(method)
    try:
        if handler is None:
            raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)
        result = await handler(server, info, sink, params)
    except ProtocolError as exc:
        return error_response(message["id"], exc)
    except Exception:
        logger.exception("%s failed", method)
        return error_response(message["id"], ProtocolError(INTERNAL_ERROR, "Internal error"))
    if info.modern:
        result = _finish_modern(method, result)
    return response(message["id"], result)

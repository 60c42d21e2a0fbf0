"""The protocol layer's entry point: decode and check a message (:func:`parse_body`,
:func:`kind_of`), describe the request (``*_request_info``) and run it (:class:`Dispatcher`).
The transport decides the era and resolves the caller and session."""

from __future__ import annotations

import asyncio
import codecs
import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any, NoReturn

from .. import jsontext
from ..auth import Principal
from ..authoring.registry import MCPServer
from ..conf import get_config
from ..core import is_id
from ..core.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Message,
    error_object,
    error_response,
    notification,
    result_response,
)
from ..exceptions import ProtocolError
from .constants import LEGACY_VERSIONS, META_SERVER_INFO
from .envelope import check_modern_envelope
from .handlers import scope_challenge, server_info
from .methods import CACHEABLE, method_tables
from .ports import TaskEngine
from .request import RequestInfo, SessionHandle, Sink
from .subscriptions import Subscription, subscribe

logger = logging.getLogger("mcp_tasks.protocol")


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
    """Refuse (``-32600``) lone UTF-16 surrogates (no UTF-8 encoding) and very deep nesting;
    the walks run only when the body could hold them."""
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


def kind_of(message: Message) -> str:
    """``request``, ``notification`` or ``response`` — or raise ``-32600``."""
    if "method" in message:
        if not isinstance(message["method"], str):
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: method must be a string")
        if "params" in message and not isinstance(message["params"], dict):
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: params must be an object")
        if "id" not in message:
            return "notification"
        if not is_id(message["id"]):
            raise ProtocolError(
                INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
            )
        return "request"
    if ("result" in message or "error" in message) and is_id(message.get("id")):
        return "response"
    raise ProtocolError(INVALID_REQUEST, "Invalid Request: not a request, notification or response")


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


def legacy_request_info(
    message: Message,
    headers: Mapping[str, str | list[str]],
    principal: Principal,
    session: SessionHandle | None,
    lifespan_context: Any = None,
) -> RequestInfo:
    """Describe a legacy request from its session (None: ``initialize``, which has none yet:
    the capabilities are the ones it declares)."""
    params = message.get("params") or {}
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if session is None:
        capabilities = params.get("capabilities")
        client_capabilities = capabilities if isinstance(capabilities, dict) else {}
    else:
        client_capabilities = session.client_capabilities
    return RequestInfo(
        era="legacy",
        protocol_version=session.protocol_version if session else LEGACY_VERSIONS[0],
        principal=principal,
        request_id=message.get("id"),
        client_capabilities=client_capabilities,
        client_info=session.client_info if session else {},
        log_level=session.log_level if session else None,
        progress_token=token if is_id(token) else None,
        headers=headers,
        session=session,
        lifespan_context=lifespan_context,
    )


def _finish_modern(method: str, result: dict[str, Any]) -> dict[str, Any]:
    result.setdefault("resultType", "complete")
    if method in CACHEABLE and result["resultType"] == "complete":
        result.setdefault("ttlMs", get_config().LIST_TTL_MS)
        result.setdefault("cacheScope", "private")
    meta = result.setdefault("_meta", {})
    meta.setdefault(META_SERVER_INFO, server_info())
    return result


class Dispatcher:
    """One MCP server's protocol: decoded requests in, JSON-RPC responses out. ``engine``:
    the task engine (None: task tools run as plain calls)."""

    def __init__(self, server: MCPServer, engine: TaskEngine | None = None) -> None:
        self.server = server
        self.methods = method_tables(engine)

    async def handle(self, message: Message, info: RequestInfo, sink: Sink) -> Message:
        """Run one request and return its JSON-RPC response (result or error)."""
        method = message["method"]
        params = message.get("params") or {}
        table = self.methods.modern if info.modern else self.methods.legacy
        handler = table.get(method)
        try:
            if handler is None:
                raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)
            result = await handler(self.server, info, sink, params)
        except ProtocolError as exc:
            return error_response(message["id"], exc.to_dict())
        except Exception:
            logger.exception("%s failed", method)
            return error_response(message["id"], error_object(INTERNAL_ERROR, "Internal error"))
        if info.modern:
            result = _finish_modern(method, result)
        return result_response(message["id"], result)

    async def scope_challenge(self, message: Message, principal: Principal) -> list[str]:
        """:func:`.handlers.scope_challenge`."""
        return await scope_challenge(self.server, message, principal)

    async def subscribe(self, message: Message, info: RequestInfo) -> Subscription:
        """Read a ``subscriptions/listen`` request (:func:`.subscriptions.subscribe`)."""
        return await subscribe(message, info, self.methods.tasks)

    async def task_pushed(self, task_id: str, subscription: Subscription) -> Message | None:
        """The ``notifications/tasks`` of a watched task that changed (None: not the
        subscriber's, or no engine)."""
        tasks = self.methods.tasks
        if tasks is None or task_id not in subscription.task_ids:
            return None
        detailed = await tasks.watched(task_id, subscription.principal_scope)
        return subscription.tagged(detailed) if detailed is not None else None

    async def session_task_status(self, task_id: str, session_id: str) -> Message | None:
        """The ``notifications/tasks/status`` of a 2025-11-25 session's task that changed."""
        legacy = self.methods.legacy_tasks
        status = await legacy.status(task_id, session_id) if legacy is not None else None
        return notification("notifications/tasks/status", status) if status else None

    async def relay_questions(
        self, task_id: str, principal_scope: str, sink: Sink, relayed: dict[str, asyncio.Task[None]]
    ) -> None:
        """Send a 2025-11-25 task's waiting questions on the stream ``sink`` writes to."""
        if self.methods.legacy_tasks is not None:
            await self.methods.legacy_tasks.relay.relay_questions(
                task_id, principal_scope, sink, relayed
            )

"""OAuth 2.0 Protected Resource Metadata (RFC 9728) at ``/.well-known/oauth-protected-resource``
(and its MCP-path-suffixed form) once ``AUTHORIZATION_SERVERS`` names an issuer. URLs come
from the request unless ``RESOURCE`` / ``RESOURCE_METADATA_URL`` say otherwise."""

from __future__ import annotations

import json
from typing import Any

from ..authoring.registry import mcp
from ..conf import get_config
from .http import JSON, HttpError, check_host, header_map, request_scheme

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def _origin(scope: dict[str, Any], headers: dict[str, str | list[str]]) -> str:
    return f"{request_scheme(scope, headers)}://{check_host(headers)}"


def _mcp_path() -> str:
    return str(get_config().PATH).rstrip("/") or "/"


def resource_url(scope: dict[str, Any], headers: dict[str, str | list[str]]) -> str:
    """The canonical URI of this MCP server (RFC 8707 ``resource``)."""
    configured = get_config().RESOURCE
    return str(configured) if configured else _origin(scope, headers) + _mcp_path()


def metadata_url(scope: dict[str, Any], headers: dict[str, str | list[str]]) -> str | None:
    """Where the metadata document is (for ``WWW-Authenticate``), or None when none is."""
    config = get_config()
    if config.RESOURCE_METADATA_URL:
        return str(config.RESOURCE_METADATA_URL)
    if not config.AUTHORIZATION_SERVERS:
        return None
    path = _mcp_path()
    return _origin(scope, headers) + WELL_KNOWN + ("" if path == "/" else path)


def supported_scopes() -> list[str]:
    """``SCOPES_SUPPORTED``, or ``SIGN_IN_SCOPES`` followed by every scope a registered tool,
    prompt or resource requires."""
    config = get_config()
    if config.SCOPES_SUPPORTED is not None:
        return list(config.SCOPES_SUPPORTED)
    found: dict[str, None] = dict.fromkeys(config.SIGN_IN_SCOPES)
    for registry in (mcp.tools, mcp.prompts, mcp.resources, mcp.templates):
        for item in registry.values():
            found.update(dict.fromkeys(item.access.scopes))
    return list(found)


def document(scope: dict[str, Any], headers: dict[str, str | list[str]]) -> dict[str, Any]:
    """The RFC 9728 metadata document."""
    config = get_config()
    out: dict[str, Any] = {
        "resource": resource_url(scope, headers),
        "authorization_servers": [
            _absolute(issuer, scope, headers) for issuer in config.AUTHORIZATION_SERVERS
        ],
        "bearer_methods_supported": list(config.BEARER_METHODS_SUPPORTED),
    }
    scopes = supported_scopes()
    if scopes:
        out["scopes_supported"] = scopes
    if config.SERVER_NAME:
        out["resource_name"] = config.SERVER_NAME
    return out


def _absolute(issuer: str, scope: dict[str, Any], headers: dict[str, str | list[str]]) -> str:
    """An issuer given as a path (``"/"``, ``"/o"``) is on this server's origin."""
    if not issuer.startswith("/"):
        return issuer
    return _origin(scope, headers) + issuer.rstrip("/")


def is_metadata_path(path: str) -> bool:
    mcp_path = _mcp_path()
    suffixed = WELL_KNOWN + ("" if mcp_path == "/" else mcp_path)
    return path in (WELL_KNOWN, suffixed)


async def serve(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI app for the metadata paths: GET/HEAD (open to any origin, as RFC 9728
    documents are public), OPTIONS (CORS preflight); 404 without authorization servers."""
    headers = header_map(scope)
    cors = [(b"access-control-allow-origin", b"*")]
    method = scope.get("method", "GET")
    try:
        if not get_config().AUTHORIZATION_SERVERS:
            raise HttpError(404, "Not Found")
        if method == "OPTIONS":
            allow = [(b"access-control-allow-methods", b"GET, OPTIONS")]
            await _send(send, 204, b"", cors + allow)
            return
        if method not in ("GET", "HEAD"):
            raise HttpError(405, "Method Not Allowed", [(b"allow", b"GET, HEAD, OPTIONS")])
        body = json.dumps(document(scope, headers)).encode()
    except HttpError as exc:
        payload = json.dumps({"error": exc.message}).encode()
        await _send(send, exc.status, payload, JSON + exc.headers + cors)
        return
    extra = [(b"cache-control", b"public, max-age=3600")]
    await _send(send, 200, b"" if method == "HEAD" else body, JSON + cors + extra)


async def _send(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

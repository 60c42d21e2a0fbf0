"""Plain HTTP helpers for the MCP endpoint: header access, guards and error bodies."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from ..conf import get_config
from ..core.jsonrpc import INVALID_REQUEST, error_object, error_response


@dataclass
class HttpError(Exception):
    """An HTTP-level refusal answered before any JSON-RPC processing."""

    status: int
    message: str
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: dict[str, Any] | None = None

    def payload(self) -> bytes:
        if self.body is not None:
            return json.dumps(self.body).encode()
        return json.dumps(
            error_response(None, error_object(INVALID_REQUEST, self.message))
        ).encode()


def header_map(scope: dict[str, Any]) -> dict[str, str | list[str]]:
    """Request headers by lower-case name; a repeated header becomes a list."""
    headers: dict[str, str | list[str]] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name in headers:
            existing = headers[name]
            headers[name] = [*existing, value] if isinstance(existing, list) else [existing, value]
        else:
            headers[name] = value
    return headers


def first(headers: dict[str, str | list[str]], name: str) -> str | None:
    value = headers.get(name)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def declares_more_than(headers: dict[str, str | list[str]], limit: int) -> bool:
    """True when ``Content-Length`` announces more than ``limit`` bytes."""
    declared = first(headers, "content-length") or ""
    if not (declared.isascii() and declared.isdigit()):
        return False
    return len(declared) > 18 or int(declared) > limit


def _allowed_hosts() -> tuple[str, ...]:
    hosts = tuple(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = (".localhost", "127.0.0.1", "[::1]")
    return hosts


@functools.lru_cache(maxsize=256)
def _host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Django's own check, remembered per Host value and ``ALLOWED_HOSTS`` (a request's
    first costs a regular expression and a scan of the list; a client sends the same one)."""
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def check_host(headers: dict[str, str | list[str]]) -> str:
    """Return the Host header if it is in ``ALLOWED_HOSTS`` (DNS-rebinding protection)."""
    host = first(headers, "host") or ""
    if not _host_allowed(host, _allowed_hosts()):
        raise HttpError(421, f"Invalid Host header {host!r}: add it to ALLOWED_HOSTS")
    return host


def check_origin(headers: dict[str, str | list[str]], host: str) -> str | None:
    """Allow no Origin, the same origin, or one listed in ``MCP_TASKS["ALLOWED_ORIGINS"]``."""
    origin = first(headers, "origin")
    if origin is None:
        return None
    allowed = get_config()["ALLOWED_ORIGINS"]
    if origin in allowed or "*" in allowed:
        return origin
    try:
        parts = urlsplit(origin)
    except ValueError:  # e.g. an unclosed "[" of an IPv6 address
        parts = urlsplit("")
    if parts.scheme in ("http", "https") and parts.netloc and parts.netloc.lower() == host.lower():
        return origin
    raise HttpError(
        403, f"Origin {origin!r} is not allowed: add it to MCP_TASKS['ALLOWED_ORIGINS']"
    )


def _media_types(value: str | None) -> set[str]:
    if not value:
        return set()
    return {part.split(";", 1)[0].strip().lower() for part in value.split(",") if part.strip()}


def accepts(headers: dict[str, str | list[str]], *needed: str) -> bool:
    """True when the Accept header lists every ``needed`` type (wildcards count)."""
    offered = _media_types(first(headers, "accept"))
    for media in needed:
        family = media.split("/", 1)[0] + "/*"
        if not offered & {media, family, "*/*"}:
            return False
    return True


def check_content_type(headers: dict[str, str | list[str]]) -> None:
    if _media_types(first(headers, "content-type")) != {"application/json"}:
        raise HttpError(415, "Unsupported Media Type: Content-Type must be application/json")


def cors_headers(origin: str | None) -> list[tuple[bytes, bytes]]:
    """CORS headers for an allowed cross-origin caller."""
    if origin is None:
        return []
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", b"mcp-session-id, www-authenticate"),
        (b"vary", b"Origin"),
    ]


def preflight_headers(headers: dict[str, str | list[str]]) -> list[tuple[bytes, bytes]]:
    """Answer a CORS preflight: the methods we serve and the headers the caller asked for
    (``Mcp-Param-*`` names are open-ended, so they are echoed)."""
    requested = first(headers, "access-control-request-headers") or "content-type"
    return [
        (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
        (b"access-control-allow-headers", requested.encode("latin-1")),
        (b"access-control-max-age", b"600"),
    ]

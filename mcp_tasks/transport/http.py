"""Plain HTTP helpers for the MCP endpoint: header access, guards and error bodies, and the
origin guard of the live admin's WebSocket."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from ..conf import get_config
from ..core.jsonrpc import INVALID_REQUEST, error_object, error_response

ASGIApp = Any
#: The port an origin has when it names none.
DEFAULT_PORTS = {"http": 80, "https": 443}
JSON = [(b"content-type", b"application/json")]


@dataclass
class HttpError(Exception):
    """An HTTP-level refusal answered before any JSON-RPC processing."""

    status: int
    message: str
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: dict[str, Any] | None = None

    def payload(self) -> bytes:
        body = self.body
        if body is None:
            body = error_response(None, error_object(INVALID_REQUEST, self.message))
        return json.dumps(body).encode()


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


def single(headers: dict[str, str | list[str]], name: str) -> str | None:
    """The header sent at most once (Host: RFC 9112 3.2; Origin: RFC 6454 7.2), else 400."""
    value = headers.get(name)
    if isinstance(value, list):
        raise HttpError(400, f"More than one {name.title()} header")
    return value


def declares_more_than(headers: dict[str, str | list[str]], limit: int) -> bool:
    """True when ``Content-Length`` announces more than ``limit`` bytes."""
    declared = first(headers, "content-length") or ""
    if not (declared.isascii() and declared.isdigit()):
        return False
    return len(declared) > 18 or int(declared) > limit


def allowed_hosts() -> tuple[str, ...]:
    """``ALLOWED_HOSTS``, or Django's defaults under ``DEBUG`` when it is empty."""
    hosts = tuple(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not hosts:
        hosts = (".localhost", "127.0.0.1", "[::1]")
    return hosts


@functools.lru_cache(maxsize=256)
def _host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Django's own check, remembered per Host value and ``ALLOWED_HOSTS``."""
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def check_host(headers: dict[str, str | list[str]]) -> str:
    """Return the Host header if it is in ``ALLOWED_HOSTS`` (DNS-rebinding protection)."""
    host = single(headers, "host") or ""
    if not _host_allowed(host, allowed_hosts()):
        raise HttpError(421, f"Invalid Host header {host!r}: add it to ALLOWED_HOSTS")
    return host


def request_scheme(scope: dict[str, Any], headers: dict[str, str | list[str]]) -> str:
    """``http`` or ``https`` as Django's ``request.is_secure()`` tells it (``ws``/``wss`` alike)."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, secure = proxy
        value = first(headers, name.removeprefix("HTTP_").replace("_", "-").lower())
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure else "http"
    scheme = str(scope.get("scheme") or "http")
    return {"ws": "http", "wss": "https"}.get(scheme, scheme)


def origin_of(url: str) -> tuple[str, str, int] | None:
    """An http(s) origin's scheme, host and port (the default port when it names none), or
    None for anything else (``null``, another scheme, no host)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # a port out of range, an unclosed "[" of an IPv6 address
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname, DEFAULT_PORTS[scheme] if port is None else port


def same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether ``origin`` is ``scheme://host`` (``host``: a Host header): the same scheme,
    host and port, a default port written or not."""
    theirs = origin_of(origin)
    return theirs is not None and theirs == origin_of(f"{scheme}://{host}")


def check_origin(headers: dict[str, str | list[str]], host: str, scheme: str) -> str | None:
    """Allow no Origin, this server's own (``scheme://host``: scheme, host and port), or one
    listed in ``MCP_TASKS["ALLOWED_ORIGINS"]``."""
    origin = single(headers, "origin")
    if origin is None:
        return None
    allowed = get_config().ALLOWED_ORIGINS
    if "*" in allowed or same_origin(origin, scheme, host) or _listed(origin, allowed):
        return origin
    raise HttpError(
        403,
        f"Origin {origin!r} is not allowed: it is not this server's origin "
        f"({scheme}://{host}); add it to MCP_TASKS['ALLOWED_ORIGINS'] (behind a proxy that "
        "ends TLS, set SECURE_PROXY_SSL_HEADER)",
    )


def _listed(origin: str, allowed: Sequence[str]) -> bool:
    found = origin_of(origin)
    return origin in allowed or (found is not None and found in map(origin_of, allowed))


def _trusted_by_csrf(origin: str) -> bool:
    """Whether Django's ``CSRF_TRUSTED_ORIGINS`` trusts ``origin``, as its CSRF check reads
    it: an entry exactly, or ``scheme://*.domain`` for the domain's subdomains."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    netloc = parts.netloc.lower()
    for entry in getattr(settings, "CSRF_TRUSTED_ORIGINS", ()):
        if entry == origin:
            return True
        if "*" in entry:
            trusted = urlsplit(entry)
            domain = trusted.netloc.lstrip("*").lower()  # ".example.com"
            if trusted.scheme == parts.scheme and (netloc.endswith(domain) or netloc == domain[1:]):
                return True
    return False


class SameOriginWebSocket:
    """Lets a WebSocket through when its Host is allowed and its Origin is this server's own
    or one ``CSRF_TRUSTED_ORIGINS`` trusts (as for the admin's forms); any other is refused
    before it opens (HTTP 403)."""

    def __init__(self, application: ASGIApp) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.allows(scope):
            await self.application(scope, receive, send)
            return
        message = await receive()  # websocket.connect
        if message.get("type") == "websocket.connect":
            await send({"type": "websocket.close", "code": 1008})

    @staticmethod
    def allows(scope: dict[str, Any]) -> bool:
        headers = header_map(scope)
        host, origin = headers.get("host"), headers.get("origin")  # a repeated one: a list
        if not isinstance(host, str) or not isinstance(origin, str):
            return False
        if not _host_allowed(host, allowed_hosts()):
            return False
        scheme = request_scheme(scope, headers)
        return same_origin(origin, scheme, host) or _trusted_by_csrf(origin)


def _media_types(value: str | None) -> set[str]:
    if not value:
        return set()
    return {part.split(";", 1)[0].strip().lower() for part in value.split(",") if part.strip()}


def accepts(headers: dict[str, str | list[str]], *needed: str) -> bool:
    """True when the Accept header lists every ``needed`` type (wildcards count); header
    lines of one name make one list (RFC 9110 section 5.3)."""
    value = headers.get("accept")
    offered = _media_types(", ".join(value) if isinstance(value, list) else value)
    return all(offered & {media, media.split("/", 1)[0] + "/*", "*/*"} for media in needed)


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

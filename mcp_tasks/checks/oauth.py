"""System checks of the OAuth settings (called by :func:`mcp_tasks.checks.check_mcp_tasks`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning as CheckWarning

from ..conf import get_config
from ..core import module_available

DOT_VERIFIER = "mcp_tasks.auth.verifiers.dot.verify"
JWKS_VERIFIER = "mcp_tasks.auth.verifiers.jwks.verify"
_EXTRA = "Install the extra: pip install 'django-mcp-tasks[oauth]'."
BOUNDED_FETCHER = "mcp_tasks.auth.cimd.BoundedMetadataFetcher"
#: django-oauth-toolkit's own CIMD fetcher: its path in 3.4, and where DOT's main branch moves it.
DOT_FETCHERS = {
    "oauth2_provider.cimd.SafeMetadataFetcher",
    "oauth2_provider.authorization_server.cimd.SafeMetadataFetcher",
}
_LOCAL = {"localhost", "127.0.0.1", "::1"}


def check_oauth() -> list[CheckMessage]:
    """E007-E010, W006, W014: the ready verifiers' needs, ``RESOURCE``, the issuers
    and the fetcher of client metadata documents."""
    config = get_config()
    messages: list[CheckMessage] = []
    verifier = config.TOKEN_VERIFIER
    if verifier == DOT_VERIFIER and not apps.is_installed("oauth2_provider"):
        messages.append(
            Error(
                f"TOKEN_VERIFIER is {DOT_VERIFIER!r} but 'oauth2_provider' "
                "(django-oauth-toolkit) is not in INSTALLED_APPS.",
                hint="Add 'oauth2_provider' to INSTALLED_APPS and run migrate. " + _EXTRA,
                id="mcp_tasks.E007",
            )
        )
    if verifier == JWKS_VERIFIER:
        missing = [key for key in ("JWT_ISSUER", "JWT_JWKS_URL") if not getattr(config, key)]
        if missing or not module_available("jwt"):
            messages.append(
                Error(
                    f"TOKEN_VERIFIER is {JWKS_VERIFIER!r} but "
                    + (f"{' and '.join(missing)} not set." if missing else "PyJWT is missing."),
                    hint="Set MCP_TASKS['JWT_ISSUER'] (the tokens' iss) and "
                    "MCP_TASKS['JWT_JWKS_URL'] (the issuer's jwks_uri). " + _EXTRA,
                    id="mcp_tasks.E008",
                )
            )
    resource = config.RESOURCE
    if resource and not _absolute_url(resource, fragment_ok=False):
        messages.append(
            Error(
                f"MCP_TASKS['RESOURCE'] {resource!r} is not an absolute http(s) URI without "
                "a fragment (RFC 8707).",
                hint="Use the MCP endpoint's full URL, e.g. 'https://mcp.example.com/mcp', "
                "or None to build it from each request.",
                id="mcp_tasks.E009",
            )
        )
    servers = config.AUTHORIZATION_SERVERS
    if servers and not verifier:
        messages.append(
            Error(
                "AUTHORIZATION_SERVERS is set but TOKEN_VERIFIER is not: clients would sign "
                "in and every token they bring would be refused.",
                hint=f"Set TOKEN_VERIFIER to {DOT_VERIFIER!r}, {JWKS_VERIFIER!r} or your own.",
                id="mcp_tasks.E010",
            )
        )
    for server in servers:
        if server.startswith("/"):
            continue  # on this server's own origin
        parts = urlsplit(server)
        if not _absolute_url(server) or (parts.scheme != "https" and parts.hostname not in _LOCAL):
            messages.append(
                CheckWarning(
                    f"AUTHORIZATION_SERVERS has {server!r}, which is not an https URL; "
                    "MCP clients refuse authorization servers without TLS.",
                    hint="Use the issuer's https URL (http only for localhost).",
                    id="mcp_tasks.W006",
                )
            )
    return messages + _check_cimd_fetcher()


def _check_cimd_fetcher() -> list[CheckMessage]:
    """W014: Client ID Metadata Documents fetched by DOT's fetcher, bounded per read only."""
    dot = getattr(settings, "OAUTH2_PROVIDER", None) or {}
    if not apps.is_installed("oauth2_provider") or not dot.get("CIMD_ENABLED"):
        return []
    fetcher = dot.get("CIMD_METADATA_FETCHER", "oauth2_provider.cimd.SafeMetadataFetcher")
    if not isinstance(fetcher, str):
        fetcher = f"{fetcher.__module__}.{fetcher.__qualname__}"
    if fetcher not in DOT_FETCHERS:
        return []
    return [
        CheckWarning(
            "CIMD_ENABLED with django-oauth-toolkit's SafeMetadataFetcher: it bounds each "
            "socket read, not the fetch, so a client metadata document served a byte at a "
            "time holds a sign-in request (and one of CIMD_MAX_CONCURRENT_FETCHES) far past "
            "CIMD_FETCH_TIMEOUT_SECONDS.",
            hint=f"Set OAUTH2_PROVIDER['CIMD_METADATA_FETCHER'] = {BOUNDED_FETCHER!r}.",
            id="mcp_tasks.W014",
        )
    ]


def _absolute_url(value: str, fragment_ok: bool = True) -> bool:
    parts = urlsplit(value)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.netloc)
        and (fragment_ok or not parts.fragment)
    )

"""A fetcher of Client ID Metadata Documents whose whole fetch ends at a deadline
(``OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"]``). django-oauth-toolkit 3.4's own gives its
timeout to each socket operation, so a document served a byte at a time holds a sign-in
for its size times it; this one keeps DOT's rules and gives the whole fetch one deadline."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import ParseResult

import httpx
from oauth2_provider.cimd import (
    CIMDError,
    _effective_max_age,
    _ip_is_public,
    _validate_client_id_url,
)
from oauth2_provider.settings import oauth2_settings

T = TypeVar("T")
ACCEPT = "application/json, application/*+json"


class BoundedMetadataFetcher:
    """DOT's CIMD fetcher contract: ``fetch(client_id)`` returns ``(metadata, max_age)`` or
    raises ``CIMDError``, at the latest ``CIMD_FETCH_TIMEOUT_SECONDS`` after it was called."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        parsed = _validate_client_id_url(client_id)
        seconds = float(oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS)
        return asyncio.run(self._fetch_within(parsed, seconds))

    def address_allowed(self, ip: str) -> bool:
        """Whether a document may be fetched from ``ip``: DOT's rule, public addresses only
        (IPv6 forms that embed an IPv4 address are judged by that address)."""
        return bool(_ip_is_public(ip))

    async def _fetch_within(
        self, parsed: ParseResult, seconds: float
    ) -> tuple[dict[str, Any], int]:
        try:
            async with asyncio.timeout(seconds):
                return await self._fetch(parsed)
        except TimeoutError:
            raise CIMDError(f"client_id document not fetched within {seconds:g} s") from None

    async def _fetch(self, parsed: ParseResult) -> tuple[dict[str, Any], int]:
        host: str = parsed.hostname or ""
        port = parsed.port or 443
        ips = await self._addresses(host, port)
        target = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        # The URL's authority names the document; the connection goes to a validated
        # address, so no second lookup can rebind it.
        headers = {"Host": parsed.netloc, "Accept": ACCEPT, "Accept-Encoding": "identity"}
        failure: Exception | None = None
        async with httpx.AsyncClient(
            verify=ssl.create_default_context(), trust_env=False, follow_redirects=False
        ) as client:
            for ip in ips:
                address = f"[{ip}]" if ":" in ip else ip
                request = client.build_request(
                    "GET",
                    f"https://{address}:{port}{target}",
                    headers=headers,
                    extensions={"sni_hostname": host},
                )
                try:
                    response = await client.send(request, stream=True)
                except httpx.TransportError as exc:
                    failure = exc  # this address failed: try the next one
                    continue
                try:
                    return await _document(response)
                except httpx.TransportError as exc:
                    raise CIMDError(f"could not read client_id document: {exc}") from exc
                finally:
                    await response.aclose()
        raise CIMDError(f"could not fetch client_id document: {failure}")

    async def _addresses(self, host: str, port: int) -> list[str]:
        """Every address ``host`` resolves to, each one allowed, or ``CIMDError``."""
        try:
            infos = await _in_own_thread(socket.getaddrinfo, host, port, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise CIMDError(f"could not resolve client_id host: {exc}") from exc
        ips = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for ip in ips:
            if not self.address_allowed(ip):
                raise CIMDError(f"client_id host resolves to a non-public address ({ip})")
        if not ips:
            raise CIMDError("client_id host did not resolve to any address")
        return ips


async def _document(response: httpx.Response) -> tuple[dict[str, Any], int]:
    """The JSON object ``response`` carries and its lifetime, or ``CIMDError``."""
    if response.status_code != 200:
        raise CIMDError(f"client_id document returned HTTP {response.status_code}")
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json" and not (
        media_type.startswith("application/") and media_type.endswith("+json")
    ):
        raise CIMDError(f"client_id document is not JSON (Content-Type: {media_type!r})")
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise CIMDError(f"client_id document is encoded ({encoding!r}); identity was asked")
    limit = int(oauth2_settings.CIMD_MAX_DOCUMENT_SIZE)
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > limit:
            raise CIMDError("client_id document exceeds the maximum allowed size")
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise CIMDError("client_id document is not valid JSON") from exc
    if not isinstance(data, dict):
        raise CIMDError("client_id document must be a JSON object")
    max_age = int(_effective_max_age(response.headers.get("cache-control")))
    return data, max_age


async def _in_own_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` in a thread of its own, which a lookup without timeout
    may outlive (one of the loop's executor would hold ``asyncio.run``)."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(function(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name="mcp_tasks-cimd-lookup", daemon=True).start()
    return await asyncio.wrap_future(future)

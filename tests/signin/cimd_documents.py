"""Client ID Metadata Documents for the tests: a loopback server that publishes them, and
the fetcher that lets django-oauth-toolkit read them there.

DOT's ``SafeMetadataFetcher`` refuses loopback and private addresses and requires TLS with
a certificate a public CA signed, so it can never reach a test server on 127.0.0.1. The
tests name their clients ``https://127.0.0.1:PORT/...`` (the URL form CIMD requires) and
:class:`LoopbackFetcher` fetches those over plain HTTP from the same host and port: only
the transport differs (as in DOT's own end-to-end tests); the document checks (status,
media type, size cap, ``Cache-Control`` lifetime) are DOT's own ``_read_document``, and
the URL checks and everything after the fetch are DOT's unchanged. Tests only: it is named
in ``OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"]`` of ``tests.signin.cimd_settings`` and of
the in-process tests' ``override_settings``, nowhere else.
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

import urllib3
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher, _validate_client_id_url
from oauth2_provider.settings import oauth2_settings

FETCHER = "tests.signin.cimd_documents.LoopbackFetcher"


class LoopbackFetcher(SafeMetadataFetcher):  # type: ignore[misc]  # DOT is untyped
    """Fetch ``https://127.0.0.1:PORT/path`` from ``http://127.0.0.1:PORT/path``."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        parsed = _validate_client_id_url(client_id)
        if parsed.hostname != "127.0.0.1":
            raise CIMDError("the loopback fetcher reads documents on 127.0.0.1 only")
        seconds = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        pool = urllib3.HTTPConnectionPool(
            "127.0.0.1", parsed.port, timeout=urllib3.Timeout(total=seconds), retries=False
        )
        try:
            response = pool.urlopen(
                "GET",
                parsed.path,
                headers={"Host": parsed.netloc, "Accept": "application/json"},
                redirect=False,
                preload_content=False,
            )
            try:
                document: tuple[dict[str, Any], int] = self._read_document(response)
                return document
            finally:
                response.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            raise CIMDError(f"could not fetch client_id document: {exc}") from exc
        finally:
            pool.close()


class DocumentServer:
    """Publishes client metadata documents on a loopback port and counts their fetches."""

    def __init__(self) -> None:
        self.documents: dict[str, bytes] = {}
        self.fetches: dict[str, int] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.fetches[self.path] = server.fetches.get(self.path, 0) + 1
                body = server.documents.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "max-age=600")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def publish(self, path: str, name: str, redirect_uri: str, **fields: Any) -> str:
        """Publish a public client's document at ``path``; returns its URL (the client_id)."""
        client_id = f"https://127.0.0.1:{self.port}{path}"
        document = {
            "client_id": client_id,
            "client_name": name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            **fields,
        }
        self.documents[path] = json.dumps(document).encode()
        return client_id

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

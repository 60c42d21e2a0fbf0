"""Client ID Metadata Documents for the tests: an HTTPS server on a loopback port that
publishes them (at once, slowly or a byte at a time), the test certificate authority its
certificate comes from, and the fetcher that may read them there.

The tests name their clients ``https://127.0.0.1:PORT/...`` and fetch them with the example
project's fetcher, ``mcp_tasks.auth.cimd.BoundedMetadataFetcher``, with one rule relaxed:
:class:`LoopbackAllowedFetcher` may connect to 127.0.0.1, which it refuses (DOT's rule:
public addresses only). It trusts the test authority the way a site trusts a private one,
through ``SSL_CERT_FILE`` (:func:`trust_env`), which ``ssl.create_default_context()`` reads:
certificates are checked as in production. Tests only: :data:`FETCHER` is named in
``OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"]`` of ``tests.signin.cimd_settings`` and of the
in-process tests' ``override_settings``, nowhere else.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import ipaddress
import json
import shutil
import socket
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mcp_tasks.auth.cimd import BoundedMetadataFetcher

FETCHER = "tests.signin.cimd_documents.LoopbackAllowedFetcher"
#: Seconds between two bytes of a dripped response.
DRIP_EVERY = 0.2


@dataclass(frozen=True)
class Authority:
    """A certificate authority's file (PEM) and a server certificate and key it signed."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_authority(folder: Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Authority:
    """A new CA in ``folder`` and a certificate for ``hosts`` (IP addresses or names)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("mcp_tasks test CA"))
        .issuer_name(_name("mcp_tasks test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    authority = Authority(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    authority.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    authority.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    authority.key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return authority


@functools.cache
def shared_authority() -> Authority:
    """One test authority for the test run (removed when it ends)."""
    folder = Path(tempfile.mkdtemp(prefix="mcp_tasks_ca_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return make_authority(folder)


def trust_env(authority: Authority | None = None) -> dict[str, str]:
    """The environment in which TLS trusts ``authority`` (the shared one by default)."""
    return {"SSL_CERT_FILE": str((authority or shared_authority()).ca_file)}


def document(
    client_id: str,
    name: str = "Slow Client",
    redirect_uri: str = "http://127.0.0.1:1/callback",
    **fields: Any,
) -> bytes:
    """A public client's metadata document."""
    return json.dumps(
        {
            "client_id": client_id,
            "client_name": name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            **fields,
        }
    ).encode()


@dataclass
class Connection:
    """What the server saw of one connection."""

    path: str = ""
    host: str = ""
    opened: float = field(default_factory=time.monotonic)
    closed: float | None = None


class DocumentServer:
    """HTTPS on ``127.0.0.1``, a thread per connection. A path names how it is answered:

    - ``/drip-body/...``: the headers at once, then the document a byte every
      :data:`DRIP_EVERY` seconds;
    - ``/drip-headers/...``: the status line and headers a byte every :data:`DRIP_EVERY`;
    - ``/silent/...``: nothing at all after the request;
    - ``/redirect/...``: ``302`` to the same path without ``/redirect``;
    - anything else: the document at once (``Cache-Control: max-age=600``).

    The document is the one :meth:`publish` put at the path, else that of a client whose id
    is the URL itself, padded with spaces to ``padding`` bytes (so a drip lasts ``padding *
    DRIP_EVERY`` seconds). ``fetches`` counts the requests for each path.
    """

    def __init__(self, authority: Authority | None = None, padding: int = 0) -> None:
        authority = authority or shared_authority()
        self.padding = padding
        self.documents: dict[str, bytes] = {}
        self.fetches: dict[str, int] = {}
        self.connections: list[Connection] = []
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(authority.cert_file, authority.key_file)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def publish(self, path: str, name: str, redirect_uri: str, **fields: Any) -> str:
        """Publish a public client's document at ``path``; returns its URL (the client_id)."""
        client_id = self.url(path)
        self.documents[path] = document(client_id, name, redirect_uri, **fields)
        return client_id

    def close(self) -> None:
        self._stopping.set()
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            seen = Connection()
            self.connections.append(seen)
            threading.Thread(target=self._serve, args=(raw, seen), daemon=True).start()

    def _serve(self, raw: socket.socket, seen: Connection) -> None:
        raw.settimeout(30)
        try:
            with self._context.wrap_socket(raw, server_side=True) as conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    request += chunk
                self._answer(conn, request, seen)
        except OSError:
            pass  # the client hung up (or refused our certificate)
        finally:
            seen.closed = time.monotonic()

    def _answer(self, conn: ssl.SSLSocket, request: bytes, seen: Connection) -> None:
        lines = request.decode("latin-1").split("\r\n")
        seen.path = lines[0].split(" ")[1]
        seen.host = next(
            (line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("host:")),
            "",
        )
        self.fetches[seen.path] = self.fetches.get(seen.path, 0) + 1
        published = self.documents.get(seen.path)
        body = published or document(f"https://{seen.host}{seen.path}").ljust(self.padding)
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Cache-Control: max-age=600\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        if seen.path.startswith("/redirect/"):
            target = seen.path.replace("/redirect/", "/", 1)
            conn.sendall(
                f"HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\n\r\n".encode()
            )
            conn.recv(1)
        elif seen.path.startswith("/silent/"):
            conn.recv(1)  # until the client hangs up
        elif seen.path.startswith("/drip-headers/"):
            self._drip(conn, head + body)
        elif seen.path.startswith("/drip-body/"):
            conn.sendall(head)
            self._drip(conn, body)
        else:
            conn.sendall(head + body)
            conn.recv(1)  # until the client hangs up

    def _drip(self, conn: ssl.SSLSocket, data: bytes) -> None:
        for index in range(len(data)):
            if self._stopping.wait(DRIP_EVERY):
                return
            conn.sendall(data[index : index + 1])


class LoopbackAllowedFetcher(BoundedMetadataFetcher):
    """The bounded fetcher with one rule relaxed: it may fetch from ``127.0.0.1``, where the
    tests' servers are. Everything else (TLS, certificates, deadline, size) is unchanged."""

    def address_allowed(self, ip: str) -> bool:
        return ip == "127.0.0.1" or super().address_allowed(ip)

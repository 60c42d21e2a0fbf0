"""``mcp_tasks.auth.cimd.BoundedMetadataFetcher`` against a real HTTPS server on loopback
(``cimd_documents.py``): a document is fetched with DOT's protections kept (public
addresses only, the certificate checked for the URL's host, no redirect, the size cap), and
a document served a byte at a time, headers served a byte at a time or no answer at all
end the fetch at ``CIMD_FETCH_TIMEOUT_SECONDS``, so slow documents give DOT's
concurrent-fetch slots back by then. The tests relax one rule only: the fetcher may connect
to 127.0.0.1 (``LoopbackAllowedFetcher``); the server's authority is trusted through
``SSL_CERT_FILE``, as a site trusts a private one.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from oauth2_provider.cimd import CIMDError, resolve_cimd_application

from mcp_tasks.auth.cimd import BoundedMetadataFetcher
from tests.signin.cimd_documents import (
    DRIP_EVERY,
    FETCHER,
    Authority,
    DocumentServer,
    LoopbackAllowedFetcher,
    make_authority,
    shared_authority,
    trust_env,
)

#: CIMD_FETCH_TIMEOUT_SECONDS in these tests.
DEADLINE = 2
#: How long past the deadline a fetch may take to end (a busy machine), far below a drip.
SLACK = 3.0
#: Bytes in a dripped document: it would take PADDING * DRIP_EVERY (80 s) to arrive.
PADDING = 400


@pytest.fixture(scope="module")
def authority() -> Authority:
    return shared_authority()


@pytest.fixture(scope="module")
def server(authority: Authority) -> Iterator[DocumentServer]:
    documents = DocumentServer(authority, padding=PADDING)
    yield documents
    documents.close()


@pytest.fixture(autouse=True)
def trusted(authority: Authority, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test authority is the trusted one; DOT's settings with the tests' deadline."""
    for name, value in trust_env(authority).items():
        monkeypatch.setenv(name, value)
    with override_settings(OAUTH2_PROVIDER={"CIMD_FETCH_TIMEOUT_SECONDS": DEADLINE}):
        yield


def timed_fetch(client_id: str) -> tuple[float, CIMDError]:
    """Seconds a failing fetch of ``client_id`` took, and its error."""
    started = time.monotonic()
    with pytest.raises(CIMDError) as refused:
        LoopbackAllowedFetcher().fetch(client_id)
    return time.monotonic() - started, refused.value


# -- a document, with DOT's protections -------------------------------------------------------


def test_a_document_is_fetched_over_tls_with_its_lifetime(server: DocumentServer) -> None:
    client_id = server.url("/clients/desk.json")
    metadata, max_age = LoopbackAllowedFetcher().fetch(client_id)
    assert (metadata["client_id"], metadata["client_name"]) == (client_id, "Slow Client")
    assert max_age == 600
    assert server.connections[-1].host == f"127.0.0.1:{server.port}"


def test_a_loopback_address_is_refused_before_connecting(server: DocumentServer) -> None:
    seen = len(server.connections)
    with pytest.raises(CIMDError, match=r"non-public address \(127\.0\.0\.1\)"):
        BoundedMetadataFetcher().fetch(server.url("/clients/desk.json"))
    assert len(server.connections) == seen


def test_a_certificate_of_an_unknown_authority_is_refused(
    server: DocumentServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(make_authority(tmp_path).ca_file))
    with pytest.raises(CIMDError, match="CERTIFICATE_VERIFY_FAILED"):
        LoopbackAllowedFetcher().fetch(server.url("/clients/desk.json"))


def test_a_certificate_for_another_host_is_refused(
    authority: Authority, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = make_authority(tmp_path, hosts=("documents.example",))
    monkeypatch.setenv("SSL_CERT_FILE", str(other.ca_file))
    impostor = DocumentServer(other)
    try:
        with pytest.raises(CIMDError, match="CERTIFICATE_VERIFY_FAILED"):
            LoopbackAllowedFetcher().fetch(impostor.url("/clients/desk.json"))
    finally:
        impostor.close()


def test_a_redirect_is_not_followed(server: DocumentServer) -> None:
    seen = len(server.connections)
    with pytest.raises(CIMDError, match="HTTP 302"):
        LoopbackAllowedFetcher().fetch(server.url("/redirect/clients/desk.json"))
    assert [c.path for c in server.connections[seen:]] == ["/redirect/clients/desk.json"]


def test_a_document_past_the_size_limit_is_refused(server: DocumentServer) -> None:
    limits = {"CIMD_FETCH_TIMEOUT_SECONDS": DEADLINE, "CIMD_MAX_DOCUMENT_SIZE": PADDING - 1}
    with (
        override_settings(OAUTH2_PROVIDER=limits),
        pytest.raises(CIMDError, match="exceeds the maximum allowed size"),
    ):
        LoopbackAllowedFetcher().fetch(server.url("/clients/desk.json"))


# -- the deadline -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/drip-body/desk.json", "/drip-headers/desk.json", "/silent/desk.json"],
    ids=["body-dripped", "headers-dripped", "no-answer"],
)
def test_a_slow_document_ends_the_fetch_at_the_deadline(server: DocumentServer, path: str) -> None:
    took, error = timed_fetch(server.url(path))
    assert f"not fetched within {DEADLINE} s" in str(error)
    assert took < DEADLINE + SLACK, f"the fetch took {took:.1f} s"
    connection = next(c for c in reversed(server.connections) if c.path == path)
    assert _closed_within(connection, DEADLINE + SLACK), "the fetcher kept the connection"


def test_a_slow_name_lookup_ends_the_fetch_at_the_deadline(
    server: DocumentServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve = socket.getaddrinfo
    release = threading.Event()

    def resolver_that_hangs(*args: Any, **kwargs: Any) -> Any:
        release.wait(60)  # a name server that does not answer
        return resolve(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver_that_hangs)
    try:
        took, error = timed_fetch(server.url("/clients/desk.json"))
    finally:
        release.set()
    assert f"not fetched within {DEADLINE} s" in str(error)
    assert took < DEADLINE + SLACK, f"the fetch took {took:.1f} s"


@pytest.mark.django_db
def test_slow_documents_hold_the_concurrent_fetch_cap_only_until_the_deadline(
    server: DocumentServer,
) -> None:
    """DOT turns a client away while ``CIMD_MAX_CONCURRENT_FETCHES`` fetches are in flight;
    two dripped documents hold both slots until the deadline, not for their 80 s."""
    cimd = {
        "CIMD_ENABLED": True,
        "CIMD_METADATA_FETCHER": FETCHER,
        "CIMD_FETCH_TIMEOUT_SECONDS": DEADLINE,
        "CIMD_MAX_CONCURRENT_FETCHES": 2,
    }
    with override_settings(OAUTH2_PROVIDER=cimd):
        slow = [server.url(f"/drip-body/cap-{n}.json") for n in range(2)]
        fetches = [
            threading.Thread(target=resolve_cimd_application, args=(url, None)) for url in slow
        ]
        for fetch in fetches:
            fetch.start()
        _wait_for(
            lambda: sum(c.path.startswith("/drip-body/cap-") for c in server.connections) == 2
        )
        assert resolve_cimd_application(server.url("/clients/turned-away.json"), None) is None

        for fetch in fetches:
            fetch.join(timeout=DEADLINE + SLACK)
        assert not any(fetch.is_alive() for fetch in fetches), "a slow document holds a slot"
        application = resolve_cimd_application(server.url("/clients/welcome.json"), None)
    assert application is not None
    assert application.client_id == server.url("/clients/welcome.json")


def _closed_within(connection: Any, seconds: float) -> bool:
    """Whether the server saw ``connection`` end within ``seconds`` of its start (waiting
    for it a little: the server notices at its next byte, every ``DRIP_EVERY``)."""
    _wait_for(lambda: connection.closed is not None, timeout=seconds + 4 * DRIP_EVERY)
    closed: float | None = connection.closed
    return closed is not None and closed - connection.opened < seconds + 2 * DRIP_EVERY


def _wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)

"""What a request refused by admission control looks like (``test_admission.py``,
``test_accept_wait.py``): HTTP 503, ``Retry-After`` and a JSON-RPC "busy" error."""

from __future__ import annotations

import httpx


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    message = response.json()
    assert message["jsonrpc"] == "2.0" and message["id"] is None
    assert message["error"]["code"] == -32000
    assert "busy" in message["error"]["message"].lower()

"""Fixtures of the protocol tests: a registry with the tools of ``protocol_fixtures``."""

from __future__ import annotations

import pytest

from mcp_tasks import MCPServer
from tests.support.protocol_fixtures import make_server


@pytest.fixture
def server() -> MCPServer:
    """A fresh registry for each test (``protocol_fixtures.make_server``)."""
    return make_server()

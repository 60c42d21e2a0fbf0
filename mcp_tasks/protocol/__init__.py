"""The MCP protocol layer: decoded messages in, responses out, for both eras.

It imports no Channels, HTTP or ORM code: the transport hands it a :class:`RequestInfo` and
a :class:`Sink`; it reaches tasks through the :class:`~.ports.TaskEngine` it is given.
"""

from .dispatch import Dispatcher, kind_of, legacy_request_info, modern_request_info, parse_body
from .request import RequestInfo, SessionHandle, Sink

__all__ = [
    "Dispatcher",
    "RequestInfo",
    "SessionHandle",
    "Sink",
    "kind_of",
    "legacy_request_info",
    "modern_request_info",
    "parse_body",
]

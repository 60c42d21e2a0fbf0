"""The MCP protocol layer: pure functions from decoded messages to responses.

It imports no Channels or HTTP code; the transport hands it a :class:`RequestInfo` and a
:class:`Sink`.
"""

from .dispatch import handle_request, kind_of, modern_request_info, parse_body
from .request import RequestInfo, SessionHandle, Sink

__all__ = [
    "RequestInfo",
    "SessionHandle",
    "Sink",
    "handle_request",
    "kind_of",
    "modern_request_info",
    "parse_body",
]

"""The MCP protocol layer of both eras, free of Channels, HTTP and ORM code: the transport hands it
a :class:`RequestInfo` and a :class:`Sink`; tasks come through a :class:`~.ports.TaskEngine`."""

from .dispatch import Dispatcher, kind_of, legacy_request_info, modern_request_info, parse_body
from .request import RequestInfo, Sink

__all__ = [
    "Dispatcher",
    "RequestInfo",
    "Sink",
    "kind_of",
    "legacy_request_info",
    "modern_request_info",
    "parse_body",
]

"""The ``mcp`` SDK's own ``MCPServer`` on uvicorn, with the benchmark's plain ``add`` tool.

Run by ``tests/benchmarks/compare.py`` (``python sdk_server.py --fd FD``); it serves
``/mcp`` until SIGTERM. Any python with ``mcp`` 2.3 and ``uvicorn`` runs it.
"""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bench-sdk", log_level="WARNING")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def main() -> None:
    from _serve import serve

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fd", type=int, required=True, help="a listening socket to serve on")
    args = parser.parse_args()
    serve(mcp.streamable_http_app(stateless_http=True), args.fd)


if __name__ == "__main__":
    main()

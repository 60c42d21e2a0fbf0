"""Serve the example project with uvicorn on a listening socket inherited from the test
(``python -m tests.support.uvicorn_fd FD``), as ``daphne --fd FD`` does.

``socket.socket(fileno=...)`` keeps the socket's real family: uvicorn's own ``--fd`` takes
any inherited socket for a Unix socket, so asyncio would leave Nagle's algorithm on (40 ms
stalls on loopback). ``UVICORN_HTTP`` picks uvicorn's ``--http`` (default ``auto``).
"""

from __future__ import annotations

import os
import socket
import sys

import uvicorn


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    config = uvicorn.Config(
        "project.asgi:application",
        lifespan="off",
        http=os.environ.get("UVICORN_HTTP", "auto"),
        log_level="info",
        # The README's production command has no access log; test servers keep theirs.
        access_log=os.environ.get("UVICORN_ACCESS_LOG", "1") != "0",
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()

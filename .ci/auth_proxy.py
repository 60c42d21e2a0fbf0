"""A signing-in proxy for the conformance suite: it forwards HTTP/1.1 to the server and adds
``Authorization: Bearer <token>`` to every request, since the suite's CLI sends no
credentials of its own. With it, ``.ci/run`` runs the suite once more against a server with
``ALLOW_ANONYMOUS`` off.

    python .ci/auth_proxy.py LISTEN_PORT UPSTREAM_PORT TOKEN

Each client connection gets its own upstream connection; request heads are rewritten
(any ``Authorization`` the client sent is replaced), bodies (``Content-Length`` or chunked)
and responses (streams included) pass through unchanged. Test tooling, not a product part.
"""

from __future__ import annotations

import asyncio
import sys

HOST = "127.0.0.1"


async def _requests(
    client: asyncio.StreamReader, upstream: asyncio.StreamWriter, token: bytes
) -> None:
    while True:
        try:
            head = await client.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return  # the client closed the connection between requests
        request_line, *lines = head[:-4].split(b"\r\n")
        headers = [line for line in lines if not line.lower().startswith(b"authorization:")]
        headers.append(b"Authorization: Bearer " + token)
        upstream.write(b"\r\n".join([request_line, *headers]) + b"\r\n\r\n")
        length, chunked = 0, False
        for line in headers:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            elif name.strip().lower() == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
        if chunked:
            while True:
                size_line = await client.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                upstream.write(size_line + await client.readexactly(size + 2))
                if size == 0:
                    break
        elif length:
            upstream.write(await client.readexactly(length))
        await upstream.drain()


async def _responses(upstream: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
    while data := await upstream.read(65536):
        client.write(data)
        await client.drain()


async def _serve(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream_port: int, token: bytes
) -> None:
    up_reader, up_writer = await asyncio.open_connection(HOST, upstream_port)
    directions = [
        asyncio.ensure_future(_requests(reader, up_writer, token)),
        asyncio.ensure_future(_responses(up_reader, writer)),
    ]
    try:
        await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for direction in directions:
            direction.cancel()
            if direction.done() and not direction.cancelled():
                direction.exception()  # a reset connection ends it; nothing to report
        for stream in (writer, up_writer):
            stream.close()


async def main(listen_port: int, upstream_port: int, token: str) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, upstream_port, token.encode()), HOST, listen_port
    )
    sys.stderr.write(f"auth proxy: http://{HOST}:{listen_port} → :{upstream_port}\n")
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))

"""A loopback HTTP endpoint that fails in the ways a model endpoint fails.

The first path segment picks the failure, so one server gives each failure its own base URL
(``http://127.0.0.1:PORT/<failure>/v1``) and a client built against it — OpenAI-compatible or
not — meets the failure on whatever path it posts to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import AsyncIterator

__all__ = ["FAILURES", "misbehaving_endpoint"]

_ERROR_BODY = json.dumps({"error": {"message": "the kit's endpoint failed on purpose"}}).encode()

#: Failure name → what the endpoint does after reading the request.
FAILURES: dict[str, str] = {
    "http-500": "answers HTTP 500 with a JSON error body",
    "http-429": "answers HTTP 429 (Retry-After: 0.1) every time",
    "connection-reset": "resets the connection without answering",
    "malformed-json": "answers HTTP 200 with a truncated JSON body",
    "never-replies": "reads the request and never answers",
}


def _response(status: str, body: bytes, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", *headers]
    head += [f"Content-Length: {len(body)}", "Connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


_ANSWERS = {
    "http-500": _response("500 Internal Server Error", _ERROR_BODY),
    "http-429": _response("429 Too Many Requests", _ERROR_BODY, "Retry-After: 0.1"),
    "malformed-json": _response("200 OK", b'{"id": "chatcmpl-kit", "choices": [{"index": 0, "mes'),
}


async def _read_request(reader: asyncio.StreamReader) -> str:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip() or 0)
    await reader.readexactly(length)
    path = lines[0].split(" ")[1] if " " in lines[0] else "/"
    return path.lstrip("/").split("/", 1)[0]


def _reset(writer: asyncio.StreamWriter) -> None:
    sock: socket.socket | None = writer.get_extra_info("socket")
    if sock is not None:  # linger 0: close() sends RST instead of FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Endpoint:
    def __init__(self) -> None:
        self.writers: set[asyncio.StreamWriter] = set()
        self.closing = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            while True:  # keep-alive: a retrying client may reuse the connection
                failure = await _read_request(reader)
                if failure == "never-replies":
                    await self.closing.wait()  # until the endpoint shuts down
                    return
                if failure not in _ANSWERS:
                    _reset(writer)
                    return
                writer.write(_ANSWERS[failure])
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, IndexError):
            pass
        finally:
            self.writers.discard(writer)
            writer.transport.abort()


@contextlib.asynccontextmanager
async def misbehaving_endpoint() -> AsyncIterator[str]:
    """Serve the failures on loopback; yields ``http://127.0.0.1:PORT`` (append
    ``/<failure>/v1`` for a client's base URL)."""
    endpoint = _Endpoint()
    server = await asyncio.start_server(endpoint.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        endpoint.closing.set()
        server.close()
        for writer in list(endpoint.writers):
            writer.transport.abort()
        await server.wait_closed()

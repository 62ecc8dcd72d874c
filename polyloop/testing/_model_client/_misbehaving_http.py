"""A loopback HTTP endpoint that fails in the ways a model endpoint — or a proxy in front of
it — fails.

The first path segment picks the failure, so one server gives each failure its own base URL
(``http://127.0.0.1:PORT/<failure>/v1``) and a client built against it — OpenAI-compatible or
not — meets the failure on whatever path it posts to. Each failure has its own path, so the
suite can probe all of them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import AsyncIterator

__all__ = ["FAILURES", "SWEPT_FAILURES", "fail_from_now", "misbehaving_endpoint", "received"]

#: Seconds between two bytes of the ``trickle`` body: far below any per-read timeout.
TRICKLE_INTERVAL_S = 0.05


def _error_body(message: str, kind: str, code: str | int | None = None) -> bytes:
    error: dict[str, object] = {"message": message, "type": kind, "param": None, "code": code}
    return json.dumps({"error": error}).encode()


_ERROR_BODY = _error_body("the kit's endpoint failed on purpose", "server_error")

_COMPLETION = {
    "id": "chatcmpl-kit",
    "object": "chat.completion",
    "created": 0,
    "model": "kit",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "the kit's reply"},
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
}

#: HTTP client errors a model endpoint answers, with the error body OpenAI-compatible servers
#: send: none of them is worth retrying, and none is a reply.
_CLIENT_ERRORS: dict[int, tuple[str, str, str]] = {
    400: ("Bad Request", "invalid_request_error", "the request is not valid"),
    401: ("Unauthorized", "invalid_request_error", "incorrect API key provided"),
    403: ("Forbidden", "permission_denied", "the key may not use this model"),
    404: ("Not Found", "invalid_request_error", "the model does not exist"),
    422: ("Unprocessable Entity", "invalid_request_error", "messages: field required"),
}

#: Failure name → what the endpoint does after reading the request.
FAILURES: dict[str, str] = {
    "http-500": "answers HTTP 500 with a JSON error body",
    "http-429": "answers HTTP 429 (Retry-After: 0.1) every time",
    **{
        f"http-{status}": f"answers HTTP {status} {reason} with a JSON error body"
        for status, (reason, _, _) in _CLIENT_ERRORS.items()
    },
    "error-in-200": "answers HTTP 200 with an `error` object and no `choices`",
    "empty-choices": "answers HTTP 200 with an empty `choices` list",
    "html-502": "answers HTTP 502 with a proxy's text/html error page",
    "html-503": "answers HTTP 503 with a proxy's text/html error page",
    "connection-reset": "resets the connection without answering",
    "malformed-json": "answers HTTP 200 with a truncated JSON body",
    "cut-mid-reply": (
        "cuts its reply short: a streaming request (`stream: true` or Accept: "
        "text/event-stream) gets an SSE stream closed mid-event with no `[DONE]`, any other "
        "a JSON body closed before its Content-Length"
    ),
    "trickle": (
        "answers HTTP 200 and trickles a valid body a byte at a time, each well within a "
        "per-read timeout, the whole longer than failure_bound_s"
    ),
    "never-replies": "reads the request and never answers",
}


#: Failures swept over their parameters (issue 30): the kit serves each of these too.
#: ``after-<n>-<failure>`` answers good replies on its path while the kit makes ``n`` calls
#: with one client (its connections and caches warm), then fails; ``retry-after-<v>`` answers
#: 429 asking the client to wait ``v`` seconds (longer than any bound for the last);
#: ``cut-at-<k>`` cuts a JSON body after ``k`` bytes, or an SSE stream after ``k`` whole events
#: with no ``[DONE]``.
_SWEPT_STATUSES = {
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Site Overloaded",
}
SWEPT_FAILURES: dict[str, str] = {
    **{
        f"http-{status}": f"answers HTTP {status} {reason} with a JSON error body"
        for status, reason in _SWEPT_STATUSES.items()
    },
    **{
        f"retry-after-{wait}": f"answers HTTP 429 with Retry-After: {wait} every time"
        for wait in ("0", "1", "120")
    },
    **{
        f"cut-at-{cut}": (
            f"cuts a JSON reply after {cut} bytes of its body, an SSE stream after {cut} whole "
            "events (no [DONE])"
        )
        for cut in (0, 1, 2, 3, 100)
    },
    **{
        f"after-{n}-{failure}": f"answers {n} good replies on one client, then {FAILURES[failure]}"
        for n in (1, 3, 10)
        for failure in ("http-500", "error-in-200")
    },
}


def _response(status: str, body: bytes, *headers: str, kind: str = "application/json") -> bytes:
    head = [f"HTTP/1.1 {status}", f"Content-Type: {kind}", *headers]
    head += [f"Content-Length: {len(body)}", "Connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


def _html_page(status: int, reason: str) -> bytes:
    return (
        f"<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n"
        f"<center><h1>{status} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n"
        "</body>\r\n</html>\r\n"
    ).encode("ascii")


_ANSWERS = {
    "http-500": _response("500 Internal Server Error", _ERROR_BODY),
    "http-429": _response("429 Too Many Requests", _ERROR_BODY, "Retry-After: 0.1"),
    **{
        f"http-{status}": _response(f"{status} {reason}", _error_body(message, kind, status))
        for status, (reason, kind, message) in _CLIENT_ERRORS.items()
    },
    "error-in-200": _response(
        "200 OK",
        json.dumps(
            {"error": {"message": "the upstream model failed", "type": "server_error", "code": 500}}
        ).encode(),
    ),
    "empty-choices": _response(
        "200 OK", json.dumps({**_COMPLETION, "choices": []}).encode(), kind="application/json"
    ),
    "html-502": _response("502 Bad Gateway", _html_page(502, "Bad Gateway"), kind="text/html"),
    "html-503": _response(
        "503 Service Temporarily Unavailable",
        _html_page(503, "Service Temporarily Unavailable"),
        kind="text/html",
    ),
    "malformed-json": _response("200 OK", b'{"id": "chatcmpl-kit", "choices": [{"index": 0, "mes'),
    **{
        f"http-{status}": _response(
            f"{status} {reason}", _error_body(reason.lower(), "server_error", status)
        )
        for status, reason in _SWEPT_STATUSES.items()
    },
    **{
        f"retry-after-{wait}": _response(
            "429 Too Many Requests", _ERROR_BODY, f"Retry-After: {wait}"
        )
        for wait in ("0", "1", "120")
    },
}
_GOOD = _response("200 OK", json.dumps(_COMPLETION).encode())


def _sse_event(content: str, finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-kit",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "kit",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _cut_stream() -> bytes:
    """An SSE reply cut mid-event: two whole chunks, half of a third, no ``[DONE]``; the body
    has no length (the connection's end is its end), so only the stream itself shows the cut."""
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    third = _sse_event(" reply", "stop")
    return head + _sse_event("the") + _sse_event(" kit's") + third[: len(third) // 2]


def _stream_cut_after(events: int) -> bytes:
    """An SSE reply of ``events`` whole chunks, then the end of the connection: no ``[DONE]``,
    no ``finish_reason``."""
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\n\r\n"
    ).encode("ascii")
    return head + b"".join(_sse_event(f"part {n} ") for n in range(events))


def _body_cut_after(size: int) -> bytes:
    """A JSON reply whose body ends after ``size`` bytes, before its Content-Length."""
    whole = _response("200 OK", json.dumps(_COMPLETION).encode())
    body = len(json.dumps(_COMPLETION))
    return whole[: len(whole) - body + min(size, body - 1)]


def _cut_body() -> bytes:
    """A JSON reply closed before its Content-Length: half of a whole completion."""
    whole = _response("200 OK", json.dumps(_COMPLETION).encode())
    return whole[: len(whole) - len(json.dumps(_COMPLETION)) // 2]


class _Request:
    def __init__(self, failure: str, headers: dict[str, str], body: bytes) -> None:
        self.failure = failure
        self.headers = headers
        self.body = body

    @property
    def wants_a_stream(self) -> bool:
        if "text/event-stream" in self.headers.get("accept", ""):
            return True
        try:
            payload = json.loads(self.body)
        except ValueError:
            return False
        return isinstance(payload, dict) and payload.get("stream") is True


async def _read_request(reader: asyncio.StreamReader) -> _Request:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length") or 0))
    path = lines[0].split(" ")[1] if " " in lines[0] else "/"
    return _Request(path.lstrip("/").split("/", 1)[0], headers, body)


def _reset(writer: asyncio.StreamWriter) -> None:
    sock: socket.socket | None = writer.get_extra_info("socket")
    if sock is not None:  # linger 0: close() sends RST instead of FIN
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Endpoint:
    def __init__(self, trickle_s: float, golden: tuple[bytes, ...] = ()) -> None:
        self.trickle_s = trickle_s
        self.golden = golden
        self.golden_served = 0  # replies of the ``golden-all`` path, served in turn
        self.writers: set[asyncio.StreamWriter] = set()
        self.handlers: set[asyncio.Task[None]] = set()
        self.closing = asyncio.Event()
        self.failing: set[str] = set()  # the ``after-<n>-`` paths switched to their failure
        self.received: list[tuple[str, bytes]] = []  # (path's first segment, body), as they came

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.handlers.add(task)
        self.writers.add(writer)
        try:
            while True:  # keep-alive: a retrying client may reuse the connection
                request = await _read_request(reader)
                self.received.append((request.failure, request.body))
                failure = self._failure_now(request.failure)
                if failure == "good" or failure.startswith(("golden-", "request-")):
                    writer.write(self._good(failure))
                    await writer.drain()
                    continue
                if failure.startswith("cut-at-"):
                    cut = int(failure.removeprefix("cut-at-"))
                    stream = request.wants_a_stream
                    writer.write(_stream_cut_after(cut) if stream else _body_cut_after(cut))
                    await writer.drain()
                    return
                if failure == "never-replies":
                    await self.closing.wait()  # until the endpoint shuts down
                    return
                if failure == "trickle":
                    await self._trickle(writer)
                    return
                if failure == "cut-mid-reply":
                    writer.write(_cut_stream() if request.wants_a_stream else _cut_body())
                    await writer.drain()
                    return  # closes the connection mid-reply
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
            if task is not None:
                self.handlers.discard(task)

    def _good(self, failure: str) -> bytes:
        """A whole reply: the kit's own, the ``golden-<i>`` body, or (``golden-all``) each
        golden body in turn."""
        if failure == "golden-all" and self.golden:
            index, self.golden_served = self.golden_served, self.golden_served + 1
            return _response("200 OK", self.golden[index % len(self.golden)])
        number = failure.removeprefix("golden-")
        if number.isdigit() and int(number) < len(self.golden):
            return _response("200 OK", self.golden[int(number)])
        return _GOOD

    def _failure_now(self, failure: str) -> str:
        """``good`` on an ``after-<n>-<failure>`` path until :func:`fail_from_now` switched it
        (after the kit's ``n`` calls: a client's own retries do not count), then its
        ``<failure>``; any other failure as it is."""
        if not failure.startswith("after-"):
            return failure
        then = failure.removeprefix("after-").partition("-")[2]
        return then if failure in self.failing else "good"

    async def _trickle(self, writer: asyncio.StreamWriter) -> None:
        """A valid completion preceded by enough whitespace (valid JSON) to take ``trickle_s``,
        sent a byte every :data:`TRICKLE_INTERVAL_S`."""
        padding = int(self.trickle_s / TRICKLE_INTERVAL_S) + 1
        body = b" " * padding + json.dumps(_COMPLETION).encode()
        writer.write(_response("200 OK", body)[: -len(body)])
        await writer.drain()
        for index in range(padding):
            if self.closing.is_set():
                return
            writer.write(body[index : index + 1])
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), TRICKLE_INTERVAL_S)
        if not self.closing.is_set():
            writer.write(body[padding:])
            await writer.drain()


_SERVING: dict[str, _Endpoint] = {}


def fail_from_now(base_url: str) -> None:
    """Switch the ``after-<n>-<failure>`` path of ``base_url`` (``<root>/<path>/v1``) to its
    failure."""
    root, path = base_url.rsplit("/", 2)[:2]
    _SERVING[root].failing.add(path)


def received(root: str) -> list[tuple[str, bytes]]:
    """Every request the endpoint at ``root`` has received, in order: the first segment of its
    path (the failure it asked for) and its body."""
    return list(_SERVING[root].received)


@contextlib.asynccontextmanager
async def misbehaving_endpoint(
    *, trickle_s: float = 1.0, golden: tuple[bytes, ...] = ()
) -> AsyncIterator[str]:
    """Serve the failures on loopback; yields ``http://127.0.0.1:PORT`` (append
    ``/<failure>/v1`` for a client's base URL). ``trickle_s`` is how long the ``trickle`` body
    takes in all. The ``golden`` bodies are served whole on ``golden-<i>``, and each in turn on
    ``golden-all``; ``request-<i>`` answers like ``good`` (for a client whose request is read back
    with :func:`received`)."""
    endpoint = _Endpoint(trickle_s, golden)
    server = await asyncio.start_server(endpoint.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    root = f"http://127.0.0.1:{port}"
    _SERVING[root] = endpoint
    try:
        yield root
    finally:
        del _SERVING[root]
        endpoint.closing.set()
        server.close()
        for writer in list(endpoint.writers):
            writer.transport.abort()
        if endpoint.handlers:
            await asyncio.wait(set(endpoint.handlers), timeout=1.0)
        await server.wait_closed()

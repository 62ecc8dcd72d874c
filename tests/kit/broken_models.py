"""Model clients written the way teams write them — defensive parsing, a per-read timeout, a
streaming parser, a conversation cache — each with one bug the kit's first failure catalogue and
one-call mutation probe could not see, beside a correct twin.

Every one of them keeps the five old endpoint failures (500, 429, reset, truncated JSON, no
answer): the old kit reported them all ``held``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import urllib.parse
from typing import Any

from polyloop.testing import ModelSamples
from polyloop.types import Message, ModelReply
from tests.kit.broken import MODEL_SAMPLES, HttpModel, ReferenceModel

__all__ = [
    "AppendsTheLastReplyToTheCallersList",
    "DeadlineHttpModel",
    "EmptyTextWhenNoChoices",
    "ErrorMessageAsTextOn4xx",
    "NormalisesTheCachedPrefixInPlace",
    "PerReadTimeout",
    "RemembersAConversationByCopy",
    "RetriesClientErrorsForever",
    "ReturnsWhatTheCutStreamHad",
    "StreamingHttpModel",
    "TranscribesAfterReturning",
    "opt_in",
]


def opt_in(factory: Any) -> ModelSamples:
    """The matrix's samples with the failing-client factory given (a 2 s bound)."""
    return dataclasses.replace(MODEL_SAMPLES, failing_client_factory=factory, failure_bound_s=2.0)


# ------------------------------------------------------------- messages across later calls


class RemembersAConversationByCopy(ReferenceModel):
    """Correct: keeps the last conversation (for a debug view), as a copy of its own."""

    def __init__(self) -> None:
        self.last: list[Message] = []

    async def complete(self, messages: Any) -> ModelReply:
        reply = await super().complete(messages)
        self.last = [*messages, Message(role="assistant", content=reply.text)]
        return reply


class AppendsTheLastReplyToTheCallersList(ReferenceModel):
    """Keeps a reference to the caller's list and writes the previous reply into that
    "transcript" lazily, at the start of the next call — after the first call was checked."""

    def __init__(self) -> None:
        self.pending: tuple[list[Message], ModelReply] | None = None

    async def complete(self, messages: Any) -> ModelReply:
        if self.pending is not None:
            transcript, previous = self.pending
            transcript.append(Message(role="assistant", content=previous.text))
        reply = await super().complete(messages)
        self.pending = (messages, reply)
        return reply


class NormalisesTheCachedPrefixInPlace(ReferenceModel):
    """Caches the first conversation as its prompt-cache prefix (the caller's list itself) and,
    on each later call, folds the system message into the first user message of that cached
    list in place, the way some endpoints want it."""

    def __init__(self) -> None:
        self.prefix: list[Message] | None = None

    async def complete(self, messages: Any) -> ModelReply:
        if self.prefix is None:
            self.prefix = messages
        elif self.prefix and self.prefix[0].role == "system" and len(self.prefix) > 1:
            system = self.prefix.pop(0)
            first = self.prefix[0]
            self.prefix[0] = Message(role=first.role, content=f"{system.content}\n{first.content}")
        return await super().complete(messages)


class TranscribesAfterReturning(ReferenceModel):
    """Records the transcript in a background task, which appends the reply to the caller's
    list once ``complete`` has returned — after a one-call probe compared it."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()

    async def complete(self, messages: Any) -> ModelReply:
        reply = await super().complete(messages)
        task = asyncio.create_task(self._transcribe(messages, reply))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return reply

    async def _transcribe(self, messages: list[Message], reply: ModelReply) -> None:
        messages.append(Message(role="assistant", content=reply.text))


# ------------------------------------------------------------- the widened failure catalogue


class EmptyTextWhenNoChoices(HttpModel):
    """Defensive parsing: ``choices`` read with ``.get(..., [])``, so a 200 that carries an
    ``error`` object or an empty ``choices`` list becomes an empty reply."""

    def _reply(self, status: int, body: bytes) -> ModelReply:
        if status != 200:
            raise RuntimeError(f"the endpoint answered HTTP {status}")
        data = json.loads(body)
        choices = data.get("choices") or []
        if not choices:
            return ModelReply(text="")
        return ModelReply(text=choices[0]["message"]["content"])


class ErrorMessageAsTextOn4xx(HttpModel):
    """Gives a client error (other than 429) back as the reply, "so the model can correct its
    request" — the parser then reads the server's message as the model's answer."""

    def _reply(self, status: int, body: bytes) -> ModelReply:
        if 400 <= status < 500 and status != 429:
            return ModelReply(text=f"Error {status}: {json.loads(body)['error']['message']}")
        return super()._reply(status, body)


class RetriesClientErrorsForever(HttpModel):
    """Treats every 4xx but 429 as transient ("a proxy hiccup") and retries it without limit;
    429 and 5xx get three tries, as documented."""

    timeout_s = None  # each attempt bounds itself

    async def complete(self, messages: Any) -> ModelReply:
        budget, hiccup = 3, False
        while True:
            try:
                async with asyncio.timeout(0.5):
                    status, body = await self._post({"messages": [m.content for m in messages]})
            except TimeoutError:
                if hiccup:  # after a 4xx a slow answer is one more hiccup: still retried
                    continue
                raise
            if 400 <= status < 500 and status != 429:
                hiccup = True
                await asyncio.sleep(0.05)
                continue
            budget -= 1
            if status == 200 or budget == 0:
                return self._reply(status, body)
            await asyncio.sleep(0.05)


class DeadlineHttpModel(HttpModel):
    """Correct: the whole request — connect, head and every byte of the body — under one
    deadline (HttpModel's ``asyncio.timeout`` around ``_post``), spelled out as a twin of
    :class:`PerReadTimeout`."""


class PerReadTimeout(HttpModel):
    """A timeout on each read instead of one on the whole request: a silent server times out,
    a server that trickles its answer a byte at a time never does."""

    timeout_s = None

    async def _post(self, payload: object) -> tuple[int, bytes]:
        read_timeout = 0.5
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self.url.hostname, self.url.port), read_timeout
        )
        try:
            data = json.dumps(payload).encode()
            writer.write(
                f"POST {self.url.path} HTTP/1.1\r\nHost: {self.url.netloc}\r\n"
                f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), read_timeout)
            lines = head.decode("latin-1").split("\r\n")
            fields = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
            length = int(fields.get("content-length", "0"))
            body = b""
            while len(body) < length:
                chunk = await asyncio.wait_for(reader.read(length - len(body)), read_timeout)
                if not chunk:
                    raise ConnectionError("the connection closed mid-body")
                body += chunk
            return int(lines[0].split()[1]), body
        finally:
            writer.close()


class StreamingHttpModel:
    """Correct: asks for a server-sent-event stream (``"stream": true``) and joins the deltas;
    a stream that ends before ``data: [DONE]`` raises. A non-stream answer is read as JSON."""

    timeout_s = 0.5

    def __init__(self, base_url: str) -> None:
        self.url = urllib.parse.urlsplit(base_url.rstrip("/") + "/chat/completions")

    async def complete(self, messages: Any) -> ModelReply:
        async with asyncio.timeout(self.timeout_s):
            return await self._stream({"messages": [m.content for m in messages], "stream": True})

    def _ended_early(self, parts: list[str]) -> ModelReply:
        raise ConnectionError("the stream ended before data: [DONE]")

    async def _stream(self, payload: object) -> ModelReply:
        reader, writer = await asyncio.open_connection(self.url.hostname, self.url.port)
        try:
            data = json.dumps(payload).encode()
            writer.write(
                f"POST {self.url.path} HTTP/1.1\r\nHost: {self.url.netloc}\r\n"
                f"Accept: text/event-stream\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            fields = dict(line.lower().split(": ", 1) for line in head[1:] if ": " in line)
            status = int(head[0].split()[1])
            if status != 200:
                raise RuntimeError(f"the endpoint answered HTTP {status}")
            if not fields.get("content-type", "").startswith("text/event-stream"):
                body = await reader.readexactly(int(fields.get("content-length", "0")))
                return ModelReply(text=json.loads(body)["choices"][0]["message"]["content"])
            parts: list[str] = []
            while line := await reader.readline():
                text = line.decode().strip()
                if not text.startswith("data:"):
                    continue
                event = text.removeprefix("data:").strip()
                if event == "[DONE]":
                    return ModelReply(text="".join(parts))
                try:
                    chunk = json.loads(event)
                except ValueError:
                    continue  # a cut event: the missing [DONE] says so below
                parts.append(chunk["choices"][0]["delta"].get("content") or "")
            return self._ended_early(parts)
        finally:
            writer.close()


class ReturnsWhatTheCutStreamHad(StreamingHttpModel):
    """Treats the end of the connection as the end of the stream and returns the deltas it has:
    a reply cut mid-stream becomes a shorter reply."""

    def _ended_early(self, parts: list[str]) -> ModelReply:
        return ModelReply(text="".join(parts))


class SlowFirstCallSetup(HttpModel):
    """Correct: like the ``openai`` SDK's client, it builds its transport (an SSL context whose
    certificates load synchronously, ~0.05-0.5 s) on its first call, blocking the event loop
    that long once. Thirty of them started together block the loop for all thirty; each call's
    own time is still well inside the bound."""

    setup_s = 0.6
    retry_deadline_s = 1.0  # with the set-up, 1.6 s at most: inside a 2 s bound

    async def complete(self, messages: Any) -> ModelReply:
        if not getattr(self, "_ready", False):
            time.sleep(self.setup_s)  # noqa: ASYNC251  (synchronous, as loading a CA bundle is)
            self._ready = True
        async with asyncio.timeout(self.retry_deadline_s):  # the tries and the pause, in all
            try:
                return await super().complete(messages)
            except Exception:
                await asyncio.sleep(0.3)  # one retry after a pause, as the SDK's clients make
                return await super().complete(messages)


class HangsWhileOthersRun(HttpModel):
    """Breaks: every instance waits on one class-wide lock that the first holder keeps until
    the endpoint's answer outlasts it: with several clients at once, all but one hang."""

    locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}  # noqa: RUF012  (shared on purpose)

    async def complete(self, messages: Any) -> ModelReply:
        lock = self.locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            await asyncio.sleep(1.0)
            return await super().complete(messages)

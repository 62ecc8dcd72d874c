"""Model clients with a bug on the failure-parameter axis of issue 30, each beside its
correct twin. All are :class:`tests.kit.broken.HttpModel` (a minimal chat-completions client)
with one more feature, written as a downstream team would. The kit as it was met each failure
with one value — a fresh client, ``Retry-After: 0.1``, one status per class, a body cut in its
middle — and each of these raised on every one of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from typing import Any

from polyloop.types import ModelReply
from tests.kit.broken import HttpModel

_RETRIES = 3


class ServesTheLastReplyOnError(HttpModel):
    """Answers with the last good reply while the endpoint fails ("keep the agent going"): a
    fresh client has none and raises, one that has served a reply fabricates a turn."""

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self.last: ModelReply | None = None

    def _reply(self, status: int, body: bytes) -> ModelReply:
        try:
            self.last = super()._reply(status, body)
        except (RuntimeError, ValueError, LookupError, TypeError):
            if self.last is None:
                raise
        return self.last


class KeepsTheLastReplyForLogs(HttpModel):
    """The twin: it keeps the last good reply (for its logs) and still raises."""

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self.last: ModelReply | None = None

    def _reply(self, status: int, body: bytes) -> ModelReply:
        self.last = super()._reply(status, body)
        return self.last


class WaitsAsTheServerSays(HttpModel):
    """Retries a 429 after the ``Retry-After`` the server sends, three times — however long
    the server asks for, past any deadline of its own."""

    async def complete(self, messages: Any) -> ModelReply:
        payload = {"messages": [m.content for m in messages]}
        for _ in range(_RETRIES):
            async with asyncio.timeout(self.timeout_s):
                status, fields, body = await self._post_with_headers(payload)
            if status != 429:
                return self._reply(status, body)
            await asyncio.sleep(float(fields.get("retry-after", "1")))
        raise RuntimeError("still rate limited")


class WaitsWithinItsDeadline(HttpModel):
    """The twin: the same retries, within a 1.5 s deadline for the whole call."""

    deadline_s = 1.5

    async def complete(self, messages: Any) -> ModelReply:
        payload = {"messages": [m.content for m in messages]}
        end = time.monotonic() + self.deadline_s
        # One deadline over every try and pause: the sum of the tries' own timeouts is not one.
        async with asyncio.timeout(self.deadline_s):
            for _ in range(_RETRIES):
                async with asyncio.timeout(self.timeout_s):
                    status, fields, body = await self._post_with_headers(payload)
                if status != 429:
                    return self._reply(status, body)
                wait = float(fields.get("retry-after", "1"))
                if time.monotonic() + wait > end:  # a pause past the deadline: give up now
                    break
                await asyncio.sleep(wait)
        raise RuntimeError("still rate limited")


class TakesGatewayTimeoutAsSilence(HttpModel):
    """Reads a 504 Gateway Timeout as "the model had nothing to say": an empty reply."""

    def _reply(self, status: int, body: bytes) -> ModelReply:
        if status == 504:
            return ModelReply(text="")
        return super()._reply(status, body)


class RaisesOnGatewayTimeout(HttpModel):
    """The twin: a 504 is an error like any other status but 200."""


class TakesAnEmptyBodyAsSilence(HttpModel):
    """Reads the body to the end of the connection and takes an empty 200 body for an empty
    reply: a body cut before its first byte becomes a turn in which the model said nothing."""

    async def _post(self, payload: object) -> tuple[int, bytes]:
        reader, writer = await asyncio.open_connection(self.url.hostname, self.url.port)
        try:
            data = json.dumps(payload).encode()
            writer.write(
                f"POST {self.url.path} HTTP/1.1\r\nHost: {self.url.netloc}\r\n"
                f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            return int(head[0].split()[1]), await reader.read()
        finally:
            writer.close()

    def _reply(self, status: int, body: bytes) -> ModelReply:
        if status == 200 and not body.strip():
            return ModelReply(text="")
        return super()._reply(status, body)


class ReadsTheBodyToItsEnd(TakesAnEmptyBodyAsSilence):
    """The twin: reads to the end of the connection too, and an empty body is an error."""

    def _reply(self, status: int, body: bytes) -> ModelReply:
        return HttpModel._reply(self, status, body)


# --------------------------------------------------------------------------- size

_WINDOW = 200


class TrimsTheHistoryInPlace:
    """Keeps the conversation within a 200-message window by deleting the oldest messages of
    the list it was given ("the caller's history would overflow the context anyway")."""

    async def complete(self, messages: Any) -> ModelReply:
        if len(messages) > _WINDOW:
            del messages[: len(messages) - _WINDOW]
        return ModelReply(text=f"seen {len(messages)} messages")


class TrimsACopyOfTheHistory:
    """The twin: it trims a copy."""

    async def complete(self, messages: Any) -> ModelReply:
        window = list(messages)[-_WINDOW:]
        return ModelReply(text=f"seen {len(window)} messages")


class SummarisesLongMessagesInPlace:
    """Shortens a message over 65 536 characters in the caller's list ("summarise what will
    not fit") — so the log no longer says what the loop sent."""

    async def complete(self, messages: Any) -> ModelReply:
        for index, message in enumerate(messages):
            if len(message.content) > 65_536:
                messages[index] = type(message)(role=message.role, content=message.content[:1000])
        return ModelReply(text="ok")


class SummarisesACopy:
    """The twin: the shortened messages go into a new list."""

    async def complete(self, messages: Any) -> ModelReply:
        sent = [m if len(m.content) <= 65_536 else m.content[:1000] for m in messages]
        return ModelReply(text=f"sent {len(sent)}")


# --------------------------------------------------------------------------- golden responses


def _body(*contents: str) -> dict[str, Any]:
    choices = [
        {"index": n, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        for n, text in enumerate(contents)
    ]
    return {"id": "chatcmpl-kit", "object": "chat.completion", "choices": choices}


#: What HttpModel (which keeps only the text) must give for each body.
GOLDEN_RESPONSES = [
    (_body("first"), ModelReply(text="first")),
    (_body("the chosen one", "an alternative"), ModelReply(text="the chosen one")),
    (_body("日本語 😀"), ModelReply(text="日本語 😀")),
]


class ReadsTheLastChoice(HttpModel):
    """Takes the last of the ``choices`` ("the most refined one"): with ``n > 1`` or a proxy
    that appends, the run continues from a reply the model did not give first."""

    def _reply(self, status: int, body: bytes) -> ModelReply:
        if status != 200:
            raise RuntimeError(f"the endpoint answered HTTP {status}")
        return ModelReply(text=json.loads(body)["choices"][-1]["message"]["content"])


def golden_samples(factory: Any) -> Any:
    from tests.kit.broken import opt_in_model_samples

    return dataclasses.replace(opt_in_model_samples(factory), golden_responses=GOLDEN_RESPONSES)

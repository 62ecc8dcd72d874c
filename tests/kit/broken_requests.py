"""Model clients that send a request a real client could send by mistake, each with a correct
twin (``SendsTheRequest``): the breakers of ``model_client.sends_golden_requests``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from polyloop import Message, ModelReply
from polyloop.testing import GoldenRequest, ModelSamples
from tests.kit.broken import HttpModel

OPTIONS: dict[str, Any] = {"temperature": 0.2, "max_tokens": 64, "stop": ["END"], "seed": 7}
MESSAGES = [
    Message(role="system", content="be brief"),
    Message(role="user", content="6 × 7?\r\n\u2028ß"),
]
BODY = {
    "model": "m",
    "messages": [{"role": m.role, "content": m.content} for m in MESSAGES],
    **OPTIONS,
}


class SendsTheRequest(HttpModel):
    """Correct: the model, each message's role and content, every option as given."""

    def body(self, messages: Sequence[Message]) -> dict[str, Any]:
        wire = [{"role": m.role, "content": m.content} for m in messages]
        return {"model": "m", "messages": wire, **OPTIONS}

    async def complete(self, messages: Any) -> ModelReply:
        async with asyncio.timeout(self.timeout_s):
            status, body = await self._post(self.body(messages))
        return self._reply(status, body)


class DropsTemperature(SendsTheRequest):
    def body(self, messages: Sequence[Message]) -> dict[str, Any]:
        sent = super().body(messages)
        del sent["temperature"]
        return sent


class RenamesMaxTokens(SendsTheRequest):
    def body(self, messages: Sequence[Message]) -> dict[str, Any]:
        sent = super().body(messages)
        sent["max_completion_tokens"] = sent.pop("max_tokens")
        return sent


class RoleUnderAnotherKey(SendsTheRequest):
    def body(self, messages: Sequence[Message]) -> dict[str, Any]:
        sent = super().body(messages)
        sent["messages"] = [{"author": m.role, "content": m.content} for m in messages]
        return sent


class SeedAsAFloat(SendsTheRequest):
    def body(self, messages: Sequence[Message]) -> dict[str, Any]:
        return {**super().body(messages), "seed": 7.0}


class SendsOnlyTheLastMessage(SendsTheRequest):
    def body(self, messages: Sequence[Message]) -> dict[str, Any]:
        sent = super().body(messages)
        sent["messages"] = sent["messages"][-1:]
        return sent


class NormalisesLineEndings(SendsTheRequest):
    def body(self, messages: Sequence[Message]) -> dict[str, Any]:
        sent = super().body(messages)
        for message in sent["messages"]:
            message["content"] = message["content"].replace("\r\n", "\n")
        return sent


def request_samples(factory: Callable[[str], Any]) -> ModelSamples:
    """Samples that state one golden request, sent by a client ``factory`` builds."""
    return ModelSamples(
        messages=[Message(role="user", content="Say ok.")],
        golden_requests=[GoldenRequest(messages=MESSAGES, body=BODY, client_factory=factory)],
    )

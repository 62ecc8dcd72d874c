"""OpenAIChatModel keeps every ModelClient promise of the contract kit, against a loopback
chat-completions endpoint; its failure promise against the kit's misbehaving one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from polyloop.models import OpenAIChatModel
from polyloop.testing import GoldenRequest, ModelClientContract, ModelSamples
from polyloop.types import Message, ModelReply

_COMPLETION = json.dumps(
    {
        "id": "chatcmpl-contract",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer one chat-completions request with a fixed reply, then close the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(_COMPLETION)}\r\n\r\n".encode()
            + _COMPLETION
        )
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the client was cancelled mid-request (the cancellation promise)
    finally:
        writer.close()


def failing_openai_client(base_url: str) -> OpenAIChatModel:
    """The client as a user would configure it, with timeouts short enough for a test: one
    retry, so its whole-call deadline is 2 × 0.25 s + the 0.5 s pause = 1 s."""
    return OpenAIChatModel("m", base_url=base_url, api_key="k", max_retries=1, timeout_s=0.25)


def _completion(message: dict[str, object], **fields: object) -> dict[str, object]:
    body: dict[str, object] = {
        "id": "chatcmpl-golden",
        "object": "chat.completion",
        "created": 0,
        "model": "m-2026",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }
    return {**body, **fields}


# What each chat-completions response must give (reads_golden_responses).
GOLDEN_RESPONSES = [
    (
        _completion(
            {"role": "assistant", "content": "ok"},
            usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        ),
        ModelReply(
            text="ok",
            call_id="chatcmpl-golden",
            usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            model="m-2026",
            finish_reason="stop",
        ),
    ),
    (
        {
            **_completion({"role": "assistant", "content": '日本語 😀\n{"tool": "x"}'}),
            "id": "chatcmpl-2",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {"role": "assistant", "content": '日本語 😀\n{"tool": "x"}'},
                },
                {
                    "index": 1,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "the second choice"},
                },
            ],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 20,
                "total_tokens": 30,
                "completion_tokens_details": {"reasoning_tokens": 5},
                "cost": 0.25,
            },
        },
        ModelReply(
            text='日本語 😀\n{"tool": "x"}',
            call_id="chatcmpl-2",
            usage={
                "prompt_tokens": 10,
                "completion_tokens": 20,
                "total_tokens": 30,
                "completion_tokens_details.reasoning_tokens": 5,
                "cost": 0.25,
            },
            model="m-2026",
            finish_reason="length",
        ),
    ),
    (
        _completion(
            {"role": "assistant", "content": None, "reasoning_content": "thinking it over"},
            id="chatcmpl-3",
        ),
        ModelReply(
            text="",
            reasoning="thinking it over",
            call_id="chatcmpl-3",
            usage={},
            model="m-2026",
            finish_reason="stop",
        ),
    ),
]


def _configured(**options: object) -> Callable[[str], OpenAIChatModel]:
    def factory(base_url: str) -> OpenAIChatModel:
        return OpenAIChatModel(
            "m-2026", base_url=base_url, api_key="k", max_retries=1, timeout_s=0.25, options=options
        )

    return factory


_CONVERSATION = [
    Message(role="system", content="Answer with a number."),
    Message(role="user", content="6 × 7 = ?\n日本語 😀"),
    Message(role="assistant", content='{"tool": "calculator", "arguments": {"expression": "6*7"}}'),
    Message(role="user", content=""),
]

# What each call must send (sends_golden_requests): the model, every message's role and
# content, and every option the client was built with, type for type.
GOLDEN_REQUESTS = [
    GoldenRequest(
        messages=_CONVERSATION,
        body={
            "model": "m-2026",
            "messages": [{"role": m.role, "content": m.content} for m in _CONVERSATION],
            "temperature": 0.2,
            "max_tokens": 64,
            "stop": ["END", "\n\n"],
            "seed": 7,
            "top_p": 1,
        },
        client_factory=_configured(
            temperature=0.2, max_tokens=64, stop=["END", "\n\n"], seed=7, top_p=1
        ),
    ),
    GoldenRequest(
        messages=[Message(role="user", content="Say ok.")],
        body={"model": "m", "messages": [{"role": "user", "content": "Say ok."}]},
    ),
]


class TestOpenAIChatModelContract(ModelClientContract):
    @pytest_asyncio.fixture
    async def model_client(  # type: ignore[override]  # pytest types a fixture as an object
        self,
    ) -> AsyncIterator[OpenAIChatModel]:
        server = await asyncio.start_server(_answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            yield OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k")

    @pytest.fixture
    def model_samples(self) -> ModelSamples:
        return ModelSamples(
            messages=[Message(role="user", content="Say ok.")],
            failing_client_factory=failing_openai_client,
            # Its deadline is 1 s; 5 s leaves room for a loaded machine.
            failure_bound_s=5.0,
            # What each response must give, served to a client of the same factory.
            golden_responses=GOLDEN_RESPONSES,
            # What each call must send, read back by the kit's endpoint.
            golden_requests=GOLDEN_REQUESTS,
        )

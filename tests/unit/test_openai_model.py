"""OpenAIChatModel against a real HTTP endpoint on loopback (a tiny chat-completions server)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

import polyloop
from polyloop.models import OpenAIChatModel  # lazy: OpenAIChatModel imports openai when built
from polyloop.ports import DescribedModelClient, ModelDescription
from tests.conftest import require_extra

require_extra("openai")


@dataclass
class FakeEndpoint:
    """Answers POST /v1/chat/completions with queued (status, body) pairs; records requests."""

    responses: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append({"path": lines[0].split()[1], "json": json.loads(body)})
        status, payload = self.responses.pop(0)
        data = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()


@pytest_asyncio.fixture
async def endpoint() -> AsyncIterator[FakeEndpoint]:
    fake = FakeEndpoint()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    fake.base_url = f"http://127.0.0.1:{port}/v1"
    async with server:
        yield fake


def completion(
    text: str,
    *,
    id: str = "chatcmpl-1",
    model: str = "m",
    finish_reason: str = "stop",
    **message: Any,
) -> dict[str, Any]:
    return {
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": text, **message},
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


@pytest.mark.asyncio
async def test_reply_text_call_id_usage_and_reasoning_come_from_the_response(
    endpoint: FakeEndpoint,
) -> None:
    endpoint.responses.append(
        (
            200,
            completion(
                "hello", model="m-2026-01-01", finish_reason="length", reasoning_content="because"
            ),
        )
    )
    model = OpenAIChatModel("m", base_url=endpoint.base_url, api_key="k", max_retries=0)
    messages = [
        polyloop.Message(role="system", content="s"),
        polyloop.Message(role="user", content="ü"),
    ]

    reply = await model.complete(messages)

    assert reply == polyloop.ModelReply(
        text="hello",
        reasoning="because",
        call_id="chatcmpl-1",
        usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        model="m-2026-01-01",
        finish_reason="length",
    )
    sent = endpoint.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["json"]["messages"] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "ü"},
    ]
    assert messages == [
        polyloop.Message(role="system", content="s"),
        polyloop.Message(role="user", content="ü"),
    ]


@pytest.mark.asyncio
async def test_an_empty_response_id_becomes_none_never_the_empty_string(
    endpoint: FakeEndpoint,
) -> None:
    endpoint.responses.append((200, completion("x", id="")))
    model = OpenAIChatModel("m", base_url=endpoint.base_url, api_key="k", max_retries=0)

    reply = await model.complete([polyloop.Message(role="user", content="q")])

    assert reply.call_id is None


@pytest.mark.asyncio
async def test_a_server_error_surfaces_as_llm_error_in_a_run(endpoint: FakeEndpoint) -> None:
    endpoint.responses.append((500, {"error": {"message": "boom", "type": "server_error"}}))
    model = OpenAIChatModel("m", base_url=endpoint.base_url, api_key="k", max_retries=0)
    agent = polyloop.AgentDefinition(
        system_prompt="s",
        budget=polyloop.Budget(
            max_steps=3,
            max_executed_actions=3,
            max_consecutive_parse_failures=3,
            max_prompt_chars=1000,
        ),
        synthetic_observations=polyloop.SyntheticObservations(not_executed="n", env_error="e"),
    )

    class Parser:
        def parse(self, reply: polyloop.ModelReply) -> polyloop.ParsedReply:
            return polyloop.FinalAnswer(text=reply.text)

    class Executor:
        async def execute(self, action: polyloop.Action) -> polyloop.ActionOutcome:
            raise AssertionError("no action expected")

    result = await polyloop.run(agent, "g", model=model, parser=Parser(), executor=Executor())

    assert result.stop_reason is polyloop.StopReason.LLM_ERROR
    assert result.steps[0].llm_call_id is None
    assert len(endpoint.requests) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [429, 500])
async def test_max_retries_repeats_a_retryable_failure_then_the_reply_counts(
    endpoint: FakeEndpoint, status: int
) -> None:
    error = {"error": {"message": "busy", "type": "server_error"}}
    endpoint.responses += [(status, error), (status, error), (200, completion("third time"))]
    model = OpenAIChatModel("m", base_url=endpoint.base_url, api_key="k", max_retries=2)

    reply = await model.complete([polyloop.Message(role="user", content="hi")])
    await model.aclose()

    assert reply.text == "third time"
    assert len(endpoint.requests) == 3  # one attempt and the two retries docs/reference says


@pytest.mark.asyncio
async def test_a_client_error_is_not_retried(endpoint: FakeEndpoint) -> None:
    endpoint.responses.append((400, {"error": {"message": "bad", "type": "invalid_request"}}))
    model = OpenAIChatModel("m", base_url=endpoint.base_url, api_key="k", max_retries=2)

    with pytest.raises(Exception, match="bad"):
        await model.complete([polyloop.Message(role="user", content="hi")])
    await model.aclose()

    assert len(endpoint.requests) == 1


def test_bad_model_names_are_rejected_before_any_request() -> None:
    with pytest.raises(ValueError, match="model"):
        OpenAIChatModel("")


@pytest.mark.asyncio
async def test_async_with_closes_the_client_it_made(endpoint: FakeEndpoint) -> None:
    endpoint.responses.append((200, completion("hi")))
    async with OpenAIChatModel("m", base_url=endpoint.base_url, api_key="k") as model:
        await model.complete([polyloop.Message(role="user", content="x")])
        client = model._client
        assert not client.is_closed()

    assert client.is_closed()


@pytest.mark.asyncio
async def test_a_cost_in_the_usage_is_kept(endpoint: FakeEndpoint) -> None:
    body = completion("hi")
    body["usage"] = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "cost": 1e-4}
    endpoint.responses.append((200, body))
    model = OpenAIChatModel("m", base_url=endpoint.base_url, api_key="k")

    reply = await model.complete([polyloop.Message(role="user", content="x")])
    await model.aclose()

    assert reply.usage["cost"] == 1e-4
    assert reply.usage["total_tokens"] == 10


@pytest_asyncio.fixture
async def trickling_endpoint() -> AsyncIterator[str]:
    """Answers 200 with a valid completion whose body comes a byte every 50 ms for about 3 s:
    every read arrives well within any per-read timeout, the whole does not."""
    body = b" " * 60 + json.dumps(completion("too late")).encode()
    stop = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
            )
            for index in range(len(body)):
                if stop.is_set():
                    return
                writer.write(body[index : index + 1])
                await writer.drain()
                await asyncio.sleep(0.05)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/v1"
        stop.set()


@pytest.mark.asyncio
async def test_a_trickled_body_ends_at_the_whole_call_deadline(trickling_endpoint: str) -> None:
    """``timeout_s`` is the SDK's per-read timeout: a body trickled a byte at a time passes it
    and the call would take as long as the server likes. ``deadline_s`` bounds the whole call
    (by default every attempt's ``timeout_s`` plus the pauses between them)."""
    model = OpenAIChatModel(
        "m", base_url=trickling_endpoint, api_key="k", max_retries=0, timeout_s=0.3
    )
    assert model.deadline_s == 0.3
    loop = asyncio.get_running_loop()
    started = loop.time()

    with pytest.raises(TimeoutError, match=r"no reply within deadline_s=0\.3 s"):
        async with asyncio.timeout(2.5):  # the test's own bound: the body takes about 3 s
            await model.complete([polyloop.Message(role="user", content="x")])
    await model.aclose()

    assert loop.time() - started < 1.5


@pytest.mark.asyncio
async def test_an_explicit_deadline_bounds_the_call_whatever_the_per_read_timeout(
    trickling_endpoint: str,
) -> None:
    model = OpenAIChatModel(
        "m", base_url=trickling_endpoint, api_key="k", timeout_s=60.0, deadline_s=0.4
    )
    with pytest.raises(TimeoutError, match=r"deadline_s=0\.4 s"):
        async with asyncio.timeout(2.5):
            await model.complete([polyloop.Message(role="user", content="x")])
    await model.aclose()


def test_the_default_deadline_is_every_attempt_and_the_pauses_between() -> None:
    assert OpenAIChatModel("m", api_key="k").deadline_s == 3 * 60.0 + 0.5 + 1.0
    assert OpenAIChatModel("m", api_key="k", max_retries=0, timeout_s=10).deadline_s == 10
    assert OpenAIChatModel("m", api_key="k", max_retries=5, timeout_s=1).deadline_s == (
        6 + 0.5 + 1 + 2 + 4 + 8
    )
    assert OpenAIChatModel("m", api_key="k", timeout_s=None).deadline_s is None
    for bad in (0, -1.0, float("nan"), float("inf"), True, "5"):
        with pytest.raises(ValueError, match="deadline_s"):
            OpenAIChatModel("m", api_key="k", deadline_s=bad)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_an_empty_response_model_or_finish_reason_is_none_never_empty(
    endpoint: FakeEndpoint,
) -> None:
    endpoint.responses.append((200, completion("hi", model="", finish_reason="")))
    model = OpenAIChatModel("m", base_url=endpoint.base_url, api_key="k", max_retries=0)

    reply = await model.complete([polyloop.Message(role="user", content="x")])

    assert (reply.model, reply.finish_reason) == (None, None)


def test_describe_names_the_provider_the_model_the_request_parameters_and_the_server() -> None:
    model = OpenAIChatModel(
        "gpt-x",
        base_url="http://127.0.0.1:8123/v1",
        api_key="k",
        options={
            "temperature": 0.2,
            "top_p": 0.9,
            "max_completion_tokens": 300,
            "frequency_penalty": 0.1,
            "presence_penalty": 0.3,
            "seed": 7,
            "n": 2,
            "stop": "END",
            "user": "someone",  # not a request parameter of the conventions: left out
        },
    )

    described = model.describe()

    assert described == ModelDescription(
        provider="openai",
        model="gpt-x",
        parameters={
            "temperature": 0.2,
            "top_p": 0.9,
            "max_tokens": 300,
            "frequency_penalty": 0.1,
            "presence_penalty": 0.3,
            "seed": 7,
            "choice.count": 2,
            "stop_sequences": ("END",),
        },
        server_address="127.0.0.1",
        server_port=8123,
    )
    assert isinstance(model, DescribedModelClient)


def test_describe_without_a_base_url_names_the_openai_api_and_leaves_odd_options_out() -> None:
    model = OpenAIChatModel(
        "gpt-x", api_key="k", options={"stop": ["a", "b"], "temperature": None, "seed": {"x": 1}}
    )

    described = model.describe()

    assert (described.server_address, described.server_port) == ("api.openai.com", 443)
    assert described.parameters == {"stop_sequences": ("a", "b")}

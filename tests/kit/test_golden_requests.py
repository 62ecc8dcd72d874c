"""model_client.sends_golden_requests: what a client sends is judged against the stated body.

Each breaker sends a request a real client could send by mistake — a parameter dropped or
renamed, a role under another key, a number of another type, messages lost — and gets a
well-formed reply for it, so every promise that reads replies holds; the correct twin sends the
stated body and stays clean."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from polyloop import Message, ModelReply
from polyloop.testing import GoldenRequest, ModelSamples
from polyloop.testing._model_client._golden_requests import pattern_mismatch, request_problems
from tests.kit.broken_requests import (
    BODY,
    MESSAGES,
    DropsTemperature,
    NormalisesLineEndings,
    RenamesMaxTokens,
    RoleUnderAnotherKey,
    SeedAsAFloat,
    SendsOnlyTheLastMessage,
    SendsTheRequest,
)


def _requests(factory: Callable[[str], Any]) -> list[GoldenRequest]:
    return [GoldenRequest(messages=MESSAGES, body=BODY, client_factory=factory)]


@pytest.mark.asyncio
async def test_the_correct_twin_sends_the_stated_request() -> None:
    assert await request_problems(None, 2.0, _requests(SendsTheRequest)) == []


@pytest.mark.parametrize(
    ("breaker", "said"),
    [
        (DropsTemperature, "body.temperature: missing (expected float 0.2)"),
        (RenamesMaxTokens, "body.max_tokens: missing (expected int 64)"),
        (RoleUnderAnotherKey, "body.messages[0].role: missing (expected str 'system')"),
        (SeedAsAFloat, "body.seed: expected int 7, got float 7.0"),
        (SendsOnlyTheLastMessage, "body.messages: expected 2 items, got 1"),
        (NormalisesLineEndings, "body.messages[1].content: expected str"),
    ],
)
@pytest.mark.asyncio
async def test_each_breaker_is_told_which_field_it_sent_wrong(
    breaker: Callable[[str], Any], said: str
) -> None:
    (problem,) = await request_problems(None, 2.0, _requests(breaker))
    assert problem.startswith("golden_requests[0]: ")
    assert said in problem


@pytest.mark.asyncio
async def test_a_client_that_sends_nothing_is_told_so() -> None:
    class NeverSends(SendsTheRequest):
        async def complete(self, messages: Any) -> ModelReply:
            return ModelReply(text="made up")

    (problem,) = await request_problems(None, 2.0, _requests(NeverSends))
    assert problem == "golden_requests[0]: no request arrived"


@pytest.mark.asyncio
async def test_the_default_factory_builds_a_request_without_its_own() -> None:
    requests = [GoldenRequest(messages=MESSAGES, body=BODY)]
    assert await request_problems(SendsTheRequest, 2.0, requests) == []
    assert await request_problems(DropsTemperature, 2.0, requests) != []


@pytest.mark.parametrize(
    ("expected", "got", "said"),
    [
        (42, 42.0, "expected int 42, got float 42.0"),
        (1, True, "expected int 1, got bool True"),
        (True, 1, "expected bool True, got int 1"),
        (0.5, "0.5", "expected float 0.5, got str '0.5'"),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1]}}, "x.a.b: expected 2 items, got 1"),
        ({"a": None}, {"a": ""}, "x.a: expected NoneType None, got str ''"),
        ("e\u0301", "\u00e9", "expected str"),
        ([1], {"0": 1}, "expected a list of 1"),
        ({"a": 1}, [1], "expected an object"),
    ],
)
def test_the_pattern_compares_type_for_type(expected: object, got: object, said: str) -> None:
    found = pattern_mismatch(expected, got, "x")
    assert found is not None
    assert said in found


def test_the_pattern_leaves_unstated_keys_free() -> None:
    assert pattern_mismatch({"a": 1}, {"a": 1, "stream": False, "n": 1}, "x") is None
    assert pattern_mismatch({}, {"anything": math.pi}, "x") is None


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"messages": "hi", "body": {}}, TypeError),
        ({"messages": [], "body": {}}, ValueError),
        ({"messages": [None], "body": {}}, TypeError),
        ({"messages": MESSAGES, "body": None}, TypeError),
        ({"messages": MESSAGES, "body": '{"model": "m"}'}, TypeError),
        ({"messages": MESSAGES, "body": {}, "client_factory": "pkg:factory"}, TypeError),
    ],
)
def test_a_bad_golden_request_is_refused(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error, match="GoldenRequest"):
        GoldenRequest(**kwargs)


def test_golden_requests_need_a_factory_to_build_their_client() -> None:
    messages = [Message(role="user", content="hi")]
    with pytest.raises(ValueError, match="client_factory"):
        ModelSamples(messages=messages, golden_requests=[GoldenRequest(messages, {})])
    with pytest.raises(TypeError, match="golden_requests"):
        ModelSamples(messages=messages, golden_requests=[{"model": "m"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="golden_requests"):
        ModelSamples(messages=messages, golden_requests="x")  # type: ignore[arg-type]
    given = GoldenRequest(messages, {}, client_factory=SendsTheRequest)
    assert ModelSamples(messages=messages, golden_requests=[given]).golden_requests == (given,)

"""One type error in a ``ModelReply`` is one violated promise: each promise checks its own field
(issue #9: a wrong ``usage`` value showed under three unrelated promises)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from polyloop.testing import ModelClientContract
from polyloop.types import Message, ModelReply
from tests.kit.broken import MODEL_SAMPLES


class NotFiniteUsageModel:
    """A client whose reply was patched after construction: ``usage`` holds a NaN."""

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        reply = ModelReply(text="hello", call_id="c1")
        object.__setattr__(reply, "usage", {"cost": float("nan")})
        return reply


def run_promise(name: str) -> None:
    method = getattr(ModelClientContract, name)
    asyncio.run(method(ModelClientContract(), NotFiniteUsageModel(), MODEL_SAMPLES))


def test_the_whole_shape_is_the_promise_of_returns_a_model_reply() -> None:
    with pytest.raises(AssertionError, match="usage"):
        run_promise("test_returns_a_model_reply")


@pytest.mark.parametrize(
    "promise", ["test_call_id_is_never_empty_string", "test_does_not_mutate_messages"]
)
def test_other_promises_do_not_repeat_a_usage_type_error(promise: str) -> None:
    run_promise(promise)  # holds: the reply's usage is not what these promises are about


class PatchedFinishReasonModel:
    """A client whose reply was patched after construction: ``finish_reason`` is an int."""

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        reply = ModelReply(text="hello", call_id="c1", model="m")
        object.__setattr__(reply, "finish_reason", 1)
        return reply


def test_returns_a_model_reply_checks_the_reply_model_and_finish_reason() -> None:
    promise = ModelClientContract.test_returns_a_model_reply

    with pytest.raises(AssertionError, match=r"\.finish_reason must be None or a non-empty str"):
        asyncio.run(promise(ModelClientContract(), PatchedFinishReasonModel(), MODEL_SAMPLES))

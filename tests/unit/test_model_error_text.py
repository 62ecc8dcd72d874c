"""A model client's exception reaches the log as ``"ExcType: message"`` whatever it is (#24).

The step's ``model_error`` is built by :func:`polyloop._base._exception_text.exception_text`; an
exception whose ``__str__`` raises, a huge message or control characters must still stop the
run ``llm_error`` — before, a raising ``__str__`` made ``run()`` raise whatever it raised.
"""

from __future__ import annotations

import pytest

import polyloop
from polyloop import StopReason
from polyloop._base._exception_text import DEFAULT_LIMIT
from polyloop.stores import MemoryStore
from tests.unit._doubles import GOAL, agent, model_fails, script

pytestmark = pytest.mark.asyncio


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ itself failed")


async def _model_error(error: BaseException) -> str:
    store = MemoryStore()
    result = await polyloop.run(
        agent(), GOAL, store=store, run_id="r", **script(model_fails(error)).kwargs()
    )
    assert result.stop_reason is StopReason.LLM_ERROR
    log = await store.read_log("r")
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.LLM_ERROR
    (completed,) = log.steps
    assert completed.model_error is not None
    return completed.model_error


async def test_a_model_error_whose_str_raises_stops_llm_error() -> None:
    text = await _model_error(UnprintableError())

    assert text.startswith("UnprintableError")


async def test_a_huge_model_error_message_is_cut() -> None:
    text = await _model_error(RuntimeError("x" * 5_000_000))

    assert text.startswith("RuntimeError: xxx")
    assert len(text) < DEFAULT_LIMIT + 100


async def test_control_characters_in_a_model_error_are_escaped() -> None:
    text = await _model_error(RuntimeError("bad\x1b[31mred\x00\r"))

    assert text == "RuntimeError: bad\\x1b[31mred\\x00\\x0d"

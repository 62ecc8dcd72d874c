"""Exceptions the library does not handle: from the executor, the parser and the store they
propagate untouched, and the log ends at the last record written before the failure (SPEC §4)."""

from __future__ import annotations

import pytest

from polyloop import ModelReply
from tests.unit._doubles import (
    FailingStore,
    act,
    agent,
    final,
    kinds,
    run_to_end,
    script,
)

pytestmark = pytest.mark.asyncio


class ExecutorBug(Exception):
    pass


class ParserBug(Exception):
    pass


async def test_an_executor_exception_propagates_untouched_and_the_log_ends_at_the_action_intent():
    bug = ExecutorBug("executor is broken")
    seams = script(act(), act(error=bug), final())

    outcome = await run_to_end(seams, agent())

    assert outcome.error is bug
    assert kinds(outcome.log)[-1] == "action_intent"
    assert len(outcome.log.steps) == 1
    assert [e.sequence for e in outcome.events] == list(range(len(outcome.log)))


async def test_a_parser_exception_propagates_untouched_and_the_log_ends_at_the_model_reply():
    bug = ParserBug("parser is broken")
    seams = script(act(), final())
    seams.parser.decisions["reply-1"] = bug

    outcome = await run_to_end(seams, agent())

    assert outcome.error is bug
    assert kinds(outcome.log)[-1] == "model_replied"
    assert outcome.log.finished is None


@pytest.mark.parametrize("returned", [None, "an action", ModelReply(text="x")])
async def test_a_parser_returning_something_other_than_a_decision_is_a_type_error(returned):
    seams = script(final())
    seams.parser.parse = lambda reply: returned  # type: ignore[method-assign]

    outcome = await run_to_end(seams, agent())

    assert isinstance(outcome.error, TypeError)
    assert "DecisionParser.parse" in str(outcome.error)
    assert kinds(outcome.log)[-1] == "model_replied"


@pytest.mark.parametrize("failing_sequence", [0, 1, 2, 3, 4, 5])
async def test_an_exception_from_append_propagates_and_nothing_more_is_written(failing_sequence):
    error = OSError("disk full")
    store = FailingStore(lambda sequence, _: sequence == failing_sequence, error)

    outcome = await run_to_end(script(act(), final()), agent(), store=store)

    assert outcome.error is error
    assert len(outcome.log) == failing_sequence
    assert [s for s, _ in store.attempts][-1] == failing_sequence
    assert [e.sequence for e in outcome.events] == list(range(failing_sequence))

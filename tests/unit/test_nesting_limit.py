"""One nesting limit for the parser, ``Action`` and the record encoder (issue #11).

A reply nested ~990 deep parsed, then the encoder overflowed the stack: ``run()`` raised
``RecursionError`` with the log at ``model_replied``, and ``resume()`` failed the same way.
"""

from __future__ import annotations

import pytest

import polyloop
from polyloop import (
    MAX_NESTING,
    Action,
    ModelReply,
    RunStarted,
    StopReason,
    record_from_json,
)
from polyloop.models import ScriptedModel
from polyloop.parsers import JsonToolCallParser
from polyloop.stores import MemoryStore
from tests.unit._doubles import ForbiddenExecutor, agent


def nested(levels: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def call(levels: int) -> ModelReply:
    """A tool call whose arguments are ``nested(levels)``, written by hand: json.dumps itself
    overflows the stack long before 990 levels."""
    arguments = '{"a": ' * (levels - 1) + "{}" + "}" * (levels - 1)
    return ModelReply(text=f'{{"tool": "t", "arguments": {arguments}}}')


def test_arguments_at_the_limit_are_an_action() -> None:
    decision = JsonToolCallParser().parse(call(MAX_NESTING))

    assert isinstance(decision, Action)
    assert decision.tool_args == nested(MAX_NESTING)


@pytest.mark.parametrize("levels", [MAX_NESTING + 1, 500, 990])
def test_arguments_past_the_limit_are_invalid_with_feedback_naming_it(levels: int) -> None:
    decision = JsonToolCallParser().parse(call(levels))

    assert isinstance(decision, polyloop.InvalidDecision)
    assert f"nested deeper than {MAX_NESTING} levels" in decision.feedback


def test_an_out_of_range_number_gets_feedback_about_the_number_not_nesting() -> None:
    decision = JsonToolCallParser().parse(
        ModelReply(text='{"tool": "t", "arguments": {"x": 1e400}}')
    )

    assert isinstance(decision, polyloop.InvalidDecision)
    assert "out of range" in decision.feedback
    assert "nested" not in decision.feedback


def test_action_refuses_tool_args_past_the_limit() -> None:
    with pytest.raises(ValueError, match=rf"tool_args is nested deeper than {MAX_NESTING}"):
        Action(text="x", tool_args=nested(MAX_NESTING + 1))


def test_the_encoder_refuses_a_too_deep_record_with_a_value_error() -> None:
    record = RunStarted(
        run_id="r", goal="g", parameters=nested(2000), parameters_hash="h", started_at="t"
    )

    with pytest.raises(ValueError, match="nested deeper"):
        record.to_json()


def test_a_record_at_the_limit_round_trips() -> None:
    record = polyloop.ActionIntent(
        step_index=0, action=Action(text="x", tool_args=nested(MAX_NESTING))
    )

    assert record_from_json(record.to_json()) == record


@pytest.mark.asyncio
async def test_a_run_whose_model_nests_990_deep_records_a_parse_error_and_finishes() -> None:
    store = MemoryStore()
    definition = agent(max_consecutive_parse_failures=1)

    result = await polyloop.run(
        definition,
        "goal",
        model=ScriptedModel([call(990)]),
        parser=JsonToolCallParser(),
        executor=ForbiddenExecutor(),
        store=store,
        run_id="deep",
    )

    assert result.stop_reason is StopReason.PARSE_FAILED_REPEATEDLY
    assert "nested deeper" in (result.steps[0].parse_error or "")
    assert (await store.read_log("deep")).finished is not None


@pytest.mark.asyncio
async def test_a_record_made_circular_after_construction_is_a_value_error_writing_nothing() -> None:
    # The record encoder skips the C encoder's circular check (a quarter of its time): nothing a
    # record is built from can hold a cycle, but a caller can mutate tool_args afterwards.
    action = Action(text="x", tool_args={"a": {}})
    assert action.tool_args is not None
    action.tool_args["a"]["self"] = action.tool_args
    record = polyloop.ActionIntent(step_index=0, action=action)
    store = MemoryStore()

    with pytest.raises(ValueError, match="nested too deeply or circular"):
        record.to_json()
    with pytest.raises(ValueError, match="nested too deeply or circular"):
        await store.append("r", record, sequence=0)
    assert await store.run_ids() == []

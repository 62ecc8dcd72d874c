"""What each path records (the table in SPEC §2), asserted field by field, and what the model
receives (the history, SPEC §4)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from polyloop import (
    ActionStatus,
    Message,
    ModelCallIntent,
    StepCompleted,
    StepRecord,
    parameters_hash,
)
from tests.unit._doubles import (
    ENV_ERROR_TEXT,
    GOAL,
    NOT_EXECUTED_TEXT,
    SYSTEM_PROMPT,
    act,
    agent,
    final,
    invalid,
    model_fails,
    run_to_end,
    script,
    without_wall_time,
)

pytestmark = pytest.mark.asyncio

OPENING = len(SYSTEM_PROMPT) + len(GOAL)
REPLY = "réponse ✓ — 🦀"  # code points, not bytes, are counted
REASONING = "let me think 🤔"


async def only_step(*specs, **agent_kwargs) -> tuple[StepRecord, StepCompleted]:
    outcome = await run_to_end(script(*specs), agent(**agent_kwargs))
    completed = outcome.log.steps[-1]
    return without_wall_time([completed.step])[0], completed


# --------------------------------------------------------------------------- the table

# SPEC §2's table, written once here and independently of the product: what every row shares,
# then what a reply and a parse add. Each test names its row and adds what the row leaves open.
EMPTY_STEP: dict[str, Any] = {
    "step_index": 0,
    "raw_output": "",
    "response_chars": 0,
    "reasoning_chars": 0,
    "action": None,
    "parse_ok": False,
    "parse_error": None,
    "observation": "",
    "observation_is_synthetic": False,
    "observation_truncated_chars": 0,
    "prompt_chars": OPENING,
    "llm_call_id": None,
    "step_wall_ms": 0,
}
ROWS = ("llm_error", "invalid decision", "final answer", "action")


def table_row(row: str, *, reasoning: str = "", **row_fields: Any) -> StepRecord:
    """The step SPEC §2's ``row`` records for a reply ``REPLY`` (call id ``call-0``)."""
    assert row in ROWS
    replied = row != "llm_error"
    reply: dict[str, Any] = (
        {
            "raw_output": REPLY,
            "response_chars": len(REPLY),
            "reasoning_chars": len(reasoning),
            "llm_call_id": "call-0",
        }
        if replied
        else {}
    )
    parsed = {"parse_ok": row in ("final answer", "action")}
    return StepRecord(**{**EMPTY_STEP, **reply, **parsed, **row_fields})


async def test_a_failed_model_call_records_an_empty_step_with_no_call_id_and_the_error():
    step, completed = await only_step(model_fails(TimeoutError("no answer in 30 s")))

    assert step == table_row("llm_error")
    assert completed.model_error == "TimeoutError: no answer in 30 s"
    assert completed.executor_observation is None


async def test_an_invalid_decision_records_the_reply_and_the_feedback():
    spec = invalid("use a code block", reply_text=REPLY, reasoning=REASONING)

    step, completed = await only_step(spec, max_consecutive_parse_failures=1)

    assert step == table_row(
        "invalid decision", reasoning=REASONING, parse_error="use a code block"
    )
    assert completed.model_error is None
    assert completed.executor_observation is None


async def test_a_final_answer_records_the_reply_and_no_observation():
    step, completed = await only_step(final("done", reply_text=REPLY))

    assert step == table_row("final answer")
    assert completed.model_error is None
    assert completed.executor_observation is None


async def test_an_executed_action_records_the_action_and_the_executors_observation():
    spec = act(
        observation="stdout: 3 rows",
        completion=True,
        truncated=17,
        tool_name="sql",
        tool_args={"query": "select 1", "limit": (1, 2)},
        reply_text=REPLY,
    )

    step, completed = await only_step(spec)

    assert step == table_row(
        "action",
        action="action-0",
        observation="stdout: 3 rows",
        observation_truncated_chars=17,
        tool_name="sql",
        tool_args_json='{"limit":[1,2],"query":"select 1"}',
        action_status=ActionStatus.EXECUTED,
        env_reported_completion=True,
    )
    assert completed.executor_observation is None


@pytest.mark.parametrize(
    ("status", "synthetic"),
    [(ActionStatus.NOT_EXECUTED, NOT_EXECUTED_TEXT), (ActionStatus.ENV_ERROR, ENV_ERROR_TEXT)],
)
async def test_an_action_that_did_not_execute_records_the_synthetic_text_and_keeps_the_executors(
    status, synthetic
):
    spec = act(status, observation="no such tool 'sqll'", truncated=5, reply_text=REPLY)

    step, completed = await only_step(spec, max_steps=1)

    assert step == table_row(
        "action",
        action="action-0",
        observation=synthetic,
        observation_is_synthetic=True,
        action_status=status,
    )
    assert completed.executor_observation == "no such tool 'sqll'"


async def test_a_model_reply_without_a_call_id_records_none():
    step, _ = await only_step(final(call_id=None))

    assert step.llm_call_id is None


async def test_step_indexes_count_from_zero_across_every_kind_of_step():
    outcome = await run_to_end(
        script(invalid(), act(ActionStatus.NOT_EXECUTED), act(), final()), agent()
    )

    assert [c.step.step_index for c in outcome.log.steps] == [0, 1, 2, 3]


# --------------------------------------------------------------------------- the history


async def test_the_model_first_receives_the_system_prompt_and_the_goal_only():
    seams = script(final())

    await run_to_end(seams, agent())

    assert seams.model.received == [
        [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=GOAL)]
    ]


async def test_each_step_adds_the_reply_then_the_observation_or_the_feedback():
    seams = script(
        act(observation="it ran"),
        invalid("say it again"),
        act(ActionStatus.NOT_EXECUTED, observation="refused by the executor"),
        act(ActionStatus.EXECUTED, observation="ran again"),
        final(),
    )

    await run_to_end(seams, agent())

    assert seams.model.received[-1] == [
        Message(role="system", content=SYSTEM_PROMPT),
        Message(role="user", content=GOAL),
        Message(role="assistant", content="reply-0"),
        Message(role="user", content="it ran"),
        Message(role="assistant", content="reply-1"),
        Message(role="user", content="say it again"),
        Message(role="assistant", content="reply-2"),
        Message(role="user", content=NOT_EXECUTED_TEXT),
        Message(role="assistant", content="reply-3"),
        Message(role="user", content="ran again"),
    ]


async def test_reasoning_never_enters_the_history():
    seams = script(act(reasoning="SECRET CHAIN OF THOUGHT"), final())

    await run_to_end(seams, agent())

    assert all("SECRET" not in m.content for m in seams.model.received[-1])
    assert len(seams.model.received[-1]) == 4


async def test_a_not_executed_action_keeps_the_executors_text_out_of_the_history():
    seams = script(act(ActionStatus.NOT_EXECUTED, observation="EXECUTOR DETAIL"), final())

    outcome = await run_to_end(seams, agent())

    assert seams.model.received[-1][-1] == Message(role="user", content=NOT_EXECUTED_TEXT)
    assert all("EXECUTOR DETAIL" not in m.content for m in seams.model.received[-1])
    assert outcome.log.steps[0].executor_observation == "EXECUTOR DETAIL"


async def test_prompt_chars_is_the_size_of_what_the_model_received_in_intent_and_step_alike():
    seams = script(act(observation="ö" * 7), invalid("nö"), act(ActionStatus.ENV_ERROR))

    outcome = await run_to_end(seams, agent())

    sent = [sum(len(m.content) for m in messages) for messages in seams.model.received]
    intents = [r.prompt_chars for r in outcome.log.intents if isinstance(r, ModelCallIntent)]
    assert len(sent) == 3
    assert intents == sent
    assert [c.step.prompt_chars for c in outcome.log.steps] == sent


# --------------------------------------------------------------------------- start and finish


async def test_run_started_records_the_goal_and_the_parameter_snapshot_with_its_hash():
    the_agent = agent(max_steps=4)

    outcome = await run_to_end(script(final()), the_agent)

    started = outcome.log.started
    assert started is not None
    assert (started.run_id, started.goal) == ("run-1", GOAL)
    assert started.parameters == the_agent.parameters()
    assert started.parameters_hash == parameters_hash(the_agent.parameters())


async def test_start_and_finish_are_stamped_in_utc_with_milliseconds_and_z():
    outcome = await run_to_end(script(final()), agent())

    assert outcome.log.started is not None
    assert outcome.log.finished is not None
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    assert re.fullmatch(stamp, outcome.log.started.started_at)
    assert re.fullmatch(stamp, outcome.log.finished.finished_at)

"""One scenario per stop reason, through the public ``polyloop.run`` / ``polyloop.resume``,
plus the boundaries of the stopping order A–H (SPEC §4, docs/design/0001-stopping-order.md)."""

from __future__ import annotations

import asyncio

import pytest

import polyloop
from polyloop import ActionStatus, StopReason, Tool, ToolRegistry
from polyloop.events import MemorySink
from polyloop.stores import MemoryStore
from tests.unit._doubles import (
    GOAL,
    SYSTEM_PROMPT,
    Crash,
    ForbiddenModel,
    GatedModel,
    act,
    agent,
    final,
    forbidden_seams,
    invalid,
    kinds,
    model_fails,
    run_to_end,
    script,
)

pytestmark = pytest.mark.asyncio

MARKER_TOOLS = ToolRegistry(
    [
        Tool(name="submit", description="hand in the result", completion_marker=True),
        Tool(name="search", description="look something up"),
    ]
)


# --------------------------------------------------------------------------- task_completed


async def test_an_executed_action_whose_environment_reports_completion_ends_task_completed():
    seams = script(act(), act(completion=True), act())

    outcome = await run_to_end(seams, agent())

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.TASK_COMPLETED
    assert len(outcome.result.steps) == 2
    assert outcome.result.executed_actions == 2


async def test_completing_on_the_last_allowed_step_is_task_completed_not_step_budget():
    seams = script(act(), act(completion=True))

    outcome = await run_to_end(seams, agent(max_steps=2))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.TASK_COMPLETED
    assert len(outcome.result.steps) == 2


async def test_completing_with_the_last_allowed_executed_action_is_task_completed():
    seams = script(act(), act(completion=True))

    outcome = await run_to_end(seams, agent(max_executed_actions=2))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.TASK_COMPLETED


async def test_an_executed_completion_marker_tool_ends_task_completed():
    seams = script(act(tool_name="search"), act(tool_name="submit", tool_args={"x": 1}), act())

    outcome = await run_to_end(seams, agent(tools=MARKER_TOOLS))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.TASK_COMPLETED
    assert [s.tool_name for s in outcome.result.steps] == ["search", "submit"]


async def test_a_completion_marker_tool_that_was_not_executed_does_not_complete():
    seams = script(act(ActionStatus.NOT_EXECUTED, tool_name="submit"), final())

    outcome = await run_to_end(seams, agent(tools=MARKER_TOOLS))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.AGENT_FINISHED
    assert len(outcome.result.steps) == 2


async def test_a_not_executed_outcome_claiming_completion_does_not_complete():
    seams = script(act(ActionStatus.NOT_EXECUTED, completion=True), final())

    outcome = await run_to_end(seams, agent())

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.AGENT_FINISHED
    assert outcome.result.executed_actions == 0


async def test_a_not_executed_action_continues_the_run():
    seams = script(act(ActionStatus.NOT_EXECUTED), act(completion=True))

    outcome = await run_to_end(seams, agent())

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.TASK_COMPLETED
    assert [s.action_status for s in outcome.result.steps] == [
        ActionStatus.NOT_EXECUTED,
        ActionStatus.EXECUTED,
    ]


# --------------------------------------------------------------------------- step_budget


async def test_the_step_budget_stops_the_run_before_a_step_past_it():
    seams = script(act(), invalid(), act(), act())

    outcome = await run_to_end(seams, agent(max_steps=3))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.STEP_BUDGET
    assert len(outcome.result.steps) == 3
    assert kinds(outcome.log)[-2:] == ["step_completed", "run_finished"]


async def test_both_budgets_exhausted_at_once_is_step_budget():
    seams = script(act(), act(), act())

    outcome = await run_to_end(seams, agent(max_steps=2, max_executed_actions=2))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.STEP_BUDGET
    assert outcome.result.executed_actions == 2


# --------------------------------------------------------------------------- action_budget


async def test_the_action_budget_counts_only_executed_actions():
    seams = script(
        act(),
        act(ActionStatus.NOT_EXECUTED),
        invalid(),
        act(),
        act(),
    )

    outcome = await run_to_end(seams, agent(max_executed_actions=2))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.ACTION_BUDGET
    assert len(outcome.result.steps) == 4
    assert outcome.result.executed_actions == 2


# --------------------------------------------------------------------------- parse failures


async def test_consecutive_parse_failures_at_the_limit_end_parse_failed_repeatedly():
    seams = script(act(), invalid(), invalid(), act())

    outcome = await run_to_end(seams, agent(max_consecutive_parse_failures=2))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.PARSE_FAILED_REPEATEDLY
    assert len(outcome.result.steps) == 3


@pytest.mark.parametrize(
    "valid",
    [act(), act(ActionStatus.NOT_EXECUTED)],
    ids=["executed-action", "not-executed-action"],
)
async def test_any_valid_decision_resets_the_parse_failure_counter(valid):
    seams = script(invalid(), valid, invalid(), final())

    outcome = await run_to_end(seams, agent(max_consecutive_parse_failures=2))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.AGENT_FINISHED
    assert len(outcome.result.steps) == 4


async def test_an_invalid_decision_is_not_checked_for_completion():
    # An invalid decision never touches the environment; only the budget can stop it here.
    seams = script(invalid(), invalid())

    outcome = await run_to_end(seams, agent(max_steps=2, max_consecutive_parse_failures=5))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.STEP_BUDGET


# --------------------------------------------------------------------------- context_overflow


async def test_a_prompt_over_the_limit_ends_context_overflow_without_calling_the_model():
    limit = len(SYSTEM_PROMPT) + len(GOAL) - 1
    store = MemoryStore()

    result = await polyloop.run(
        agent(max_prompt_chars=limit), GOAL, store=store, run_id="r", **forbidden_seams()
    )

    assert result.stop_reason is StopReason.CONTEXT_OVERFLOW
    assert result.steps == ()
    assert kinds(await store.read_log("r")) == ["run_started", "run_finished"]


async def test_context_overflow_after_a_step_writes_no_step_and_no_intent():
    opening = len(SYSTEM_PROMPT) + len(GOAL)
    first_step = len("reply-0") + len("observed-0")
    seams = script(act(), act())

    outcome = await run_to_end(seams, agent(max_prompt_chars=opening + first_step - 1))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.CONTEXT_OVERFLOW
    assert len(outcome.result.steps) == 1
    assert kinds(outcome.log) == [
        "run_started",
        "model_call_intent",
        "model_replied",
        "action_intent",
        "step_completed",
        "run_finished",
    ]
    assert len(seams.model.received) == 1


async def test_a_prompt_exactly_at_the_limit_still_calls_the_model():
    opening = len(SYSTEM_PROMPT) + len(GOAL)
    seams = script(final())

    outcome = await run_to_end(seams, agent(max_prompt_chars=opening))

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.AGENT_FINISHED


# --------------------------------------------------------------------------- env_error


async def test_an_env_error_outcome_ends_env_error_and_counts_no_executed_action():
    seams = script(act(), act(ActionStatus.ENV_ERROR, completion=True), act())

    outcome = await run_to_end(seams, agent())

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.ENV_ERROR
    assert len(outcome.result.steps) == 2
    assert outcome.result.executed_actions == 1


# --------------------------------------------------------------------------- llm_error


async def test_a_model_exception_records_a_step_then_ends_llm_error():
    seams = script(act(), model_fails(ValueError("quota exceeded")))

    outcome = await run_to_end(seams, agent())

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.LLM_ERROR
    assert len(outcome.result.steps) == 2
    assert outcome.result.steps[-1].llm_call_id is None
    assert outcome.log.steps[-1].model_error == "ValueError: quota exceeded"
    assert kinds(outcome.log)[-3:] == ["model_call_intent", "step_completed", "run_finished"]


# --------------------------------------------------------------------------- agent_finished


async def test_a_final_answer_ends_agent_finished_with_its_text():
    seams = script(act(), final("forty-two"))

    outcome = await run_to_end(seams, agent())

    assert outcome.result is not None
    assert outcome.result.stop_reason is StopReason.AGENT_FINISHED
    assert outcome.result.final_answer == "forty-two"
    assert outcome.log.finished is not None
    assert outcome.log.finished.final_answer == "forty-two"


@pytest.mark.parametrize(
    "spec",
    [act(completion=True), act(ActionStatus.ENV_ERROR), model_fails(), invalid()],
    ids=["task_completed", "env_error", "llm_error", "parse_failed_repeatedly"],
)
async def test_only_agent_finished_carries_a_final_answer(spec):
    seams = script(spec)

    outcome = await run_to_end(seams, agent(max_consecutive_parse_failures=1))

    assert outcome.result is not None
    assert outcome.result.final_answer is None
    assert outcome.log.finished is not None
    assert outcome.log.finished.final_answer is None


# --------------------------------------------------------------------------- cancelled


async def test_a_cancelled_run_is_logged_cancelled_and_resume_rebuilds_that_result():
    seams = script(act(), final())
    model = GatedModel(seams.model, at_call=1)
    store = MemoryStore()
    task = asyncio.create_task(
        polyloop.run(
            agent(), GOAL, store=store, run_id="r", model=model,
            parser=seams.parser, executor=seams.executor,
        )
    )  # fmt: skip
    await model.gate.entered.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    rebuilt = await polyloop.resume("r", agent(), store=store, **forbidden_seams())
    assert rebuilt.stop_reason is StopReason.CANCELLED
    assert len(rebuilt.steps) == 1
    assert rebuilt.executed_actions == 1


# --------------------------------------------------------------------------- resume_state_unknown


async def test_an_interrupted_action_that_may_not_be_replayed_ends_resume_state_unknown():
    seams = script(act(), act(error=Crash("died while acting")), final())
    store = MemoryStore()
    crashed = await run_to_end(seams, agent(), store=store)
    assert isinstance(crashed.error, Crash)

    result = await polyloop.resume(
        "run-1", agent(), store=store, events=MemorySink(),
        model=ForbiddenModel(), parser=seams.parser, executor=seams.executor,
    )  # fmt: skip

    assert result.stop_reason is StopReason.RESUME_STATE_UNKNOWN
    assert len(result.steps) == 1
    assert result.executed_actions == 1
    assert (await store.read_log("run-1")).finished is not None

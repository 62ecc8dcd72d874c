"""The loop against an independent reference model of the stopping order A–H.

The reference below is deliberately naive: one ``while`` loop that follows SPEC §4 line by line
and counts what it would write. It does not import ``polyloop._loop._stopping`` (or anything of the
loop): if both were derived from the same code, a shared mistake would pass. Hypothesis drives
random seam behaviour — model failures, invalid replies, final answers, every action status,
completion flags, completion-marker tools, all four budgets with small limits — and the real run
must agree on the stop reason, the step count, the executed count and the sequence of record
kinds. A second property interrupts the same run after every record and resumes it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

import polyloop
from polyloop import ActionStatus, Budget, RunResult, Tool, ToolRegistry
from polyloop.events import MemorySink
from polyloop.stores import MemoryStore
from polyloop.testing._shared._base import in_ci
from tests.unit._doubles import (
    GOAL,
    NOT_EXECUTED_TEXT,
    SYSTEM_PROMPT,
    StepSpec,
    act,
    agent,
    copy_prefix,
    final,
    invalid,
    kinds,
    model_fails,
    script,
    trajectory,
)

BOUNDED = settings(max_examples=200, deadline=None, derandomize=in_ci())
TOOLS = ToolRegistry(
    [
        Tool(name="plain", description="does something"),
        Tool(name="marker", description="hands the work in", completion_marker=True),
    ]
)
RUN = "ref"


# --------------------------------------------------------------------------- the reference


@dataclass
class Expected:
    stop_reason: str
    steps: int
    executed: int
    kinds: list[str]


def reference(specs: list[StepSpec], budget: Budget) -> Expected:
    """SPEC §4, A to H, written out as plainly as possible."""
    written = ["run_started"]
    steps = executed = failures = 0
    prompt = len(SYSTEM_PROMPT) + len(GOAL)
    while True:
        # A
        if steps >= budget.max_steps:
            stop = "step_budget"
            break
        if executed >= budget.max_executed_actions:
            stop = "action_budget"
            break
        # B
        if prompt > budget.max_prompt_chars:
            stop = "context_overflow"
            break
        # C
        spec = specs[steps]
        reply = spec.reply_text or f"reply-{steps}"
        written.append("model_call_intent")
        if spec.kind == "model_fails":
            written.append("step_completed")
            steps += 1
            stop = "llm_error"
            break
        written.append("model_replied")
        # D
        if spec.kind == "invalid":
            written.append("step_completed")
            steps += 1
            failures += 1
            prompt += len(reply) + len(spec.feedback)
            if failures >= budget.max_consecutive_parse_failures:
                stop = "parse_failed_repeatedly"
                break
            continue
        failures = 0
        # E
        if spec.kind == "final":
            written.append("step_completed")
            steps += 1
            stop = "agent_finished"
            break
        # F
        written.append("action_intent")
        written.append("step_completed")
        observation = spec.observation or ""
        steps += 1
        # G
        if spec.status == "env_error":
            stop = "env_error"
            break
        if spec.status == "not_executed":
            prompt += len(reply) + len(NOT_EXECUTED_TEXT)
            continue
        executed += 1
        prompt += len(reply) + len(observation)
        if spec.completion or spec.tool_name == "marker":
            stop = "task_completed"
            break
        # H
    written.append("run_finished")
    return Expected(stop_reason=stop, steps=steps, executed=executed, kinds=written)


# --------------------------------------------------------------------------- strategies


@st.composite
def step_spec(draw: st.DrawFn, index: int) -> StepSpec:
    reply = f"reply-{index}" + "x" * draw(st.integers(0, 12))
    kind = draw(st.sampled_from(["model_fails", "invalid", "final", "act", "act", "act"]))
    if kind == "model_fails":
        return model_fails()
    if kind == "invalid":
        return invalid("feedback" * draw(st.integers(0, 3)), reply_text=reply)
    if kind == "final":
        return final(reply_text=reply)
    return act(
        draw(st.sampled_from(ActionStatus)),
        observation="o" * draw(st.integers(0, 30)),
        completion=draw(st.booleans()),
        tool_name=draw(st.sampled_from([None, "plain", "marker", "unregistered"])),
        reply_text=reply,
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[StepSpec], Budget]:
    budget = Budget(
        max_steps=draw(st.integers(1, 6)),
        max_executed_actions=draw(st.integers(1, 4)),
        max_consecutive_parse_failures=draw(st.integers(1, 3)),
        max_prompt_chars=len(SYSTEM_PROMPT) + len(GOAL) + draw(st.integers(-1, 150)),
    )
    specs = [draw(step_spec(index)) for index in range(budget.max_steps)]
    return specs, budget


def agent_for(budget: Budget, *, replay: bool = False) -> polyloop.AgentDefinition:
    return agent(
        max_steps=budget.max_steps,
        max_executed_actions=budget.max_executed_actions,
        max_consecutive_parse_failures=budget.max_consecutive_parse_failures,
        max_prompt_chars=budget.max_prompt_chars,
        tools=TOOLS,
        replay=replay,
    )


async def run_once(specs: list[StepSpec], budget: Budget) -> tuple[RunResult, list[str], object]:
    store = MemoryStore()
    result = await polyloop.run(
        agent_for(budget), GOAL, store=store, run_id=RUN, **script(*specs).kwargs()
    )
    log = await store.read_log(RUN)
    return result, kinds(log), log


# --------------------------------------------------------------------------- properties


@BOUNDED
@given(scenarios())
def test_the_loop_stops_where_the_reference_model_stops(scenario):
    specs, budget = scenario
    expected = reference(specs, budget)

    result, written, _ = asyncio.run(run_once(specs, budget))

    assert result.stop_reason.value == expected.stop_reason
    assert len(result.steps) == expected.steps
    assert result.executed_actions == expected.executed
    assert written == expected.kinds


def without_retried_intents(written: list[str]) -> list[str]:
    """A resume writes a second intent right after an interrupted one; drop the first."""
    return [
        kind
        for position, kind in enumerate(written)
        if not (kind.endswith("_intent") and written[position + 1 : position + 2] == [kind])
    ]


async def interrupt_everywhere(specs: list[StepSpec], budget: Budget) -> None:
    uninterrupted, written, log = await run_once(specs, budget)
    assert isinstance(log, polyloop.RunLog)
    for count in range(1, len(log) + 1):
        store = await copy_prefix(log, RUN, count)
        sink = MemorySink()

        resumed = await polyloop.resume(
            RUN, agent_for(budget, replay=True), store=store, events=sink,
            **script(*specs).kwargs(),
        )  # fmt: skip

        after = kinds(await store.read_log(RUN))
        assert trajectory(resumed) == trajectory(uninterrupted), f"interrupted after {count}"
        assert without_retried_intents(after) == written, f"interrupted after {count}"
        assert [e.sequence for e in sink.events] == list(range(count, len(after)))


@BOUNDED
@given(scenarios())
def test_interrupting_after_any_record_and_resuming_gives_the_uninterrupted_result(scenario):
    specs, budget = scenario

    asyncio.run(interrupt_everywhere(specs, budget))

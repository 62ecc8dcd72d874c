"""Per-step work does not grow with the run (issue #11): the prompt size is a running total.

Before: every step re-summed ``len(content)`` over the whole history, so a run of n steps
measured O(n²) messages (185/303/722 µs per step at 2k/4k/8k steps). ``benchmarks/long_runs.py``
prints the cost per step; this test counts the work, which is deterministic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    Message,
    ModelReply,
    ParsedReply,
    StepCompleted,
    StopReason,
    SyntheticObservations,
    resume,
    run,
)
from polyloop._loop import _history
from polyloop.stores import MemoryStore

STEPS = 150


class GrowingModel:
    """Replies of different lengths, so a wrong total cannot hide behind equal steps."""

    def __init__(self) -> None:
        self.prompts: list[int] = []

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        self.prompts.append(sum(len(m.content) for m in messages))  # the size, independently
        return ModelReply(text="act " + "é" * (len(messages) % 7))


class ActParser:
    def parse(self, reply: ModelReply) -> ParsedReply:
        return Action(text=reply.text, tool_name="t", tool_args={})


class Observer:
    def __init__(self) -> None:
        self.calls = 0

    async def execute(self, action: Action) -> ActionOutcome:
        self.calls += 1
        return ActionOutcome(status=ActionStatus.EXECUTED, observation="o" * (self.calls % 11))


def agent(steps: int) -> AgentDefinition:
    return AgentDefinition(
        system_prompt="sys",
        budget=Budget(
            max_steps=steps,
            max_executed_actions=steps,
            max_consecutive_parse_failures=3,
            max_prompt_chars=10**9,
        ),
        synthetic_observations=SyntheticObservations(not_executed="no", env_error="down"),
    )


def test_each_message_is_measured_once_and_every_prompt_size_is_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measured: list[int] = []
    real = _history.prompt_chars

    def counting(messages: Sequence[Message]) -> int:
        measured.append(len(messages))
        return real(messages)

    monkeypatch.setattr(_history, "prompt_chars", counting)
    model = GrowingModel()
    result = asyncio.run(run(agent(STEPS), "goal", model=model, parser=ActParser(),
                             executor=Observer(), store=MemoryStore()))  # fmt: skip

    assert result.stop_reason is StopReason.STEP_BUDGET
    assert [s.prompt_chars for s in result.steps] == model.prompts
    # The opening two messages, then the two each step adds: linear, where a re-sum per step
    # measured 2 + 4 + … + 2·STEPS messages.
    assert sum(measured) == 2 + 2 * STEPS


def test_a_resumed_run_continues_the_total_from_its_log() -> None:
    store = MemoryStore()
    first = GrowingModel()
    asyncio.run(run(agent(5), "goal", model=first, parser=ActParser(), executor=Observer(),
                    store=store, run_id="r"))  # fmt: skip
    log = asyncio.run(store.read_log("r"))
    cut = MemoryStore()  # the same run, interrupted after its third step
    third = next(
        n
        for n, r in enumerate(log.records)
        if isinstance(r, StepCompleted) and r.step.step_index == 2
    )
    for sequence, record in enumerate(log.records[: third + 1]):
        asyncio.run(cut.append("r", record, sequence=sequence))
    second = GrowingModel()

    result = asyncio.run(resume("r", agent(5), model=second, parser=ActParser(),
                                executor=Observer(), store=cut))  # fmt: skip

    assert len(second.prompts) == 2  # steps 3 and 4, asked of the second model
    assert [s.prompt_chars for s in result.steps] == first.prompts[:3] + second.prompts

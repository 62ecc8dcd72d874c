"""An agent and a seams factory for batch tests, importable as ``tests.batch_doubles`` and also
copied beside a tasks file (``polyloop batch --seams batch_doubles:seams``).

A task's goal says what its scripted model does: ``"steps=3"`` — three actions, then a final
answer; ``"steps=2 fail"`` — the executor raises at the first action; ``"steps=1 slow=0.5"`` —
each action takes half a second. The executor counts every call per (task, action) — in memory,
and also in the file named by ``BATCH_CALLS`` when it is set, one line a call, so a count
survives the process that made it.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from polyloop import (
    Action,
    ActionOutcome,
    ActionStatus,
    AgentDefinition,
    Budget,
    FinalAnswer,
    InvalidDecision,
    Message,
    ModelReply,
    ParsedReply,
    RunSeams,
    SyntheticObservations,
    Task,
)

AGENT = AgentDefinition(
    system_prompt="Do the steps, then say DONE.",
    budget=Budget(
        max_steps=20, max_executed_actions=20, max_consecutive_parse_failures=3,
        max_prompt_chars=1_000_000,
    ),
    synthetic_observations=SyntheticObservations(not_executed="not done", env_error="broken"),
)  # fmt: skip

#: Every executor call of this process: (task id, action text) → calls.
CALLS: Counter[tuple[str, str]] = Counter()
CLOSED: list[str] = []  # task ids whose executor was closed
_WAITERS: list[tuple[int, asyncio.Future[None]]] = []


async def calls_reach(count: int) -> None:
    """Return once this process's executors were called ``count`` times in all."""
    if sum(CALLS.values()) >= count:
        return
    waiter = asyncio.get_running_loop().create_future()
    _WAITERS.append((count, waiter))
    await waiter


def _counted(task_id: str, action: str) -> None:
    CALLS[(task_id, action)] += 1
    total = sum(CALLS.values())
    for count, waiter in list(_WAITERS):
        if total >= count and not waiter.done():
            waiter.set_result(None)
            _WAITERS.remove((count, waiter))


def options(goal: str) -> dict[str, str]:
    return dict(word.partition("=")[::2] for word in goal.split())


class StepModel:
    """Replies ``DO <task>-<k>`` for k < steps, then ``DONE``; ``usage`` counts one token a
    reply, so usage totals are checkable. Deterministic from the history, as resume needs."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.steps = int(options(task.goal).get("steps", "1"))
        self.model_delay = float(options(task.goal).get("think", "0"))

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        await asyncio.sleep(self.model_delay)
        k = sum(1 for m in messages if m.role == "assistant")
        text = f"DO {self.task.id}-{k}" if k < self.steps else "DONE"
        return ModelReply(text=text, call_id=f"c{k}", usage={"completion_tokens": 1})


class StepParser:
    def parse(self, reply: ModelReply) -> ParsedReply:
        if reply.text == "DONE":
            return FinalAnswer(text="done")
        if reply.text.startswith("DO "):
            return Action(text=reply.text[3:], tool_name="do")
        return InvalidDecision(feedback="say DO or DONE")


class CountingExecutor:
    """Counts each call before doing anything, so an interrupted call counts too."""

    def __init__(self, task: Task) -> None:
        self.task = task
        found = options(task.goal)
        self.delay = float(found.get("slow", os.environ.get("BATCH_SLOW", "0")))
        self.fail = "fail" in found

    async def execute(self, action: Action) -> ActionOutcome:
        _counted(self.task.id, action.text)
        path = os.environ.get("BATCH_CALLS")
        if path:
            line = f"{self.task.id}\t{action.text}\n".encode()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        if self.fail:
            raise RuntimeError(f"the executor of {self.task.id} broke")
        if self.delay:
            await asyncio.sleep(self.delay)
        return ActionOutcome(status=ActionStatus.EXECUTED, observation=f"did {action.text}")

    async def aclose(self) -> None:
        CLOSED.append(self.task.id)


def seams(task: Task) -> RunSeams:
    return RunSeams(model=StepModel(task), parser=StepParser(), executor=CountingExecutor(task))


def calls_in(path: str) -> Counter[tuple[str, str]]:
    """The calls recorded in a ``BATCH_CALLS`` file."""
    counted: Counter[tuple[str, str]] = Counter()
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            task_id, _, action = line.rstrip("\n").partition("\t")
            counted[(task_id, action)] += 1
    return counted


def reset() -> None:
    CALLS.clear()
    CLOSED.clear()
    _WAITERS.clear()


def tasks(count: int, goal: str = "steps=2", **labels: Any) -> list[Task]:
    return [Task(f"t{i:03d}", goal, {k: str(v) for k, v in labels.items()}) for i in range(count)]

"""How the batch runner drives a run (``polyloop._loop._run.Driving``): a cancellation that
interrupts instead of finishing, and a time limit that finishes ``time_limit`` — each at a
model call, an action and a commit in flight, which always lands first."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from polyloop import RunFinished, StopReason, Task
from polyloop._loop._run import Driving, proceed, start
from polyloop.stores import MemoryStore
from polyloop.types import Record, RunLog
from tests import batch_doubles
from tests.batch_doubles import AGENT, seams

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    batch_doubles.reset()


class SlowCommits:
    """A store whose commits of a chosen record kind take ``delay`` seconds (awaited path)."""

    def __init__(self, kind: str, delay: float) -> None:
        self.inner = MemoryStore()
        self.kind = kind
        self.delay = delay
        self.slow_commit_started = asyncio.Event()

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await self.append_many(run_id, (record,), sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        if any(r.kind == self.kind for r in records):
            self.slow_commit_started.set()
            await asyncio.sleep(self.delay)
        await self.inner.append_many(run_id, records, sequence=sequence)

    async def read_log(self, run_id: str) -> RunLog:
        return await self.inner.read_log(run_id)

    async def run_ids(self) -> list[str]:
        return await self.inner.run_ids()


def begin(goal: str, store: Any, how: Driving) -> asyncio.Task[Any]:
    found = seams(Task("t", goal))
    return asyncio.create_task(
        start(
            AGENT,
            goal,
            model=found.model,
            parser=found.parser,
            executor=found.executor,
            store=store,
            events=None,
            run_id="r",
            how=how,
        )
    )


def finishes(log: RunLog) -> list[RunFinished]:
    return [r for r in log.records if isinstance(r, RunFinished)]


async def test_an_interrupted_run_writes_no_finish_and_resumes_to_its_end() -> None:
    store = MemoryStore()
    running = begin("steps=3 slow=1", store, Driving(interruptible=True))
    await batch_doubles.calls_reach(1)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    log = await store.read_log("r")
    assert log.finished is None
    assert log.records[-1].kind == "action_intent"
    found = seams(Task("t", "steps=3"))
    result = await proceed("r", AGENT, model=found.model, parser=found.parser,
                           executor=found.executor, store=store, events=None)  # fmt: skip
    assert result.stop_reason is StopReason.RESUME_STATE_UNKNOWN  # the action may have run
    assert finishes(await store.read_log("r")) == [(await store.read_log("r")).finished]


async def test_an_interruption_during_a_commit_waits_for_it_to_land() -> None:
    store = SlowCommits("action_intent", 0.05)
    running = begin("steps=2", store, Driving(interruptible=True))
    await store.slow_commit_started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    log = await store.read_log("r")
    assert [r.kind for r in log.records][-1] == "action_intent"  # landed, nothing after it
    assert log.finished is None


async def test_the_time_limit_during_a_commit_lets_it_land_then_finishes_time_limit() -> None:
    store = SlowCommits("action_intent", 0.2)
    result = await begin("steps=2", store, Driving(time_limit_s=0.05))
    assert result.stop_reason is StopReason.TIME_LIMIT
    kinds = [r.kind for r in (await store.read_log("r")).records]
    assert kinds[-2:] == ["action_intent", "run_finished"]


async def test_the_time_limit_during_the_finish_commit_keeps_the_finish_it_wrote() -> None:
    store = SlowCommits("run_finished", 0.2)
    result = await begin("steps=1", store, Driving(time_limit_s=0.1))
    assert result.stop_reason is StopReason.AGENT_FINISHED
    assert result.final_answer == "done"
    log = await store.read_log("r")
    assert [f.stop_reason for f in finishes(log)] == [StopReason.AGENT_FINISHED]


async def test_the_time_limit_counts_from_each_call_so_a_resume_gets_it_afresh() -> None:
    store = MemoryStore()
    running = begin("steps=1 think=0.05", store, Driving(interruptible=True))
    await asyncio.sleep(0.02)  # inside the first model call
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await asyncio.sleep(0.6)  # longer than the limit below: the pause must not count
    found = seams(Task("t", "steps=1 think=0.05"))
    result = await proceed(
        "r",
        AGENT,
        model=found.model,
        parser=found.parser,
        executor=found.executor,
        store=store,
        events=None,
        how=Driving(time_limit_s=0.5),
    )
    assert result.stop_reason is StopReason.AGENT_FINISHED

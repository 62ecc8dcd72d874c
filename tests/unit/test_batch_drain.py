"""An interrupted batch drains, and its summary is the store's own count.

The first interrupt starts no new task, no new model call and no new action; each action in
flight finishes and is recorded, so every run it leaves is resumable with nothing in doubt. A
second interrupt, or the end of the grace period, cancels what is left. The summary of an
interrupted batch agrees exactly with the run index (``polyloop stats``) of the same store,
wherever the interrupt fell: the sweep below interrupts after the k-th commit, for 30 values
of k.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from polyloop import ActionIntent, RunFinished, StopReason, Task, run_many
from polyloop._base._run_index import RunQuery, RunStats
from polyloop._batch import BatchSummary, execute, plan, vet
from polyloop.stores import MemoryStore, SQLiteStore
from polyloop.types import Record
from tests import batch_doubles
from tests.batch_doubles import AGENT, CALLS, seams, tasks

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    batch_doubles.reset()


class Tripwire(MemoryStore):
    """A MemoryStore that sets ``interrupt`` right after its ``at``-th commit."""

    def __init__(self, at: int, interrupt: asyncio.Event) -> None:
        super().__init__()
        self.at = at
        self.interrupt = interrupt
        self.commits = 0

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        done = super().commit_now(run_id, records, sequence=sequence)
        self.commits += 1
        if self.commits == self.at:
            self.interrupt.set()
        return done


async def interrupted_batch(
    store: object,
    given: list[Task],
    interrupt: asyncio.Event,
    *,
    concurrency: int = 8,
    stop_now: asyncio.Event | None = None,
    grace_s: float | None = 30.0,
) -> BatchSummary:
    checked = plan(
        AGENT, given, seams=seams, store=store, store_url=None, batch="b",  # type: ignore[arg-type]
        concurrency=concurrency, time_limit_s=None, backend=None,
    )  # fmt: skip
    vetted = await vet(checked)
    if stop_now is None and grace_s == 30.0:  # the defaults: the call reads as before the drain
        return await execute(vetted, interrupt=interrupt)
    return await execute(vetted, interrupt=interrupt, stop_now=stop_now, grace_s=grace_s)


def assert_agrees(summary: BatchSummary, stats: RunStats) -> None:
    """The summary's counts are the index's: finished runs by stop reason, and running ones."""
    what = summary.what
    finished = what.get("started", 0) + what.get("resumed", 0) + what.get("skipped", 0)
    assert len(summary.finished) == finished
    assert finished == stats.runs - stats.running, (what, stats)
    assert what.get("interrupted", 0) == stats.running, (what, stats)
    assert sorted(summary.stop_reasons.items()) == sorted(stats.stop_reasons.items())
    assert sum(what.values()) == summary.tasks


async def in_doubt(store: MemoryStore | SQLiteStore) -> list[str]:
    """The unfinished runs whose log ends at an action intent."""
    doubtful = []
    for run_id in await store.run_ids():
        log = await store.read_log(run_id)
        if log.finished is None and isinstance(log.records[-1], ActionIntent):
            doubtful.append(run_id)
    return doubtful


# --------------------------------------------------------------------------- the drain


async def test_the_first_interrupt_lets_each_action_in_flight_finish_and_be_recorded() -> None:
    store = MemoryStore()
    given = tasks(12, "steps=3 slow=0.3")
    interrupt = asyncio.Event()
    waiting = asyncio.ensure_future(batch_doubles.calls_reach(6))
    waiting.add_done_callback(lambda _: interrupt.set())
    summary = await interrupted_batch(store, given, interrupt, concurrency=4)
    assert summary.interrupted
    assert await in_doubt(store) == []  # nothing in doubt: every action in flight was recorded
    executed = 0
    for run_id in await store.run_ids():
        log = await store.read_log(run_id)
        assert log.finished is None  # none was finished, none cancelled
        executed += sum(1 for c in log.steps if c.step.action_status is not None)
    assert executed == sum(CALLS.values())  # every action that ran is in a log
    assert summary.what == {"interrupted": 4, "not_started": 8}

    again = await run_many(AGENT, given, seams=seams, store=store, batch="b")
    assert again.stop_reasons == {"agent_finished": 12}  # none resume_state_unknown
    assert max(CALLS.values()) == 1


async def test_a_drained_run_stops_before_its_next_model_call() -> None:
    store = MemoryStore()
    given = tasks(1, "steps=3 slow=0.2")
    interrupt = asyncio.Event()
    waiting = asyncio.ensure_future(batch_doubles.calls_reach(1))
    waiting.add_done_callback(lambda _: interrupt.set())
    summary = await interrupted_batch(store, given, interrupt)
    log = await store.read_log("b.t000")
    assert [r.kind for r in log.records][-2:] == ["action_intent", "step_completed"]
    assert summary.what == {"interrupted": 1}


async def test_the_grace_period_cancels_what_is_left() -> None:
    store = MemoryStore()
    given = tasks(2, "steps=1 slow=30")
    interrupt = asyncio.Event()
    waiting = asyncio.ensure_future(batch_doubles.calls_reach(2))
    waiting.add_done_callback(lambda _: interrupt.set())
    loop = asyncio.get_running_loop()
    began = loop.time()
    summary = await interrupted_batch(store, given, interrupt, grace_s=0.2)
    assert loop.time() - began < 5
    assert summary.what == {"interrupted": 2}
    assert len(await in_doubt(store)) == 2  # cut in flight, as before the drain existed


async def test_a_second_interrupt_cancels_at_once() -> None:
    store = MemoryStore()
    given = tasks(2, "steps=1 slow=30")
    interrupt, stop_now = asyncio.Event(), asyncio.Event()

    def first(_: object) -> None:
        interrupt.set()
        asyncio.get_running_loop().call_later(0.1, stop_now.set)

    waiting = asyncio.ensure_future(batch_doubles.calls_reach(2))
    waiting.add_done_callback(first)
    loop = asyncio.get_running_loop()
    began = loop.time()
    summary = await interrupted_batch(store, given, interrupt, stop_now=stop_now, grace_s=None)
    assert loop.time() - began < 5
    assert summary.what == {"interrupted": 2}


async def test_cancelling_run_many_drains_and_a_second_cancel_stops_it() -> None:
    store = MemoryStore()
    given = tasks(4, "steps=2 slow=0.3")
    batch = asyncio.create_task(
        run_many(AGENT, given, seams=seams, store=store, batch="b", concurrency=4)
    )
    await batch_doubles.calls_reach(4)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert await in_doubt(store) == []  # the four actions in flight finished and were recorded

    batch_doubles.reset()
    store = MemoryStore()
    batch = asyncio.create_task(
        run_many(AGENT, tasks(4, "steps=1 slow=30"), seams=seams, store=store, batch="b")
    )
    await batch_doubles.calls_reach(4)
    batch.cancel()
    await asyncio.sleep(0.05)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(batch, 5)
    assert len(await in_doubt(store)) == 4


@pytest.mark.parametrize("grace_s", [-1, float("nan"), float("inf"), True, "30"])
async def test_a_bad_grace_period_is_refused(grace_s: object) -> None:
    with pytest.raises(ValueError, match="grace_s"):
        await run_many(
            AGENT, tasks(1), seams=seams, store=MemoryStore(), batch="b",
            grace_s=grace_s,  # type: ignore[arg-type]
        )  # fmt: skip


# --------------------------------------------------------------------------- the exact summary


@pytest.mark.parametrize("at", [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, *range(100, 600, 25)])
async def test_the_summary_of_an_interrupted_batch_is_the_index(at: int) -> None:
    interrupt = asyncio.Event()
    store = Tripwire(at, interrupt)
    given = tasks(150, "steps=2")
    summary = await interrupted_batch(store, given, interrupt)
    stats = await store.run_stats(RunQuery(batch="b"))
    assert summary.interrupted == (store.commits >= at)
    assert_agrees(summary, stats)
    assert await in_doubt(store) == []


@pytest.mark.parametrize("at", [4, 40, 400])
async def test_the_summary_of_an_interrupted_rerun_is_the_index(at: int) -> None:
    """A rerun interrupted in turn: the runs it never reached are still unfinished."""
    first = asyncio.Event()
    store = Tripwire(200, first)
    given = tasks(150, "steps=2")
    assert (await interrupted_batch(store, given, first)).interrupted
    again = asyncio.Event()
    store.commits, store.interrupt, store.at = 0, again, at
    summary = await interrupted_batch(store, given, again)
    assert_agrees(summary, await store.run_stats(RunQuery(batch="b")))


@pytest.mark.parametrize("at", [3, 50, 400])
async def test_the_summary_of_an_interrupted_batch_on_sqlite_is_the_index(
    tmp_path: Path, at: int
) -> None:
    interrupt = asyncio.Event()
    async with SQLiteStore(tmp_path / "runs.db") as store:
        checked = plan(
            AGENT, tasks(120, "steps=2"), seams=seams, store=store, store_url=None, batch="b",
            concurrency=8, time_limit_s=None, backend=None,
        )  # fmt: skip
        vetted = await vet(checked)
        written = 0
        original = store.append_many

        async def counted(run_id: str, records: Sequence[Record], *, sequence: int) -> None:
            nonlocal written
            await original(run_id, records, sequence=sequence)
            written += 1
            if written == at:
                interrupt.set()

        store.append_many = counted  # type: ignore[method-assign]
        summary = await execute(vetted, interrupt=interrupt)
        assert summary.interrupted
        assert_agrees(summary, await store.run_stats(RunQuery(batch="b")))


async def test_an_interrupt_that_comes_after_the_last_task_is_no_interruption() -> None:
    store = MemoryStore()
    interrupt = asyncio.Event()
    summary = await interrupted_batch(store, tasks(3), interrupt)
    assert not summary.interrupted
    assert summary.stop_reasons == {str(StopReason.AGENT_FINISHED): 3}
    for run_id in await store.run_ids():
        log = await store.read_log(run_id)
        assert isinstance(log.records[-1], RunFinished)

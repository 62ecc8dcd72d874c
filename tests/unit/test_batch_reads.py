"""The batch runner reads what it must and nothing more (issue 38): a fresh run's empty log is
read once, when the batch is vetted, not again by its drive and again by the loop's start."""

from __future__ import annotations

from collections import Counter

import pytest

from polyloop import RunLog, run_many
from polyloop.stores import MemoryStore
from tests.batch_doubles import AGENT, seams, tasks

pytestmark = pytest.mark.asyncio


class CountingStore(MemoryStore):
    """A MemoryStore that counts the reads of each run's log."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()

    async def read_log(self, run_id: str) -> RunLog:
        self.reads[run_id] += 1
        return await super().read_log(run_id)


async def test_a_fresh_run_is_read_once_by_the_batch_runner() -> None:
    store = CountingStore()

    summary = await run_many(AGENT, tasks(5), seams=seams, store=store, batch="b")

    assert [o.what for o in summary.outcomes] == ["started"] * 5
    # Was three: vet's read, drive_task's, and start()'s check that the run is new.
    assert dict(store.reads) == {f"b.t{n:03d}": 1 for n in range(5)}, store.reads


async def test_a_run_started_elsewhere_after_vetting_is_fenced_off_by_the_store() -> None:
    """The reads left out were the only check that a run is new: the store's fence at its first
    commit still refuses a run another process started since the batch was vetted."""
    from polyloop._batch import plan, vet
    from polyloop._batch._tasks import batch_run_id

    store = CountingStore()
    planned = plan(
        AGENT,
        tasks(1),
        seams=seams,
        store=store,
        store_url=None,
        batch="b",
        concurrency=1,
        time_limit_s=None,
        backend=None,
    )
    vetted = await vet(planned)
    (task,) = vetted.tasks
    await run_many(AGENT, tasks(1), seams=seams, store=store, batch="b")  # the other process
    log = await store.read_log(batch_run_id("b", task.id))

    outcome = await vetted.job.drive(task)

    assert outcome.what == "failed"
    assert "RunAlreadyExists" in (outcome.error or ""), outcome
    assert await store.read_log(batch_run_id("b", task.id)) == log  # nothing written

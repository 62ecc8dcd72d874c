"""The batch runner reads what it must and nothing more (issue 38): a fresh run's empty log is
read once, when the batch is vetted, not again by its drive and again by the loop's start."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from polyloop import RunFinished, RunLog, RunStarted, run_many
from polyloop._batch._tasks import RunSeams, Task
from polyloop.stores import MemoryStore
from tests.batch_doubles import AGENT, CountingExecutor, StepModel, StepParser, seams, tasks

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


def _vetted_job_of_one(store: CountingStore) -> Any:
    from polyloop._batch import plan, vet

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
    return vet(planned)


async def test_a_run_finished_elsewhere_after_vetting_is_fenced_off_and_skipped() -> None:
    """The reads left out were the only check that a run is new: the store's fence at its first
    commit refuses a run another process started since the batch was vetted, and the run is then
    judged on its log as any driven task is — finished there, so skipped, nothing written."""
    from polyloop._batch._tasks import batch_run_id

    store = CountingStore()
    vetted = await _vetted_job_of_one(store)
    (task,) = vetted.tasks
    await run_many(AGENT, tasks(1), seams=seams, store=store, batch="b")  # the other process
    log = await store.read_log(batch_run_id("b", task.id))

    outcome = await vetted.job.drive(task)

    assert outcome.what == "skipped", outcome
    assert await store.read_log(batch_run_id("b", task.id)) == log  # nothing written


def _hangs_at_its_first_model_call(called: asyncio.Event) -> Callable[[Task], RunSeams]:
    class Hangs(StepModel):
        async def complete(self, messages: Any) -> Any:
            called.set()  # the run is started: its intent is committed before the call
            await asyncio.Event().wait()  # until its worker dies (cancelled)

    def factory(task: Task) -> RunSeams:
        return RunSeams(model=Hangs(task), parser=StepParser(), executor=CountingExecutor(task))

    return factory


async def test_a_retried_task_whose_first_attempt_died_resumes_its_run() -> None:
    """A backend that retries a task whose worker died (Ray) ships the same vetted job: the
    retry's start is refused by the fence (the first attempt started the run), and the run is
    resumed and finished once — not failed with RunAlreadyExists, which left it unfinished."""
    from polyloop._batch._drive import drive_task
    from polyloop._batch._tasks import batch_run_id

    store = CountingStore()
    vetted = await _vetted_job_of_one(store)
    (task,) = vetted.tasks
    run_id = batch_run_id("b", task.id)
    called = asyncio.Event()
    hangs = _hangs_at_its_first_model_call(called)
    first = asyncio.create_task(drive_task(AGENT, task, seams=hangs, store=store, batch="b"))
    await called.wait()  # the first attempt started the run
    first.cancel()  # its worker dies
    with contextlib.suppress(asyncio.CancelledError):
        await first

    outcome = await vetted.job.drive(task)

    assert outcome.what == "resumed", outcome
    records = (await store.read_log(run_id)).records
    assert sum(isinstance(r, RunStarted) for r in records) == 1
    assert sum(isinstance(r, RunFinished) for r in records) == 1

"""``run_many``: check every task, then drive them all through a backend, then sum up.

One reason to change: the order of a batch's phases. Nothing is written before every task was
checked — its run id, its uniqueness, and against the store (:func:`~polyloop._batch._drive.judge`)
— so a refused batch leaves the store as it was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

from polyloop._base._timeout import checked_timeout_s
from polyloop._batch._backend import AsyncioBackend, Backend, BatchJob
from polyloop._batch._drive import Verdict, judge
from polyloop._batch._outcome import Tally, TaskOutcome
from polyloop._batch._summary import BatchSummary
from polyloop._batch._tasks import SeamsFactory, Task, batch_run_id
from polyloop.errors import InvalidRunId, TaskRefused
from polyloop.ports import RunStore
from polyloop.stores import open_store
from polyloop.types import AgentDefinition

__all__ = ["Plan", "execute", "plan", "run_many", "vet"]

_READERS = 16  # logs read at a time while vetting

#: Called with each task's outcome as it arrives, in the process that called ``run_many``.
Progress = Callable[[TaskOutcome], None]


@dataclass(frozen=True, slots=True)
class Plan:
    """A checked batch: the tasks to drive and, once vetted against the store, the outcomes of
    the tasks whose runs were already finished (``skipped``: nothing to drive)."""

    job: BatchJob
    tasks: tuple[Task, ...]
    concurrency: int
    backend: Backend
    skipped: tuple[TaskOutcome, ...] = ()

    @property
    def total(self) -> int:
        return len(self.tasks) + len(self.skipped)


def plan(
    agent: AgentDefinition,
    tasks: Iterable[Task],
    *,
    seams: SeamsFactory,
    store: RunStore,
    store_url: str | None,
    batch: str,
    concurrency: int,
    time_limit_s: float | None,
    backend: Backend | None,
) -> Plan:
    """Every check that needs no I/O: ``TypeError``/``ValueError`` naming the argument, or
    :class:`~polyloop.errors.TaskRefused` for the first task whose run id would be invalid or
    whose id is a duplicate."""
    if not isinstance(agent, AgentDefinition):
        raise TypeError(f"agent must be an AgentDefinition, got {type(agent).__name__}")
    if not callable(seams):
        raise TypeError(
            "seams must be a callable taking a Task and returning that run's RunSeams, got "
            f"{type(seams).__name__}"
        )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    time_limit_s = checked_timeout_s("time_limit_s", time_limit_s)
    if not isinstance(batch, str):
        raise TypeError(f"batch must be a str, got {type(batch).__name__}")
    if backend is None:
        backend = AsyncioBackend()
    elif not callable(getattr(backend, "run", None)):
        raise TypeError(f"backend must have a run() method, got {type(backend).__name__}")
    checked = _checked_tasks(tasks, batch)
    job = BatchJob(agent, seams, store, store_url, batch, time_limit_s)
    return Plan(job, checked, concurrency, backend)


def _checked_tasks(tasks: object, batch: str) -> tuple[Task, ...]:
    if isinstance(tasks, str | bytes) or not isinstance(tasks, Iterable):
        raise TypeError(f"tasks must be an iterable of Task, got {type(tasks).__name__}")
    checked = tuple(tasks)
    first: dict[str, int] = {}
    for index, task in enumerate(checked):
        if not isinstance(task, Task):
            raise TypeError(f"task {index + 1} is not a Task, got {type(task).__name__}")
        try:
            batch_run_id(batch, task.id)
        except InvalidRunId as exc:
            raise TaskRefused(index, task.id, str(exc)) from None
        if task.id in first:
            again = f"duplicate task id {task.id!r} (first at task {first[task.id] + 1})"
            raise TaskRefused(index, task.id, again)
        first[task.id] = index
    return checked


async def vet(checked: Plan) -> Plan:
    """Check every task against the store, before anything starts: raise
    :class:`~polyloop.errors.TaskRefused` for the first one the store holds another run for
    (counting the others); else the plan without the tasks whose runs are finished, whose
    ``skipped`` outcomes it carries instead (so a rerun reads each finished log once). Store
    errors propagate (the store cannot be read: nothing can be decided). The logs are read
    ``_READERS`` at a time, for a store across a network."""
    job = checked.job
    verdicts: list[tuple[Verdict, TaskOutcome | None]] = [(Verdict("start"), None)] * len(
        checked.tasks
    )
    waiting = iter(enumerate(checked.tasks))

    async def reader() -> None:
        for index, task in waiting:
            run_id = batch_run_id(job.batch, task.id)
            log = await job.store.read_log(run_id)
            verdict = judge(task, job.batch, job.agent, log)
            if verdict.action == "skip":
                tally = Tally()
                tally.add(log.records)
                verdicts[index] = (verdict, tally.outcome(task.id, run_id, "skipped"))
            else:
                verdicts[index] = (verdict, None)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(_READERS, len(checked.tasks))):
                group.create_task(reader())
    except ExceptionGroup as failed:  # the store's own error, as a sequential read raises it
        raise _first(failed) from None
    refused = [(i, v) for i, (v, _) in enumerate(verdicts) if v.action == "refuse"]
    if refused:
        index, verdict = refused[0]
        task_id = checked.tasks[index].id
        reason = f"task {task_id!r}: {verdict.reason}"
        raise TaskRefused(index, task_id, reason, others=len(refused) - 1)
    skipped = tuple(outcome for _, outcome in verdicts if outcome is not None)
    to_drive = tuple(t for t, (_, o) in zip(checked.tasks, verdicts, strict=True) if o is None)
    return replace(checked, tasks=to_drive, skipped=checked.skipped + skipped)


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


async def execute(
    checked: Plan,
    *,
    progress: Progress | None = None,
    interrupt: asyncio.Event | None = None,
    started: float | None = None,
) -> BatchSummary:
    """Drive every task of a vetted plan through its backend and sum up.

    ``interrupt``: when it is set, the drives in flight are interrupted (their runs left
    unfinished and resumable), no further task starts, and the summary says ``interrupted``.
    Without it, cancelling this coroutine does the same and re-raises ``CancelledError``.
    """
    started = time.monotonic() if started is None else started
    outcomes: list[TaskOutcome] = []

    def report(outcome: TaskOutcome) -> None:
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)

    for outcome in checked.skipped:
        report(outcome)
    job = checked.job
    work = checked.backend.run(checked.tasks, job, concurrency=checked.concurrency, report=report)
    was_interrupted = False
    if interrupt is None:
        await work
    else:
        was_interrupted = await _until(work, interrupt)
    return BatchSummary(
        batch=job.batch,
        tasks=checked.total,
        outcomes=tuple(outcomes),
        wall_s=time.monotonic() - started,
        interrupted=was_interrupted,
    )


async def _until(work: Awaitable[None], interrupt: asyncio.Event) -> bool:
    """Await ``work`` unless ``interrupt`` is set first; then cancel it (an interruption) and
    wait for it. Whether it was interrupted."""
    running = asyncio.ensure_future(work)
    waiting = asyncio.ensure_future(interrupt.wait())
    try:
        await asyncio.wait({running, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        if not running.done():
            running.cancel()
        # the drives in flight are committing what they hold: wait for them, whatever comes
        await asyncio.wait({running})
    if running.cancelled():
        return True
    running.result()  # a backend's own error propagates
    return False


async def run_many(
    agent: AgentDefinition,
    tasks: Iterable[Task],
    *,
    seams: SeamsFactory,
    store: RunStore | str,
    batch: str,
    concurrency: int = 8,
    time_limit_s: float | None = None,
    backend: Backend | None = None,
    progress: Progress | None = None,
) -> BatchSummary:
    """Drive every task of a batch to a stop, ``concurrency`` at a time; resumable.

    Each task's run id is :func:`batch_run_id` ``(batch, task.id)``; its ``RunStarted`` records
    the batch id, the task id and the labels. Calling it again with the same batch resumes
    the unfinished runs (through ``resume()``: no action is replayed) and skips the finished
    ones, writing nothing for them; new tasks are started. Before anything starts, every task is
    checked: an invalid run id, a duplicate id, or a run in the store that is not this task's
    (another goal or labels, another batch, an unfinished run of another agent) raises
    :class:`~polyloop.TaskRefused` and nothing is written.

    ``seams`` is called once per driven run with its task and returns its
    :class:`RunSeams` (or a mapping with those keys); the run's executor is closed when the
    run stops. ``store`` is a store or a store URL (opened here, closed at the end; a backend
    that drives tasks in other processes needs a URL). A run that fails (a seam raising) does
    not stop the others: its outcome is ``failed`` with the exception, and its run stays
    resumable. ``time_limit_s`` bounds the wall time each run is driven in this call: past it
    the run finishes ``time_limit``. ``progress`` is called with each task's outcome as it
    arrives.

    Cancelling ``run_many`` *interrupts* the batch: the runs in flight are left unfinished and
    resumable (never ``cancelled``), and ``CancelledError`` propagates.
    """
    started = time.monotonic()
    opened = isinstance(store, str)
    the_store = open_store(store) if isinstance(store, str) else store
    try:
        checked = plan(
            agent,
            tasks,
            seams=seams,
            store=the_store,
            store_url=store if isinstance(store, str) else None,
            batch=batch,
            concurrency=concurrency,
            time_limit_s=time_limit_s,
            backend=backend,
        )
        vetted = await vet(checked)
        return await execute(vetted, progress=progress, started=started)
    finally:
        if opened:
            aclose = getattr(the_store, "aclose", None)
            if aclose is not None:
                await aclose()

"""``run_many``: check every task, then drive them all through a backend, then sum up.

One reason to change: the order of a batch's phases. Nothing is written before every task was
checked — its run id, its uniqueness, and against the store (:func:`~polyloop._batch._drive.judge`)
— so a refused batch leaves the store as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from polyloop._base._timeout import checked_timeout_s
from polyloop._batch._backend import AsyncioBackend, Backend, BatchJob
from polyloop._batch._drive import Verdict, judge
from polyloop._batch._outcome import Tally, TaskOutcome, What
from polyloop._batch._summary import BatchSummary
from polyloop._batch._tasks import SeamsFactory, Task, batch_run_id
from polyloop.errors import InvalidRunId, TaskRefused
from polyloop.ports import Instrumentation, RunStore
from polyloop.stores import open_store
from polyloop.types import AgentDefinition

__all__ = ["DEFAULT_GRACE_S", "Plan", "checked_grace_s", "execute", "plan", "run_many", "vet"]

_READERS = 16  # logs read at a time while vetting
#: Seconds an interrupted batch drains (actions in flight finish) before the rest is cancelled.
DEFAULT_GRACE_S = 30.0

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
    #: The tasks whose unfinished runs this invocation resumes, each as it stood when vetted
    #: (``interrupted``: what an interrupted invocation reports for one it never reached).
    resuming: Mapping[str, TaskOutcome] = field(default_factory=dict)

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
    resuming: dict[str, TaskOutcome] = {}
    fresh: set[str] = set()

    async def reader() -> None:
        for index, task in waiting:
            run_id = batch_run_id(job.batch, task.id)
            log = await job.store.read_log(run_id)
            verdict = judge(task, job.batch, job.agent, log)
            tally = Tally()
            tally.add(log.records)
            if verdict.action == "skip":
                verdicts[index] = (verdict, tally.outcome(task.id, run_id, "skipped"))
            else:
                verdicts[index] = (verdict, None)
            if verdict.action == "resume":
                resuming[task.id] = tally.outcome(task.id, run_id, "interrupted")
            if verdict.action == "start" and not log.records:
                fresh.add(task.id)  # its drive need not read the empty log again

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
    return replace(
        checked,
        job=replace(job, fresh=frozenset(fresh)),
        tasks=to_drive,
        skipped=checked.skipped + skipped,
        resuming=resuming,
    )


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


async def execute(
    checked: Plan,
    *,
    progress: Progress | None = None,
    interrupt: asyncio.Event | None = None,
    stop_now: asyncio.Event | None = None,
    grace_s: float | None = DEFAULT_GRACE_S,
    started: float | None = None,
) -> BatchSummary:
    """Drive every task of a vetted plan through its backend and sum up.

    ``interrupt``: when it is set the batch *drains* (a backend that drains, as the default
    one): no new task, no new model call, no new action; each model call or action in flight
    finishes and is recorded, and its run stops unfinished before the next one. Once the drain
    is done — or after ``grace_s`` seconds, or as soon as ``stop_now`` is set, or at once for a
    backend that does not drain — what is left is cancelled (those runs stay unfinished and
    resumable; an action cut in flight ends them ``resume_state_unknown`` on resume). The
    summary then says ``interrupted`` and each task's outcome is read back from the store, so
    it agrees with the store's index. Without ``interrupt``, cancelling this coroutine cancels
    the drives in flight at once and re-raises ``CancelledError``.
    """
    started = time.monotonic() if started is None else started
    outcomes: list[TaskOutcome] = []

    def report(outcome: TaskOutcome) -> None:
        outcomes.append(outcome)
        if progress is not None:
            progress(outcome)

    for outcome in checked.skipped:
        report(outcome)
    drains = interrupt is not None and getattr(checked.backend, "drains", False) is True
    job = replace(checked.job, draining=asyncio.Event()) if drains else checked.job
    work = checked.backend.run(checked.tasks, job, concurrency=checked.concurrency, report=report)
    was_interrupted = False
    if interrupt is None:
        await work
    else:
        stop = _Stop(interrupt, job.draining, stop_now, grace_s)
        was_interrupted = await _until(work, stop)
    if was_interrupted:
        outcomes = await _read_back(checked, outcomes)
    return BatchSummary(
        batch=job.batch,
        tasks=checked.total,
        outcomes=tuple(outcomes),
        wall_s=time.monotonic() - started,
        interrupted=was_interrupted,
    )


@dataclass(frozen=True, slots=True)
class _Stop:
    """How an interrupted batch stops: ``interrupt`` starts the drain (``draining`` set; none:
    the backend does not drain), ``stop_now`` or ``grace_s`` ends it."""

    interrupt: asyncio.Event
    draining: asyncio.Event | None
    stop_now: asyncio.Event | None
    grace_s: float | None


async def _until(work: Awaitable[None], stop: _Stop) -> bool:
    """Await ``work`` unless the interrupt comes first; then drain, then cancel what is left,
    and wait for it. Whether it was interrupted."""
    running = asyncio.ensure_future(work)
    waiters: list[asyncio.Future[Any]] = []
    try:
        waiters.append(asyncio.ensure_future(stop.interrupt.wait()))
        await asyncio.wait({running, *waiters}, return_when=asyncio.FIRST_COMPLETED)
        if not running.done() and stop.draining is not None:
            stop.draining.set()
            if stop.stop_now is not None:
                waiters.append(asyncio.ensure_future(stop.stop_now.wait()))
            await asyncio.wait(
                {running, *waiters[1:]}, timeout=stop.grace_s, return_when=asyncio.FIRST_COMPLETED
            )
    finally:
        for waiter in waiters:
            waiter.cancel()
        if not running.done():
            running.cancel()
        # the drives in flight are committing what they hold: wait for them, whatever comes
        await asyncio.wait({running})
    if not running.cancelled():
        running.result()  # a backend's own error propagates
    return stop.interrupt.is_set()


async def _read_back(checked: Plan, outcomes: list[TaskOutcome]) -> list[TaskOutcome]:
    """The outcomes of an interrupted invocation as the store has them: a task reported
    ``interrupted`` whose run has nothing logged was not started; one whose run is finished
    counts as started (or resumed); a task never reached whose run is unfinished from an
    earlier invocation is ``interrupted``. A log that cannot be read leaves the outcome as
    reported."""
    job = checked.job
    read: list[TaskOutcome] = []
    for outcome in outcomes:
        if outcome.what != "interrupted":
            read.append(outcome)
            continue
        run_id = batch_run_id(job.batch, outcome.task_id)
        try:
            log = await job.store.read_log(run_id)
        except Exception:
            read.append(outcome)
            continue
        if not log.records:
            continue
        tally = Tally()
        tally.add(log.records)
        driven: What = "resumed" if outcome.task_id in checked.resuming else "started"
        read.append(
            tally.outcome(outcome.task_id, run_id, driven if log.finished else "interrupted")
        )
    reached = {outcome.task_id for outcome in outcomes}
    read.extend(o for task_id, o in checked.resuming.items() if task_id not in reached)
    return read


def _check_instrumentation(instrumentation: object) -> None:
    if instrumentation is not None and not callable(getattr(instrumentation, "run", None)):
        raise TypeError(
            f"instrumentation must have a callable run() (got {type(instrumentation).__name__})"
        )


def checked_grace_s(value: object) -> float | None:
    """A grace period: ``0`` (no drain), a finite number of seconds > 0, or ``None`` (no
    limit); else ``ValueError``."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return 0.0
    return checked_timeout_s("grace_s", value)


async def _drained_on_cancel(
    vetted: Plan, progress: Progress | None, grace_s: float | None, started: float
) -> BatchSummary:
    """:func:`execute`, where the first cancellation drains and the next one stops at once;
    ``CancelledError`` is re-raised once the batch has stopped."""
    interrupt, stop_now = asyncio.Event(), asyncio.Event()
    work = asyncio.ensure_future(
        execute(
            vetted,
            progress=progress,
            interrupt=interrupt,
            stop_now=stop_now,
            grace_s=grace_s,
            started=started,
        )
    )
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        interrupt.set()
        while not work.done():
            try:
                await asyncio.shield(work)
            except asyncio.CancelledError:
                stop_now.set()
            except Exception:
                break  # the backend's own error: the cancellation is what propagates
        raise


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
    grace_s: float | None = DEFAULT_GRACE_S,
    instrumentation: Instrumentation | None = None,
) -> BatchSummary:
    """Drive every task of a batch to a stop, ``concurrency`` at a time; resumable.

    Each task's run id is :func:`batch_run_id` ``(batch, task.id)``; its ``RunStarted`` records
    the batch id, the task id and the labels. Calling it again with the same batch resumes
    the unfinished runs (through ``resume()``: no action is replayed) and skips the finished
    ones, writing nothing for them; new tasks are started. Before anything starts, every task is
    checked: an invalid run id, a duplicate id, or a run in the store that is not this task's
    (another goal or labels, another batch, an unfinished run of another agent) raises
    :class:`~polyloop.TaskRefused` and nothing is written.

    ``seams`` is called once per driven run with its task, returning its :class:`RunSeams`;
    ``store`` is a store or a URL (opened and closed here). A failed run (a seam raising) stops
    no other and stays resumable. ``time_limit_s`` bounds each run's wall time in this call;
    ``progress`` gets each outcome as it arrives; ``instrumentation`` is every run's (its span
    carries the batch and task ids). Cancelling ``run_many`` *drains* the batch — no new task,
    model call or action; those in flight finish and are recorded — for at most ``grace_s``
    seconds (``None``: no limit; ``0``: none), then, or at a second cancellation, cancels the
    rest; the runs stay unfinished and resumable, and ``CancelledError`` propagates.
    """
    started = time.monotonic()
    grace_s = checked_grace_s(grace_s)
    _check_instrumentation(instrumentation)
    async with _store_of(store) as the_store:
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
        vetted = await vet(
            replace(checked, job=replace(checked.job, instrumentation=instrumentation))
        )
        return await _drained_on_cancel(vetted, progress, grace_s, started)


@contextlib.asynccontextmanager
async def _store_of(store: RunStore | str) -> AsyncIterator[RunStore]:
    """``store`` itself, or the store its URL opens, closed on the way out."""
    if not isinstance(store, str):
        yield store
        return
    opened = open_store(store)
    try:
        yield opened
    finally:
        aclose = getattr(opened, "aclose", None)
        if aclose is not None:
            await aclose()

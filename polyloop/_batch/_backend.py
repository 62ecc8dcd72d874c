"""Where the tasks of a batch are driven: the backend protocol and the in-process default.

One reason to change: how tasks are dispatched. A backend gets the tasks and a
:class:`BatchJob` (everything :func:`~polyloop._batch._drive.drive_task` needs besides the
task) and drives each task once, at most ``concurrency`` at a time, calling ``report`` in the
driver's process with each :class:`TaskOutcome` as it arrives.

Interruption is cancellation: when ``Backend.run`` is cancelled it starts no further task,
cancels the drives in flight (a cancelled ``drive_task`` leaves its run unfinished and
resumable), reports each of them ``interrupted``, waits for them and re-raises. A backend whose
``drains`` attribute is true is drained first: ``job.draining`` is set, it starts no new task,
its runs finish the model call or action in flight and stop before the next one; it is
cancelled only if that takes longer than the grace period (or at a second interrupt).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from polyloop._batch._drive import drive_task
from polyloop._batch._outcome import TaskOutcome
from polyloop._batch._tasks import SeamsFactory, Task, batch_run_id
from polyloop.ports import Instrumentation, RunStore
from polyloop.stores import sqlite_path
from polyloop.types import AgentDefinition

__all__ = [
    "AsyncioBackend",
    "Backend",
    "BatchJob",
    "Report",
    "ShippedJob",
    "interrupted",
    "shipped",
    "worker_store_url",
]

#: Called in the driver's process with each outcome, in the order they arrive.
Report = Callable[[TaskOutcome], None]


@dataclass(frozen=True, slots=True)
class BatchJob:
    """What every task of a batch shares: the agent, the seams factory, the store, the batch.

    ``store_url`` is the URL the store was opened from, or ``None`` when ``run_many`` was given
    a store object: a backend that drives tasks in other processes opens its own store from it
    (and refuses a job without one). ``agent`` and ``seams`` must then be picklable (a seams
    factory defined at module level).
    """

    agent: AgentDefinition
    seams: SeamsFactory
    store: RunStore
    store_url: str | None
    batch: str
    time_limit_s: float | None = None
    #: Set at the first interrupt: a backend that drains (``drains = True``) starts no new task
    #: and its runs start no new model call or action (:func:`drive_task`).
    draining: asyncio.Event | None = field(default=None, compare=False)
    #: The instrumentation each run gets (``run(..., instrumentation=...)``), or ``None``.
    instrumentation: Instrumentation | None = None
    #: The ids of the tasks whose runs had no log when the batch was vetted: their drive reads
    #: no log (a run started by another process since then is fenced off by the store).
    fresh: frozenset[str] = frozenset()

    async def drive(self, task: Task) -> TaskOutcome:
        """:func:`drive_task` for ``task`` against this job's store, in this process."""
        return await drive_task(
            self.agent,
            task,
            seams=self.seams,
            store=self.store,
            batch=self.batch,
            time_limit_s=self.time_limit_s,
            draining=self.draining,
            instrumentation=self.instrumentation,
            fresh=task.id in self.fresh,
        )


@dataclass(frozen=True, slots=True)
class ShippedJob:
    """What a task driven in another process needs besides the task: the job with its store as
    a URL, since each process opens its own (pickled once, sent to each worker)."""

    agent: AgentDefinition
    seams: SeamsFactory
    store_url: str
    batch: str
    time_limit_s: float | None
    instrumentation: Instrumentation | None
    fresh: frozenset[str] = frozenset()


def shipped(job: BatchJob, who: str, *, instrumentation: bool = True) -> ShippedJob:
    """``job`` as a backend sends it to other processes (``who`` names the backend in the
    errors of :func:`worker_store_url`); its instrumentation only if ``instrumentation``."""
    return ShippedJob(
        job.agent,
        job.seams,
        worker_store_url(job.store_url, who),
        job.batch,
        job.time_limit_s,
        job.instrumentation if instrumentation else None,
        job.fresh,
    )


def worker_store_url(store: str | None, who: str) -> str:
    """The URL each worker process opens: a SQLite path made absolute (a worker's directory is
    not necessarily the driver's); a store given as an object, and ``memory:``, refused (each
    worker would have a store of its own)."""
    if store is None:
        raise TypeError(
            f"{who} needs the store as a URL, since each worker opens its own: pass "
            "run_many(store='sqlite:///runs.db') or a postgresql:// URL, not a store object"
        )
    if store == "memory:":
        raise ValueError(
            f"{who} cannot use the store 'memory:': each worker would have its own; use a "
            "SQLite file (sqlite:///runs.db) on one machine, or PostgreSQL (postgresql://…)"
        )
    path = sqlite_path(store)  # ValueError (one line) for a URL of no store
    if path is None:
        return store
    return "sqlite:///" + os.path.abspath(path)


@runtime_checkable
class Backend(Protocol):
    """Drives the tasks of a batch (see the module's docstring for the whole contract)."""

    async def run(
        self,
        tasks: Sequence[Task],
        job: BatchJob,
        *,
        concurrency: int,
        report: Report,
    ) -> None: ...


def interrupted(task: Task, batch: str) -> TaskOutcome:
    """The outcome a backend reports for a task whose drive it interrupted."""
    return TaskOutcome(task_id=task.id, run_id=batch_run_id(batch, task.id), what="interrupted")


class AsyncioBackend:
    """The default: every task in this process's event loop, ``concurrency`` at a time.

    ``concurrency`` workers take the next task as they become free, so a thousand tasks make
    ``concurrency`` asyncio tasks, not a thousand. It drains: once ``job.draining`` is set no
    worker takes a new task.
    """

    drains = True

    async def run(
        self,
        tasks: Sequence[Task],
        job: BatchJob,
        *,
        concurrency: int,
        report: Report,
    ) -> None:
        waiting = iter(tasks)  # shared by the workers: next() never suspends

        async def worker() -> None:
            for task in waiting:
                if job.draining is not None and job.draining.is_set():
                    return
                try:
                    outcome = await job.drive(task)
                except asyncio.CancelledError:
                    report(interrupted(task, job.batch))
                    raise
                report(outcome)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, len(tasks))):
                group.create_task(worker())

    def __repr__(self) -> str:
        return "AsyncioBackend()"

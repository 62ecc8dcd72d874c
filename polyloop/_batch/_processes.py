"""ProcessBackend: the tasks of ``run_many`` driven by worker processes on this machine.

One reason to change: how tasks are shared between local processes. Standard library only
(``multiprocessing`` with the ``spawn`` start method, and pipes).

Each worker process opens the store from the job's URL (a SQLite file — SQLite's own locking
serialises the processes' commits — or PostgreSQL), runs an event loop of its own, and drives
the tasks the driver sends it with :func:`~polyloop._batch._drive.drive_task`, the function the
in-process backend runs too, at most ``concurrency`` at a time. The driver hands out the next
task to whichever worker has room, and reports each outcome in its own process as it arrives.

What keeps a run from being driven twice is the store: ``sequence`` fencing turns a second
driver of one run (another batch invocation on the same store) into ``RunConflict``. A worker
process that dies (killed, out of memory) stops no other: the outcome of each task it had in
flight is read back from the store — ``failed`` with the reason for a run left unfinished and
resumable, as the next invocation finds it — and the other workers take the rest. The workers
ignore SIGINT and SIGTERM (a Ctrl-C in a terminal reaches the whole process group): the driver
alone decides, and tells them to drain or to cancel (see :mod:`polyloop._batch._backend`).
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from polyloop._base._exception_text import exception_text
from polyloop._base._shown import shown
from polyloop._batch._backend import BatchJob, Report, ShippedJob, interrupted, shipped
from polyloop._batch._drive import drive_task
from polyloop._batch._outcome import Tally, TaskOutcome
from polyloop._batch._tasks import Task, batch_run_id
from polyloop.stores import open_store

if TYPE_CHECKING:  # multiprocessing is imported when a batch starts its workers
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["ProcessBackend"]

_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
#: After a cancellation, how long the workers get to report their runs interrupted (they
#: commit nothing more, so this is seconds of slack) before they are killed.
_CANCEL_WAIT_S: Final = 10.0
#: At the end, how long a worker with nothing in flight gets to close its store and exit.
_EXIT_WAIT_S: Final = 10.0


class ProcessBackend:
    """Drives the tasks of ``run_many`` in ``workers`` processes on this machine.

    Each worker process has its own event loop and drives at most ``concurrency`` runs at a
    time (``run_many``'s ``concurrency`` is *per worker*: ``workers * concurrency`` runs in
    flight in all). The store must be given by URL — a SQLite file or PostgreSQL — since each
    worker opens its own; a store object and ``memory:`` are refused. The agent, the seams
    factory and the instrumentation go to the workers by pickling (a seams factory defined at
    module level, in a module the workers can import). Resume, fencing, the drain at the
    first interrupt and the summary are the in-process backend's.
    """

    drains = True

    def __init__(self, workers: int = 2) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(
                f"ProcessBackend workers must be an int >= 1, got {shown(workers, 60)}"
            )
        self.workers = workers

    async def run(
        self,
        tasks: Sequence[Task],
        job: BatchJob,
        *,
        concurrency: int,
        report: Report,
    ) -> None:
        """Hand the tasks to the worker processes, ``concurrency`` in flight in each; report
        each outcome as it arrives. Cancelled, it sends nothing more and tells the workers to
        cancel their drives (each reported ``interrupted``), waits for them and re-raises."""
        sent = shipped(job, "ProcessBackend")
        if not tasks:
            return
        try:
            payload = pickle.dumps(sent)
        except Exception as exc:
            raise TypeError(
                "the agent, the seams factory and the instrumentation go to the worker "
                f"processes by pickling; these cannot be pickled: {exception_text(exc)}"
            ) from exc
        pool = _Pool(job, report, concurrency, iter(tasks))
        pool.start(min(self.workers, len(tasks)), payload)
        try:
            await pool.drive()
        finally:
            await pool.close()

    def __repr__(self) -> str:
        return f"ProcessBackend(workers={self.workers})"


@dataclass(eq=False)
class _Worker:
    """One worker process as the driver sees it."""

    number: int
    process: BaseProcess
    to_worker: Connection
    in_flight: dict[str, Task] = field(default_factory=dict)
    alive: bool = True
    broken: str | None = None  # why it could not start (its store, its job), once it said so


class _Pool:
    """The driver's side: the workers, the tasks still to send, the outcomes to report."""

    def __init__(
        self, job: BatchJob, report: Report, concurrency: int, waiting: Iterator[Task]
    ) -> None:
        self.job = job
        self.report = report
        self.concurrency = concurrency
        self.waiting = waiting
        self.next_task: Task | None = next(waiting, None)
        self.workers: list[_Worker] = []
        self.events: asyncio.Queue[tuple[int, tuple[Any, ...]]] = asyncio.Queue()
        self.drain_sent = False

    def start(self, count: int, payload: bytes) -> None:
        """Start ``count`` worker processes, each with a thread reading what it says."""
        import multiprocessing  # importing it aliases __main__: only when a batch uses it

        context = multiprocessing.get_context("spawn")
        loop = asyncio.get_running_loop()
        # Blocked across the start, inherited by the child, which ignores them before
        # unblocking: a Ctrl-C meant for the driver never kills a worker while it starts.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            for number in range(count):
                from_driver, to_worker = context.Pipe(duplex=False)
                from_worker, to_driver = context.Pipe(duplex=False)
                process = context.Process(
                    target=_worker_main,
                    args=(payload, from_driver, to_driver),
                    name=f"polyloop-batch-worker-{number}",
                    daemon=True,
                )
                process.start()
                from_driver.close()
                to_driver.close()
                self.workers.append(_Worker(number, process, to_worker))
                threading.Thread(
                    target=_read_worker,
                    args=(number, from_worker, loop, self.events),
                    name=f"polyloop-batch-reader-{number}",
                    daemon=True,
                ).start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _draining(self) -> bool:
        return self.job.draining is not None and self.job.draining.is_set()

    def _in_flight(self) -> int:
        return sum(len(worker.in_flight) for worker in self.workers)

    def _dispatch(self) -> None:
        """Send the next tasks to the workers with room, the least busy first."""
        while self.next_task is not None and not self._draining():
            alive = [w for w in self.workers if w.alive and w.broken is None]
            roomy = [w for w in alive if len(w.in_flight) < self.concurrency]
            if not roomy:
                return
            worker = min(roomy, key=lambda w: len(w.in_flight))
            task = self.next_task
            worker.in_flight[task.id] = task
            if not self._send(worker, ("task", task)):
                del worker.in_flight[task.id]
                continue
            self.next_task = next(self.waiting, None)

    def _send(self, worker: _Worker, message: tuple[Any, ...]) -> bool:
        if not worker.alive:
            return False
        try:
            worker.to_worker.send(message)
        except (OSError, ValueError):  # its end is closed: it died; its reader says so too
            return False
        return True

    async def drive(self) -> None:
        """Until every task is reported, or the drain stopped them all."""
        try:
            while True:
                if self._draining() and not self.drain_sent:
                    self.drain_sent = True
                    for worker in self.workers:
                        self._send(worker, ("drain",))
                self._dispatch()
                if self._in_flight() == 0 and (self.next_task is None or self._draining()):
                    return
                if not any(w.alive and w.broken is None for w in self.workers):
                    await self._nobody_left()
                    return
                await self._handle(await self._next_event())
        except asyncio.CancelledError:
            await self._cancel()
            raise

    async def _next_event(self) -> tuple[int, tuple[Any, ...]] | None:
        """The next thing a worker said, or ``None`` when the drain starts meanwhile."""
        if self.job.draining is None or self.drain_sent:
            return await self.events.get()
        getting = asyncio.ensure_future(self.events.get())
        drain = asyncio.ensure_future(self.job.draining.wait())
        try:
            await asyncio.wait({getting, drain}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            drain.cancel()
            if not getting.done():
                getting.cancel()
        return getting.result() if getting.done() and not getting.cancelled() else None

    async def _handle(self, event: tuple[int, tuple[Any, ...]] | None) -> None:
        if event is None:
            return
        number, message = event
        worker = self.workers[number]
        kind = message[0]
        if kind == "outcome":
            outcome: TaskOutcome = message[1]
            if worker.in_flight.pop(outcome.task_id, None) is not None:
                self.report(outcome)
        elif kind == "broken":
            worker.broken = message[1]
            for task in list(worker.in_flight.values()):
                del worker.in_flight[task.id]
                self.report(_without_outcome(task, self.job.batch, worker.broken))
        elif kind == "gone":
            await self._gone(worker)

    async def _gone(self, worker: _Worker) -> None:
        """A worker process ended: its runs in flight are read back from the store."""
        worker.alive = False
        await asyncio.to_thread(worker.process.join, _EXIT_WAIT_S)
        why = worker.broken or (
            f"its worker process died (exit code {worker.process.exitcode}); the run is "
            "unfinished and resumable"
        )
        for task in list(worker.in_flight.values()):
            del worker.in_flight[task.id]
            self.report(await self._read_back(task, why))

    async def _read_back(self, task: Task, why: str) -> TaskOutcome:
        """The outcome of a task whose worker died: finished if its run is, else failed."""
        run_id = batch_run_id(self.job.batch, task.id)
        try:
            log = await self.job.store.read_log(run_id)
        except Exception:
            return _without_outcome(task, self.job.batch, why)
        tally = Tally()
        tally.add(log.records)
        if log.finished is not None:
            return tally.outcome(task.id, run_id, "started")
        return tally.outcome(task.id, run_id, "failed", error=why)

    async def _nobody_left(self) -> None:
        """Every worker is gone or broken: the tasks never sent fail with the reason."""
        reasons = [w.broken for w in self.workers if w.broken is not None]
        why = reasons[0] if reasons else "every worker process died; the task was not started"
        while self.next_task is not None:
            self.report(_without_outcome(self.next_task, self.job.batch, why))
            self.next_task = next(self.waiting, None)

    async def _cancel(self) -> None:
        """Tell every worker to cancel its drives; wait for their outcomes (each
        ``interrupted``), or kill the worker that is too slow to give them."""
        for worker in self.workers:
            self._send(worker, ("cancel",))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CANCEL_WAIT_S
        while self._in_flight() and any(w.alive and w.in_flight for w in self.workers):
            left = deadline - loop.time()
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await self._handle_cancelled(await asyncio.wait_for(self.events.get(), left))
        for worker in self.workers:
            for task in list(worker.in_flight.values()):
                self.report(interrupted(task, self.job.batch))
            worker.in_flight.clear()

    async def _handle_cancelled(self, event: tuple[int, tuple[Any, ...]]) -> None:
        """While cancelling, a worker that ended has its runs reported ``interrupted``."""
        number, message = event
        if message[0] == "gone":
            self.workers[number].alive = False
            return
        await self._handle(event)

    async def close(self) -> None:
        """Tell each worker there is nothing more; wait for it to exit, or kill it."""
        for worker in self.workers:
            self._send(worker, ("end",))
        for worker in self.workers:
            await asyncio.to_thread(worker.process.join, _EXIT_WAIT_S)
            if worker.process.is_alive():
                worker.process.kill()
                await asyncio.to_thread(worker.process.join, _EXIT_WAIT_S)
            with contextlib.suppress(OSError):
                worker.to_worker.close()


def _without_outcome(task: Task, batch: str, why: str) -> TaskOutcome:
    return TaskOutcome(
        task_id=task.id, run_id=batch_run_id(batch, task.id), what="failed", error=why
    )


def _read_worker(
    number: int,
    conn: Connection,
    loop: asyncio.AbstractEventLoop,
    events: asyncio.Queue[tuple[int, tuple[Any, ...]]],
) -> None:
    """In a driver thread: each message of one worker onto the driver's event loop, then
    ``gone`` once its end of the pipe closes (it exited, or died)."""
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = ("gone",)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(events.put_nowait, (number, message))
            if message[0] == "gone":
                return
    finally:
        conn.close()


# --------------------------------------------------------------------------- in the worker


def _worker_main(payload: bytes, from_driver: Connection, to_driver: Connection) -> None:
    """The body of a worker process: the driver alone handles the signals."""
    for number in _SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    try:
        job: ShippedJob = pickle.loads(payload)
    except Exception as exc:
        to_driver.send(("broken", f"the worker could not load the job: {exception_text(exc)}"))
        return
    asyncio.run(_serve(job, from_driver, to_driver))


async def _serve(job: ShippedJob, from_driver: Connection, to_driver: Connection) -> None:
    """Drive each task the driver sends, until it says ``end`` or ``cancel`` (or is gone)."""
    try:
        store = open_store(job.store_url)
    except Exception as exc:
        to_driver.send(("broken", f"the store cannot be opened: {exception_text(exc)}"))
        return
    inbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    threading.Thread(target=_read_driver, args=(from_driver, loop, inbox), daemon=True).start()
    draining = asyncio.Event()
    running: set[asyncio.Task[None]] = set()

    async def one(task: Task) -> None:
        try:
            outcome = await drive_task(
                job.agent,
                task,
                seams=job.seams,
                store=store,
                batch=job.batch,
                time_limit_s=job.time_limit_s,
                draining=draining,
                instrumentation=job.instrumentation,
                fresh=task.id in job.fresh,
            )
        except asyncio.CancelledError:
            to_driver.send(("outcome", interrupted(task, job.batch)))
            raise
        to_driver.send(("outcome", outcome))

    try:
        while True:
            message = await inbox.get()
            if message[0] == "task":
                drive = asyncio.create_task(one(message[1]))
                running.add(drive)
                drive.add_done_callback(running.discard)
            elif message[0] == "drain":
                draining.set()
            else:  # "end" (nothing in flight), "cancel", or the driver is gone
                break
    finally:
        for drive in running:
            drive.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()
        to_driver.close()


def _read_driver(
    conn: Connection, loop: asyncio.AbstractEventLoop, inbox: asyncio.Queue[tuple[Any, ...]]
) -> None:
    """In a worker thread: each message of the driver onto the worker's event loop; ``gone``
    once the driver's end closes (the driver died: cancel, the runs stay resumable)."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            message = ("gone",)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(inbox.put_nowait, message)
        if message[0] in ("gone", "end", "cancel"):
            return

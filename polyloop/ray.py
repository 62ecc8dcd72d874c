"""RayBackend: the tasks of ``run_many`` as Ray tasks, on the workers of a Ray cluster.

Extra ``polyloop[ray]``. Importing this module imports only the standard library; Ray is
imported when a :class:`RayBackend` is built, which fails with the install hint without it.

Each task of the batch becomes one Ray task. In its worker it opens the store from its URL,
calls the seams factory with its task and runs :func:`polyloop._batch._drive.drive_task` — the
function the in-process backend runs too — in an event loop of its own. Nothing of the driver's
process is used there: the agent and the seams factory travel by pickling (Ray's cloudpickle:
functions and classes of an importable module by reference, anything else by value).

What keeps a run from being driven twice is the store, not Ray: ``sequence`` fencing turns a
second driver of the same run into ``RunConflict`` (a ``failed`` outcome), never into a repeated
action. A worker that dies mid-run (killed, its node lost) leaves the run unfinished and
resumable: Ray retries the task (``max_retries``), and the retry resumes the run through the
same ``drive_task``; once the retries are spent, the task's outcome is ``interrupted`` and the
next invocation of the batch resumes it.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Final

from polyloop._base._exception_text import exception_text
from polyloop._base._shown import shown
from polyloop._batch import (
    BatchJob,
    Report,
    ShippedJob,
    Task,
    TaskOutcome,
    What,
    batch_run_id,
    drive_task,
    interrupted,
    shipped,
)
from polyloop.stores import open_store

__all__ = ["RayBackend"]

_INSTALL_HINT: Final = "RayBackend needs Ray: pip install 'polyloop[ray]'"

# Options the backend sets itself: a retry of a task whose worker died is the backend's business
# (max_retries, its own argument); an exception raised in a task is its outcome, never retried;
# a task returns exactly one outcome.
_OWN_OPTIONS: Final = frozenset(("max_retries", "retry_exceptions", "num_returns"))


def _import_ray() -> ModuleType:
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ImportError(f"{_INSTALL_HINT} ({exc})") from exc


def _drive_in_worker(job: ShippedJob, task: Task) -> TaskOutcome:
    """The body of each Ray task: open the store, drive the task in a new event loop, close."""
    return asyncio.run(_drive(job, task))


async def _drive(job: ShippedJob, task: Task) -> TaskOutcome:
    store = open_store(job.store_url)
    try:
        return await drive_task(
            job.agent,
            task,
            seams=job.seams,
            store=store,
            batch=job.batch,
            time_limit_s=job.time_limit_s,
            fresh=task.id in job.fresh,
        )
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


class RayBackend:
    """Runs the tasks of ``run_many`` as Ray tasks (``polyloop[ray]``).

    ``address``: the cluster to connect to (``"auto"``, ``"ray://host:10001"``,
    ``"host:6379"``); ``None`` uses Ray as it is already initialised in this process, or else
    ``ray.init()``'s own choice (``RAY_ADDRESS``, else a new local cluster). A connection the
    backend made is closed (``ray.shutdown()``) when the batch ends; one it found is left open.
    ``max_retries``: how many times Ray runs a task again after its worker died (each retry
    resumes the run). ``options``: passed to each task's ``.options()`` (``num_cpus``,
    ``memory``, ``resources``, ``runtime_env``, ``scheduling_strategy``…), checked by Ray here.

    The store must be given to ``run_many`` by URL, since each worker opens its own:
    PostgreSQL for a cluster of many machines; a SQLite file only where every worker sees the
    same file (one machine). ``memory:`` is refused (each worker would have its own).
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        max_retries: int = 3,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if address is not None and (
            not isinstance(address, str)
            or not address
            or not address.isprintable()  # control characters, lone surrogates
            or any(c.isspace() for c in address)
        ):
            raise ValueError(
                "RayBackend address must be None or a cluster address ('auto', "
                f"'ray://host:10001', 'host:6379'), got {shown(address, 60)}"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(
                f"RayBackend max_retries must be an int >= 0, got {shown(max_retries, 60)}"
            )
        given = dict(options or {}) if isinstance(options, Mapping | None) else None
        if given is None:
            raise TypeError(f"RayBackend options must be a mapping, got {type(options).__name__}")
        bad_keys = sorted(shown(k, 40) for k in given if not isinstance(k, str))
        if bad_keys:
            raise TypeError(f"RayBackend options must have str keys, got {', '.join(bad_keys)}")
        own = sorted(k for k in given if k in _OWN_OPTIONS)
        if own:
            raise ValueError(
                f"RayBackend options may not set {', '.join(own)}: the backend sets "
                f"{', '.join(sorted(_OWN_OPTIONS))} itself (use max_retries=)"
            )
        self._ray = _import_ray()
        self.address = address
        self.max_retries = max_retries
        self.options: dict[str, Any] = given
        try:
            self._remote = self._ray.remote(_drive_in_worker).options(
                max_retries=max_retries, retry_exceptions=False, **given
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"RayBackend options refused by Ray: {exc}") from None

    async def run(
        self,
        tasks: Sequence[Task],
        job: BatchJob,
        *,
        concurrency: int,
        report: Report,
    ) -> None:
        """Submit each task as a Ray task, at most ``concurrency`` in flight; ``report`` each
        outcome as it arrives.

        Cancelled (Ctrl-C in ``run_many``), it submits nothing more and force-cancels the Ray
        tasks in flight: their worker processes are killed, so their runs are left unfinished
        and resumable (no ``RunFinished(cancelled)`` is written), each reported
        ``interrupted``.
        """
        sent = shipped(job, "RayBackend", instrumentation=False)
        if not tasks:
            return  # nothing to send: no reason to connect to a cluster
        ray = self._ray
        connected_here = not ray.is_initialized()
        if connected_here:
            ray.init(address=self.address)
        elif self.address is not None:
            raise RuntimeError(
                f"RayBackend(address={self.address!r}): Ray is already initialised in this "
                "process; pass address=None to use that connection"
            )
        try:
            try:
                job_ref = ray.put(sent)
            except Exception as exc:
                raise TypeError(
                    "the agent and the seams factory go to the Ray workers by pickling; "
                    f"this one cannot be pickled: {exception_text(exc)}"
                ) from exc
            await self._submit(tasks, job_ref, job.batch, concurrency, report)
        finally:
            if connected_here:
                ray.shutdown()

    async def _submit(
        self,
        tasks: Sequence[Task],
        job_ref: Any,
        batch: str,
        concurrency: int,
        report: Report,
    ) -> None:
        waiting = iter(tasks)
        in_flight: dict[asyncio.Future[Any], tuple[Any, Task]] = {}
        try:
            while True:
                while len(in_flight) < concurrency:
                    task = next(waiting, None)
                    if task is None:
                        break
                    ref = self._remote.remote(job_ref, task)
                    in_flight[asyncio.wrap_future(ref.future())] = (ref, task)
                if not in_flight:
                    return
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    _, task = in_flight.pop(future)
                    report(self._outcome(future, task, batch))
        except asyncio.CancelledError:
            for ref, _ in in_flight.values():
                self._ray.cancel(ref, force=True)
            if in_flight:
                await asyncio.wait(in_flight)
            for future, (_, task) in in_flight.items():
                report(self._outcome(future, task, batch))  # done meanwhile, or interrupted
            raise

    def _outcome(self, future: asyncio.Future[Any], task: Task, batch: str) -> TaskOutcome:
        """What a finished Ray task says: its outcome, or why it has none."""
        if future.cancelled():
            return interrupted(task, batch)
        exc = future.exception()
        if exc is None:
            outcome: TaskOutcome = future.result()
            return outcome
        errors = self._ray.exceptions
        if isinstance(exc, errors.TaskCancelledError):
            return interrupted(task, batch)
        if isinstance(exc, errors.RayTaskError):
            # An exception raised in the worker around drive_task (opening the store, loading
            # the seams factory): the run is as it was, resumable.
            cause = getattr(exc, "cause", None)
            return _without_outcome(task, batch, "failed", cause or exc)
        # The worker died and the retries are spent, its node was lost, …: cut from outside.
        return _without_outcome(task, batch, "interrupted", exc)

    def __repr__(self) -> str:
        return (
            f"RayBackend(address={self.address!r}, max_retries={self.max_retries}, "
            f"options={self.options!r})"
        )


def _without_outcome(task: Task, batch: str, what: What, exc: BaseException) -> TaskOutcome:
    """The outcome of a task whose Ray task returned none; its run is left as it was."""
    return TaskOutcome(
        task_id=task.id,
        run_id=batch_run_id(batch, task.id),
        what=what,
        error=exception_text(exc),
    )

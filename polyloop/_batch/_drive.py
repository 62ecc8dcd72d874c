"""One task of a batch: skip, resume, refuse or start it — decided here and nowhere else.

:func:`drive_task` is what every backend runs per task, in the driver's process (the asyncio
backend) or in a worker on another machine (a Ray backend, which opens the store from its URL
first): it depends on nothing process-local of the driver. :func:`judge` is the decision alone,
a pure function of the task and the run's log, which ``run_many`` also applies to every task
before anything starts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Literal

from polyloop._base._exception_text import exception_text
from polyloop._base._shown import shown
from polyloop._batch._outcome import Tally, TaskOutcome, What
from polyloop._batch._tasks import RunSeams, SeamsFactory, Task, batch_run_id, seams_of
from polyloop._loop._run import Drained, Driving, proceed, start
from polyloop.errors import InvalidRunId, RunAlreadyExists
from polyloop.ports import EventSink, Instrumentation, RunStore
from polyloop.types import AgentDefinition, Event, RunLog, parameters_hash

__all__ = ["Verdict", "drive_task", "judge"]

_log = logging.getLogger("polyloop")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a task: ``start``, ``resume``, ``skip``, or ``refuse`` (``reason``)."""

    action: Literal["start", "resume", "skip", "refuse"]
    reason: str | None = None


_START, _RESUME, _SKIP = Verdict("start"), Verdict("resume"), Verdict("skip")


def judge(task: Task, batch: str, agent: AgentDefinition, log: RunLog) -> Verdict:
    """The decision for ``task`` given its run's ``log`` (empty: no run yet).

    A run belongs to its task only if its ``RunStarted`` names this batch and this task id and
    holds this goal and these labels: anything else is refused, never re-run or mixed. A
    finished run is skipped whatever the agent is now; an unfinished one is resumed only by an
    agent with the same parameters (``resume()`` would raise ``ParametersChanged``).
    """
    if not log.records:
        return _START
    started = log.started
    if started is None:
        return Verdict("refuse", "its run's log does not start with run_started (damaged)")
    mismatch = _mismatch(task, batch, started.batch, started.task_id, started.goal, started.labels)
    if mismatch is not None:
        return Verdict("refuse", f"run {started.run_id} {mismatch}")
    if log.finished is not None:
        return _SKIP
    if parameters_hash(agent.parameters()) != started.parameters_hash:
        return Verdict(
            "refuse",
            f"run {started.run_id} is unfinished and was started with other agent parameters "
            f"({started.parameters_hash}); resume it with that agent, or use a new batch id",
        )
    return _RESUME


def _mismatch(
    task: Task,
    batch: str,
    their_batch: str | None,
    their_task: str | None,
    goal: str,
    labels: dict[str, str],
) -> str | None:
    """How the logged run differs from ``task``, or ``None``."""
    if their_batch != batch or their_task != task.id:
        return (
            f"was not started for task {shown(task.id, 40)} of batch {shown(batch, 40)} (it "
            f"names batch {shown(their_batch, 40)}, task {shown(their_task, 40)}); use "
            "another batch id"
        )
    if goal != task.goal:
        return (
            f"was started with another goal ({shown(goal, 60)}, now {shown(task.goal, 60)}); "
            "give the changed task a new id, or use a new batch id"
        )
    if labels != dict(task.labels):
        return (
            f"was started with other labels ({shown(labels, 60)}, now "
            f"{shown(dict(task.labels), 60)}); give the changed task a new id, or use a new "
            "batch id"
        )
    return None


class _Counting:
    """The run's event sink as the user gave it, with every event also counted in a tally."""

    def __init__(self, tally: Tally, sink: EventSink | None) -> None:
        self.tally = tally
        self.sink = sink

    async def emit(self, event: Event) -> None:
        self.tally.add((event.record,))  # first: a failing sink must not hide a record
        if self.sink is not None:
            await self.sink.emit(event)


async def drive_task(
    agent: AgentDefinition,
    task: Task,
    *,
    seams: SeamsFactory,
    store: RunStore,
    batch: str,
    time_limit_s: float | None = None,
    draining: asyncio.Event | None = None,
    instrumentation: Instrumentation | None = None,
    fresh: bool = False,
) -> TaskOutcome:
    """Skip, resume, refuse or start ``task``'s run in ``store``, and say what became of it.

    The seams factory is called only for a run that is driven (never for a skipped or refused
    task), once, with the task. A seam or the store raising makes a ``failed`` outcome (the run
    stays resumable); the run's executor is closed (``aclose()``, where it has one) whatever
    happens, since it belongs to this run alone. Cancelling this coroutine *interrupts* the run:
    nothing more is written for it (no ``RunFinished(cancelled)``), and ``CancelledError``
    propagates. Once ``draining`` is set the run starts no new model call and no new action:
    it stops unfinished at the next one (``interrupted``, resumable, nothing in doubt).
    ``instrumentation`` is the run's (``run(..., instrumentation=...)``). ``fresh``: the batch
    was vetted and this run had no log then; it is started without reading the log again (a
    run another process started since then is refused by the store's fence at the first
    commit, before any seam is called).
    """
    try:
        run_id = batch_run_id(batch, task.id)
    except InvalidRunId as exc:
        return TaskOutcome(task_id=task.id, run_id="", what="refused", error=str(exc))
    tally = Tally()
    try:
        log = RunLog.empty() if fresh else await store.read_log(run_id)
    except Exception as exc:
        return tally.outcome(task.id, run_id, "failed", error=exception_text(exc))
    tally.add(log.records)
    if draining is not None and draining.is_set():  # no new task: not even its seams
        return tally.outcome(task.id, run_id, "interrupted")
    verdict = judge(task, batch, agent, log)
    if verdict.action == "skip":
        return tally.outcome(task.id, run_id, "skipped")
    if verdict.action == "refuse":
        return tally.outcome(task.id, run_id, "refused", error=verdict.reason)
    try:
        run_seams = seams_of(seams(task))
    except Exception as exc:
        return tally.outcome(task.id, run_id, "failed", error=exception_text(exc))
    how = Driving(interruptible=True, time_limit_s=time_limit_s, draining=draining)
    driven = (task, run_id, agent, run_seams, tally, store, batch, how, instrumentation)
    try:
        verdict = await _driven(verdict, fresh, driven)
    except Drained:  # stopped before a new side effect: unfinished, nothing in doubt
        return tally.outcome(task.id, run_id, "interrupted")
    except Exception as exc:
        return tally.outcome(task.id, run_id, "failed", error=exception_text(exc))
    finally:
        await _close(run_seams.executor)
    return tally.outcome(task.id, run_id, _DRIVEN[verdict.action], error=verdict.reason)


_DRIVEN: dict[str, What] = {
    "start": "started",
    "resume": "resumed",
    "skip": "skipped",
    "refuse": "refused",
}


async def _driven(verdict: Verdict, fresh: bool, driven: tuple[Any, ...]) -> Verdict:
    """Drive the run as ``verdict`` says; the verdict it was driven by in the end.

    A ``fresh`` start the fence refuses was started since the vetting — a backend's retry of a
    task whose first attempt died (Ray), or another process — before any seam was called: the
    run is judged again on its log, as any driven task is, and resumed, skipped or refused.
    """
    try:
        await _drive(verdict, *driven)
        return verdict
    except RunAlreadyExists:
        if not fresh:
            raise
    task, run_id, agent, _, tally, store, batch, _, _ = driven
    again = await _judged_again(task, run_id, agent, tally, store, batch)
    if again.action == "resume":
        await _drive(again, *driven)
    return again


async def _judged_again(
    task: Task, run_id: str, agent: AgentDefinition, tally: Tally, store: RunStore, batch: str
) -> Verdict:
    """The verdict on the run's log as it is now; a start again would be refused again."""
    log = await store.read_log(run_id)
    tally.add(log.records)
    verdict = judge(task, batch, agent, log)
    if verdict.action == "start":  # the fence refused it, yet the log reads empty
        raise RunAlreadyExists(f"run {run_id} exists, yet its log reads empty")
    return verdict


async def _drive(
    verdict: Verdict,
    task: Task,
    run_id: str,
    agent: AgentDefinition,
    run_seams: RunSeams,
    tally: Tally,
    store: RunStore,
    batch: str,
    how: Driving,
    instrumentation: Instrumentation | None,
) -> None:
    """Resume or start the task's run, its events counted in ``tally``."""
    seams: dict[str, Any] = {
        "model": run_seams.model,
        "parser": run_seams.parser,
        "executor": run_seams.executor,
        "store": store,
        "events": _Counting(tally, run_seams.events),
        "how": how,
        "instrumentation": instrumentation,
    }
    if verdict.action == "resume":
        await proceed(run_id, agent, **seams)
    else:
        await start(
            agent,
            task.goal,
            run_id=run_id,
            batch=batch,
            task_id=task.id,
            labels=task.labels,
            known_new=True,  # "start" is the verdict on an empty log: no third read
            **seams,
        )


async def _close(executor: object) -> None:
    """Close the run's executor; a failure to close is not the run's failure."""
    aclose = getattr(executor, "aclose", None)
    if aclose is None:
        return
    try:
        await asyncio.shield(aclose())  # a second Ctrl-C must not leave a session half-closed
    except Exception:
        _log.warning("closing the executor %r failed", executor, exc_info=True)

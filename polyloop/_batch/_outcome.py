"""What became of one task in one invocation: plain data, picklable, built from records.

One reason to change: what a batch reports per task. A :class:`TaskOutcome` crosses process
boundaries (a Ray worker returns it to the driver), so it holds only ``str``, ``int``, ``dict``
and ``None`` (a ``StopReason`` is a ``str``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from polyloop.types import (
    ActionStatus,
    ModelReplied,
    Record,
    RunFinished,
    StepCompleted,
    StopReason,
)

__all__ = ["Tally", "TaskOutcome", "What"]

#: ``skipped``: finished before this invocation, nothing written. ``resumed`` / ``started``:
#: driven to a stop in this invocation. ``refused``: the store holds a run for this task that
#: is not this task's (goal, labels, batch or agent changed), nothing written. ``failed``: a
#: seam (or the store) raised; the run stays resumable. ``interrupted``: cut by Ctrl-C (or by
#: cancelling ``run_many``); the run stays resumable.
What = Literal["skipped", "resumed", "started", "refused", "failed", "interrupted"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOutcome:
    """One task's outcome in one invocation of a batch.

    ``stop_reason`` is set when the run is finished (``skipped``, ``resumed``, ``started``);
    ``steps``, ``executed_actions`` and ``usage`` (token counts summed over the run's model
    replies, by key) count the whole run as its log holds it, earlier invocations included;
    ``error`` is the exception (``"ExcType: message"``) of a ``failed`` task, or why a task
    was ``refused``.
    """

    task_id: str
    run_id: str
    what: What
    stop_reason: StopReason | None = None
    steps: int = 0
    executed_actions: int = 0
    usage: dict[str, int | float] = field(default_factory=dict)
    error: str | None = None

    @property
    def finished(self) -> bool:
        """Whether the run has its ``RunFinished`` (after this invocation)."""
        return self.stop_reason is not None


class Tally:
    """Steps, executed actions, token usage and the stop reason of a run, record by record."""

    def __init__(self) -> None:
        self.steps = 0
        self.executed_actions = 0
        self.usage: dict[str, int | float] = {}
        self.stop_reason: StopReason | None = None

    def add(self, records: Iterable[Record]) -> None:
        for record in records:
            if isinstance(record, StepCompleted):
                self.steps += 1
                if record.step.action_status is ActionStatus.EXECUTED:
                    self.executed_actions += 1
            elif isinstance(record, ModelReplied):
                for key, count in record.reply.usage.items():
                    self.usage[key] = self.usage.get(key, 0) + count
            elif isinstance(record, RunFinished):
                self.stop_reason = record.stop_reason
                self.executed_actions = record.executed_actions  # the loop's own count

    def outcome(
        self, task_id: str, run_id: str, what: What, *, error: str | None = None
    ) -> TaskOutcome:
        return TaskOutcome(
            task_id=task_id,
            run_id=run_id,
            what=what,
            stop_reason=self.stop_reason,
            steps=self.steps,
            executed_actions=self.executed_actions,
            usage=dict(self.usage),
            error=error,
        )

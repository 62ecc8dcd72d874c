"""The summary of one invocation of a batch, computed from its task outcomes alone.

One reason to change: what a batch reports as a whole. The batch as it stands after the
invocation: runs finished before it (skipped) count with those it finished.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from polyloop._batch._outcome import TaskOutcome

__all__ = ["BatchSummary", "Spread", "nearest_rank"]

_WHAT_ORDER = ("started", "resumed", "skipped", "failed", "refused", "interrupted", "not_started")


def nearest_rank(ordered: Sequence[int], share: float) -> int:
    """The nearest-rank percentile of ``ordered`` (sorted, non-empty): the smallest value with
    at least ``share`` of the values at or below it (``share=0.5``: the median, a value of the
    data, the lower of the two middle ones for an even count)."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass(frozen=True, slots=True)
class Spread:
    """Median, 90th percentile (nearest rank) and maximum of a count over the finished runs;
    all 0 when no run is finished."""

    median: int = 0
    p90: int = 0
    max: int = 0

    @classmethod
    def of(cls, values: Sequence[int]) -> Spread:
        if not values:
            return cls()
        ordered = sorted(values)
        return cls(nearest_rank(ordered, 0.5), nearest_rank(ordered, 0.9), ordered[-1])


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What one invocation of ``run_many`` did, and where the batch stands after it.

    ``tasks``: how many tasks were given; ``outcomes``: one per task that was dealt with, in
    the order they arrived (a task not reached before an interruption has none);
    ``interrupted``: Ctrl-C (or a cancellation) cut the invocation short; ``wall_s``: its wall
    time in seconds.
    """

    batch: str
    tasks: int
    outcomes: tuple[TaskOutcome, ...]
    wall_s: float
    interrupted: bool = False

    @property
    def finished(self) -> tuple[TaskOutcome, ...]:
        """The outcomes whose run is finished (skipped ones included)."""
        return tuple(o for o in self.outcomes if o.finished)

    @property
    def stop_reasons(self) -> dict[str, int]:
        """Finished runs per stop reason, most frequent first (then by name)."""
        counts = Counter(str(o.stop_reason) for o in self.finished)
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    def share(self, stop_reason: str) -> float:
        """The share of finished runs that stopped ``stop_reason`` (0.0 when none finished)."""
        finished = len(self.finished)
        return self.stop_reasons.get(stop_reason, 0) / finished if finished else 0.0

    @property
    def what(self) -> dict[str, int]:
        """Tasks per outcome (``started``, ``resumed``, ``skipped``, …); tasks never reached
        before an interruption count as ``not_started``."""
        found: Counter[str] = Counter(o.what for o in self.outcomes)
        found["not_started"] = self.tasks - len(self.outcomes)
        return {what: found[what] for what in _WHAT_ORDER if found[what]}

    @property
    def unfinished(self) -> int:
        """Tasks whose run is not finished: the next invocation resumes or starts them (refused
        tasks included, which it refuses again)."""
        return self.tasks - len(self.finished)

    @property
    def failures(self) -> tuple[TaskOutcome, ...]:
        return tuple(o for o in self.outcomes if o.what == "failed")

    @property
    def refusals(self) -> tuple[TaskOutcome, ...]:
        return tuple(o for o in self.outcomes if o.what == "refused")

    @property
    def steps(self) -> Spread:
        return Spread.of([o.steps for o in self.finished])

    @property
    def executed_actions(self) -> Spread:
        return Spread.of([o.executed_actions for o in self.finished])

    @property
    def usage(self) -> dict[str, int | float]:
        """Token usage summed over every run dealt with, by key (``prompt_tokens``, …)."""
        total: dict[str, int | float] = {}
        for outcome in self.outcomes:
            for key, count in outcome.usage.items():
                total[key] = total.get(key, 0) + count
        return dict(sorted(total.items()))

"""The run index as data: one summary row per run, the filters a query takes, and the statistics.

Every bundled store keeps a :class:`RunSummary` per run in the same transaction as its records,
so listing or tallying thousands of runs reads one row each instead of every record. The rules
that turn records into a summary are written once, here: :func:`index_delta` says what a batch
of records changes, :func:`advance` applies it, and :func:`summarize_log` is the summary a whole
log gives — the promise ``run_store.index_agrees_with_log`` compares a store's row with it.
Standard library only, like every module of the types layer.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from polyloop.types import (
    ActionStatus,
    ModelReplied,
    Record,
    RunFinished,
    RunLog,
    RunStarted,
    StepCompleted,
    StopReason,
)

__all__ = [
    "RUNNING",
    "IndexDelta",
    "Percentiles",
    "RunQuery",
    "RunStats",
    "RunSummary",
    "StatsTally",
    "advance",
    "histogram_percentiles",
    "index_delta",
    "matches",
    "nearest_rank",
    "newest_last",
    "normalize_since",
    "percentiles",
    "stats_of",
    "summarize_log",
]

#: The stop-reason filter that selects unfinished runs (no ``RunFinished`` yet).
RUNNING = "running"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """One run's row of the index.

    ``batch``, ``task_id`` and ``labels`` come from ``RunStarted``; ``started_at`` and
    ``finished_at`` are the records' own timestamps (``finished_at`` is ``None`` while the run
    has no ``RunFinished``); ``stop_reason`` is ``RunFinished.stop_reason`` or ``None``;
    ``steps`` counts ``StepCompleted`` records; ``executed_actions`` is
    ``RunFinished.executed_actions`` once finished, before that the steps whose action was
    ``executed``; ``usage`` sums the ``usage`` of every ``ModelReplied`` (a key's total over
    the run's model calls).
    """

    run_id: str
    batch: str | None = None
    task_id: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str | None = None
    stop_reason: str | None = None
    steps: int = 0
    executed_actions: int = 0
    usage: dict[str, int | float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The row as the JSON formats write it (``polyloop runs --format json``, export)."""
        return {
            "run_id": self.run_id,
            "batch": self.batch,
            "task_id": self.task_id,
            "labels": dict(self.labels),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "stop_reason": self.stop_reason,
            "steps": self.steps,
            "executed_actions": self.executed_actions,
            "usage": dict(self.usage),
        }


@dataclass(frozen=True, slots=True)
class IndexDelta:
    """What one batch of records changes in its run's row (the same for every store)."""

    started: RunStarted | None
    steps: int
    executed_actions: int
    usage: dict[str, int | float]
    finished: RunFinished | None

    @property
    def empty(self) -> bool:
        """Nothing to write: a batch of intents only."""
        return self.started is None and not self.steps and not self.usage and self.finished is None


def index_delta(records: Iterable[Record]) -> IndexDelta:
    """What ``records`` (a batch about to be committed) change in their run's row."""
    started: RunStarted | None = None
    finished: RunFinished | None = None
    steps = executed = 0
    usage: dict[str, int | float] = {}
    for record in records:
        if isinstance(record, StepCompleted):
            steps += 1
            executed += record.step.action_status == ActionStatus.EXECUTED
        elif isinstance(record, ModelReplied):
            for key, tokens in record.reply.usage.items():
                usage[key] = usage.get(key, 0) + tokens
        elif isinstance(record, RunStarted):
            started = record
        elif isinstance(record, RunFinished):
            finished = record
    return IndexDelta(started, steps, executed, usage, finished)


def advance(summary: RunSummary | None, run_id: str, delta: IndexDelta) -> RunSummary:
    """The row after a batch whose delta is ``delta`` (``summary`` is ``None`` for a new run)."""
    row = RunSummary(run_id=run_id) if summary is None else summary
    if delta.started is not None:
        start = delta.started
        row = replace(
            row,
            batch=start.batch,
            task_id=start.task_id,
            labels=dict(start.labels),
            started_at=start.started_at,
        )
    usage = dict(row.usage)
    for key, tokens in delta.usage.items():
        usage[key] = usage.get(key, 0) + tokens
    row = replace(
        row,
        steps=row.steps + delta.steps,
        executed_actions=row.executed_actions + delta.executed_actions,
        usage=usage,
    )
    if delta.finished is not None:
        end = delta.finished
        row = replace(
            row,
            finished_at=end.finished_at,
            stop_reason=end.stop_reason.value,
            executed_actions=end.executed_actions,
        )
    return row


def summarize_log(run_id: str, log: RunLog) -> RunSummary | None:
    """The row a whole log gives (``None`` for an empty log): what an index must hold."""
    if not log.records:
        return None
    return advance(None, run_id, index_delta(log.records))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """The filters of ``polyloop runs`` and ``polyloop stats``; every one given must hold.

    ``batch``: the run's batch id. ``stop_reasons``: any of these stop reasons (``"running"``
    selects runs without ``RunFinished``). ``since``: ``started_at`` at or after this UTC
    timestamp (normalised by :func:`normalize_since`). ``labels``: every pair present in the
    run's labels. ``limit``: the *newest* ``limit`` runs (by ``started_at``, then run id),
    listed oldest first like every listing. ``None`` means no filter.
    """

    batch: str | None = None
    stop_reasons: tuple[str, ...] = ()
    since: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.batch is not None and not isinstance(self.batch, str):
            raise ValueError(f"batch must be a str or None, got {type(self.batch).__name__}")
        known = {reason.value for reason in StopReason} | {RUNNING}
        for reason in self.stop_reasons:
            if reason not in known:
                raise ValueError(
                    f"unknown stop reason {reason!r}; use one of {', '.join(sorted(known))}"
                )
        if self.since is not None:
            object.__setattr__(self, "since", normalize_since(self.since))
        for key, value in self.labels.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise ValueError(f"labels must map non-empty str to str, got {key!r}: {value!r}")
        limit = self.limit
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise ValueError(f"limit must be an int or None, got {type(limit).__name__}")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")


def normalize_since(text: str) -> str:
    """``text`` (an ISO 8601 date or date and time) as a record's timestamp, for comparing.

    A time without an offset is UTC; one with an offset is converted to UTC. Raises
    ``ValueError`` with one line for anything else.
    """
    if not isinstance(text, str):
        raise ValueError(f"since must be an ISO 8601 date or time, got {type(text).__name__}")
    try:
        moment = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"invalid --since {text!r}: use an ISO 8601 date or date and time, such as "
            "2026-11-30 or 2026-11-30T10:35:00Z"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(_dt.UTC).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def matches(row: RunSummary, query: RunQuery) -> bool:
    """Whether ``row`` passes every filter of ``query`` (``limit`` aside)."""
    if query.batch is not None and row.batch != query.batch:
        return False
    if query.stop_reasons and (row.stop_reason or RUNNING) not in query.stop_reasons:
        return False
    if query.since is not None and row.started_at < query.since:
        return False
    return all(row.labels.get(key) == value for key, value in query.labels.items())


def newest_last(rows: Iterable[RunSummary], query: RunQuery) -> list[RunSummary]:
    """The rows ``query`` selects, oldest first, keeping the newest ``limit`` of them."""
    chosen = sorted(
        (row for row in rows if matches(row, query)), key=lambda r: (r.started_at, r.run_id)
    )
    return chosen if query.limit is None else chosen[-query.limit :]


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Nearest-rank median and 90th percentile, and the maximum, of a count over runs."""

    median: int
    p90: int
    max: int


def percentiles(values: Sequence[int]) -> Percentiles | None:
    """Nearest rank (the smallest value with at least p% of the values at or below it)."""
    histogram: dict[int, int] = {}
    for value in values:
        histogram[value] = histogram.get(value, 0) + 1
    return histogram_percentiles(histogram)


def histogram_percentiles(histogram: Mapping[int, int]) -> Percentiles | None:
    """:func:`percentiles` of the values a histogram (value → how many runs) counts."""
    total = sum(histogram.values())
    if not total:
        return None
    ordered = sorted(histogram.items())

    def rank(percent: int) -> int:
        wanted = nearest_rank(percent, total)
        seen = 0
        for value, count in ordered:
            seen += count
            if seen >= wanted:
                return value
        return ordered[-1][0]

    return Percentiles(median=rank(50), p90=rank(90), max=ordered[-1][0])


def nearest_rank(percent: int, count: int) -> int:
    """The 1-based rank of the ``percent``-th percentile of ``count`` values: ceil(p·n/100),
    in integers (``0.9 * 70`` is ``63.00000000000001`` in floats)."""
    return max(1, -(-percent * count // 100))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStats:
    """What ``polyloop stats`` prints: ``runs`` selected, of which ``running`` are unfinished;
    ``stop_reasons`` counts the finished ones by stop reason; ``steps`` and
    ``executed_actions`` are over the finished runs (``None`` when there is none); ``usage``
    totals every selected run's usage by key."""

    runs: int
    running: int
    stop_reasons: dict[str, int]
    steps: Percentiles | None
    executed_actions: Percentiles | None
    usage: dict[str, int | float]

    def to_dict(self) -> dict[str, Any]:
        """The object ``polyloop stats --format json`` writes."""
        finished = self.runs - self.running

        def spread(p: Percentiles | None) -> dict[str, int] | None:
            return None if p is None else {"median": p.median, "p90": p.p90, "max": p.max}

        return {
            "runs": self.runs,
            "running": self.running,
            "finished": finished,
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
            "stop_reason_shares": {
                reason: count / finished for reason, count in sorted(self.stop_reasons.items())
            },
            "steps": spread(self.steps),
            "executed_actions": spread(self.executed_actions),
            "usage": dict(sorted(self.usage.items())),
        }


class StatsTally:
    """:class:`RunStats` counted from groups of runs alike — a row each, or the index's grouped
    scan: (stop reason, steps, executed actions) and how many runs."""

    def __init__(self) -> None:
        self.runs = self.running = 0
        self.reasons: dict[str, int] = {}
        self.steps: dict[int, int] = {}
        self.executed: dict[int, int] = {}

    def add_running(self, count: int = 1) -> None:
        self.runs += count
        self.running += count

    def add_finished(self, stop_reason: str, steps: int, executed: int, count: int = 1) -> None:
        self.runs += count
        self.reasons[stop_reason] = self.reasons.get(stop_reason, 0) + count
        self.steps[steps] = self.steps.get(steps, 0) + count
        self.executed[executed] = self.executed.get(executed, 0) + count

    def stats(self, usage: dict[str, int | float]) -> RunStats:
        return RunStats(
            runs=self.runs,
            running=self.running,
            stop_reasons=self.reasons,
            steps=histogram_percentiles(self.steps),
            executed_actions=histogram_percentiles(self.executed),
            usage=usage,
        )


def stats_of(rows: Iterable[RunSummary]) -> RunStats:
    """The statistics of ``rows`` (already filtered)."""
    tally = StatsTally()
    usage: dict[str, int | float] = {}
    for row in rows:
        for key, tokens in row.usage.items():
            usage[key] = usage.get(key, 0) + tokens
        if row.stop_reason is None:
            tally.add_running()
        else:
            tally.add_finished(row.stop_reason, row.steps, row.executed_actions)
    return tally.stats(usage)

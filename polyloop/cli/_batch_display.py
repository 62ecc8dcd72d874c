"""What ``polyloop batch`` shows: a progress line while it runs, a summary when it ends.

On a terminal the progress line is redrawn in place (done/total, finished runs per stop reason,
failures, rate, ETA); elsewhere (a CI log, a pipe) the same text is printed as a plain line
every few seconds, so a log is never flooded. The summary is built from the invocation's
:class:`~polyloop._batch.BatchSummary` alone.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TextIO

from polyloop._batch import BatchSummary, Spread, TaskOutcome
from polyloop.types import StopReason

__all__ = ["ProgressLine", "render_summary"]

_DRIVEN = ("started", "resumed", "failed")  # what the rate counts: work done in this call
_LISTED = 10  # failures and refusals listed one a line in the summary; the rest counted


class ProgressLine:
    """The live progress of one invocation, written to ``stream``."""

    def __init__(
        self,
        total: int,
        stream: TextIO,
        *,
        terminal: bool,
        every_s: float = 5.0,
        width: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream
        self.terminal = terminal
        self.every_s = every_s
        # A terminal line longer than the terminal wraps, and "\r" then redraws only its last
        # part: it is cut to the width (0: no cut).
        self.width = width
        self.clock = clock
        self.started = clock()
        self.last_shown = self.started
        self.done = 0
        self.driven = 0
        self.failed = 0
        self.stops: Counter[str] = Counter()
        self.drawn = 0  # characters of the line now on the terminal

    def update(self, outcome: TaskOutcome) -> None:
        """Count one outcome (``run_many``'s ``progress``); a terminal is redrawn at once."""
        self.done += 1
        self.driven += outcome.what in _DRIVEN
        self.failed += outcome.what == "failed"
        if outcome.stop_reason is not None:
            self.stops[str(outcome.stop_reason)] += 1
        if self.terminal:
            self.draw()

    def tick(self) -> None:
        """Called every second or so: a terminal is redrawn (rate and ETA move), a log gets a
        plain line once every ``every_s`` seconds."""
        now = self.clock()
        if self.terminal:
            self.draw()
        elif now - self.last_shown >= self.every_s:
            self.last_shown = now
            print(self.text(), file=self.stream, flush=True)

    def draw(self) -> None:
        text = self.text()
        if self.width and len(text) >= self.width:
            text = text[: max(self.width - 2, 0)] + "…"
        padding = " " * max(0, self.drawn - len(text))
        self.stream.write(f"\r{text}{padding}")
        self.stream.flush()
        self.drawn = len(text)

    def close(self) -> None:
        """End the line on a terminal, so the summary starts on its own line."""
        if self.terminal and self.drawn:
            self.stream.write("\n")
            self.stream.flush()

    def text(self) -> str:
        elapsed = max(self.clock() - self.started, 1e-9)
        share = 100 * self.done / self.total if self.total else 100.0
        parts = [f"{self.done}/{self.total} ({share:.0f}%)"]
        if self.stops:
            parts.append(", ".join(f"{reason} {n}" for reason, n in self.stops.most_common()))
        if self.failed:
            parts.append(f"failed {self.failed}")
        rate = self.driven / elapsed
        parts.append(f"{rate:.1f} runs/s")
        remaining = self.total - self.done
        if remaining and rate > 0:
            parts.append(f"ETA {_duration(remaining / rate)}")
        return " | ".join(parts)


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def render_summary(
    summary: BatchSummary, lines: Mapping[str, int], where: str, *, store: str | None = None
) -> list[str]:
    """The summary's lines. ``lines`` maps a task id to its line in the tasks file ``where``;
    ``store`` is the store's URL (for the ``polyloop show`` hint)."""
    what = summary.what
    done = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in what.items())
    head = "interrupted" if summary.interrupted else "done"
    out = [f"batch {summary.batch}: {head} in {summary.wall_s:.1f}s, {summary.tasks} tasks: {done}"]
    finished = len(summary.finished)
    out.append(f"stop reasons ({finished} finished run{'' if finished == 1 else 's'}):")
    width = max((len(reason) for reason in summary.stop_reasons), default=0)
    for reason, count in summary.stop_reasons.items():
        out.append(f"  {reason:<{width}}  {count:>6}  {100 * count / finished:5.1f}%")
    out.append(f"steps             {_spread(summary.steps)}")
    out.append(f"executed actions  {_spread(summary.executed_actions)}")
    usage = summary.usage
    tokens = ", ".join(f"{key} {_number(value)}" for key, value in usage.items())
    out.append(f"usage             {tokens or 'none reported by the model'}")
    out.extend(_listed("failed", summary.failures, lines, where))
    out.extend(_listed("refused", summary.refusals, lines, where))
    out.extend(_in_doubt(summary, lines, where, store))
    if summary.unfinished:
        out.append(
            f"{summary.unfinished} task{'' if summary.unfinished == 1 else 's'} unfinished: "
            "run the same command again to resume"
        )
    return out


def _in_doubt(
    summary: BatchSummary, lines: Mapping[str, int], where: str, store: str | None
) -> list[str]:
    """The runs this invocation ended ``resume_state_unknown``: each was cut while an action
    ran, which may or may not have happened and is not replayed."""
    ended = [
        o
        for o in summary.outcomes
        if o.what in ("started", "resumed") and o.stop_reason == StopReason.RESUME_STATE_UNKNOWN
    ]
    if not ended:
        return []
    runs = "run" if len(ended) == 1 else "runs"
    out = [
        f"{StopReason.RESUME_STATE_UNKNOWN.value} ({len(ended)}): the {runs} below were cut "
        "while an action ran; it may or may not have happened and was not repeated. Check it "
        "in the environment; `polyloop show RUN_ID` names the action (tool, arguments, step):"
    ]
    # not a URL that may hold a password
    option = f" --store {store}" if store is not None and "@" not in store else ""
    for outcome in ended[:_LISTED]:
        line = lines.get(outcome.task_id)
        place = f"{where}:{line}" if line is not None else where
        out.append(f"  {place}: polyloop show {outcome.run_id}{option}")
    if len(ended) > _LISTED:
        out.append(
            f"  … and {len(ended) - _LISTED} more (polyloop runs --stop-reason "
            f"{StopReason.RESUME_STATE_UNKNOWN.value} --batch {summary.batch})"
        )
    return out


def _spread(spread: Spread) -> str:
    return f"median {spread.median}  p90 {spread.p90}  max {spread.max}"


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _listed(
    kind: str, outcomes: tuple[TaskOutcome, ...], lines: Mapping[str, int], where: str
) -> list[str]:
    if not outcomes:
        return []
    out = [f"{kind} ({len(outcomes)}):"]
    for outcome in outcomes[:_LISTED]:
        line = lines.get(outcome.task_id)
        place = f"{where}:{line}" if line is not None else where
        error = " ".join((outcome.error or "").split())  # one line each, whatever it said
        out.append(f"  {place}: task {outcome.task_id!r} (run {outcome.run_id}): {error}")
    if len(outcomes) > _LISTED:
        out.append(f"  … and {len(outcomes) - _LISTED} more")
    return out

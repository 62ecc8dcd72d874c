"""``--fail-on STOP_REASON[:THRESHOLD],...``: when a batch's stop reasons make the exit status 1.

A rule names a stop reason and how much of it is tolerated, over the batch's finished runs:

* ``llm_error`` — any run that stopped ``llm_error`` fails the batch;
* ``llm_error:5`` — more than 5 such runs fail it (a count, an integer ≥ 0);
* ``llm_error:5%`` — more than 5 % of the finished runs fail it (a share, 0 to 100).

Rules are separated by commas, and the option may be given more than once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from polyloop._base._shown import shown
from polyloop._batch import BatchSummary
from polyloop.types import StopReason

__all__ = ["BadRule", "FailOn", "parse_rules", "tripped"]

_REASONS = ", ".join(reason.value for reason in StopReason)


class BadRule(ValueError):
    """A ``--fail-on`` rule that cannot be read (one line)."""


@dataclass(frozen=True, slots=True)
class FailOn:
    """Fail when more than ``count`` runs (or, with ``percent``, more than that share of the
    finished runs) stopped ``stop_reason``."""

    stop_reason: StopReason
    count: int = 0
    percent: float | None = None

    def __str__(self) -> str:
        if self.percent is not None:
            return f"{self.stop_reason.value}:{self.percent:g}%"
        return f"{self.stop_reason.value}:{self.count}" if self.count else self.stop_reason.value

    def broken_by(self, summary: BatchSummary) -> str | None:
        """Why ``summary`` breaks this rule, or ``None``."""
        runs = summary.stop_reasons.get(self.stop_reason.value, 0)
        finished = len(summary.finished)
        if self.percent is not None:
            share = 100 * runs / finished if finished else 0.0
            if share > self.percent:
                return f"{self.stop_reason.value}: {runs} of {finished} runs ({share:.1f}%) > " \
                       f"{self.percent:g}%"  # fmt: skip
            return None
        if runs > self.count:
            plural = "" if runs == 1 else "s"
            return f"{self.stop_reason.value}: {runs} run{plural} > {self.count}"
        return None


def parse_rules(values: Sequence[str]) -> tuple[FailOn, ...]:
    """The rules of every ``--fail-on`` value; :class:`BadRule` for the first bad one."""
    rules: list[FailOn] = []
    for value in values:
        for item in value.split(","):
            rule = _rule(item.strip(), value)
            if any(r.stop_reason is rule.stop_reason for r in rules):
                raise BadRule(f"--fail-on names {rule.stop_reason.value} twice")
            rules.append(rule)
    return tuple(rules)


def _rule(item: str, value: str) -> FailOn:
    if not item:
        raise BadRule(f"--fail-on {shown(value, 80)}: an empty rule (STOP_REASON[:THRESHOLD])")
    name, colon, threshold = item.partition(":")
    try:
        reason = StopReason(name)
    except ValueError:
        raise BadRule(
            f"--fail-on: unknown stop reason {shown(name, 40)} (one of {_REASONS})"
        ) from None
    if not colon:
        return FailOn(reason)
    if threshold.endswith("%"):
        return FailOn(reason, percent=_percent(item, threshold[:-1]))
    if threshold.isascii() and threshold.isdigit():
        return FailOn(reason, count=int(threshold))
    raise BadRule(
        f"--fail-on {shown(item, 80)}: the threshold is a count (an integer >= 0) or a share "
        "(0% to 100%)"
    )


def _percent(item: str, number: str) -> float:
    try:
        share = float(number) if number.strip() == number and number else math.nan
    except ValueError:
        share = math.nan
    if not (0.0 <= share <= 100.0):  # nan fails both comparisons
        raise BadRule(f"--fail-on {shown(item, 80)}: a share is a number from 0% to 100%")
    return share


def tripped(rules: Sequence[FailOn], summary: BatchSummary) -> list[str]:
    """Why each broken rule is broken (empty: the batch passes)."""
    return [why for rule in rules if (why := rule.broken_by(summary)) is not None]

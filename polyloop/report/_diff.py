"""Two reports compared: what regressed, recovered, changed, appeared or disappeared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from polyloop.report._format import Key, Outcome, outcomes_by_key

# A move away from `held` to one of these is deliberate (it carries a reason: the waiver's or
# the override's), so it is listed apart and is not a regression. Every other outcome, whatever
# the outcome list holds now or later, is one.
DELIBERATE: tuple[Outcome, ...] = ("waived", "overridden")
NOT_RUN = "not run"  # what a diff calls a promise that the suite has but that was not run
Move = tuple[Key, str, str]  # (key, outcome before, outcome after)


@dataclass(frozen=True, slots=True)
class ReportDiff:
    """What changed between two reports, keyed by (implementation id, promise id).

    ``regressed``: a promise of an implementation present in both reports that ``held`` before
    and now has any other outcome (or was not run) — except ``waived`` and ``overridden``,
    which are in ``changed``. ``lost`` names the implementations of OLD that NEW lacks; both are
    regressions (:attr:`has_regression`). ``recovered``: moves to ``held`` from anything else.
    ``changed``: every other move (``held → waived`` among them). ``appeared``/``disappeared``:
    promises that only NEW's suite has, or that it no longer has; ``added``: implementations
    only NEW has. None of those three is a regression.
    """

    regressed: list[Move] = field(default_factory=list)
    recovered: list[Move] = field(default_factory=list)
    appeared: list[tuple[Key, str]] = field(default_factory=list)
    disappeared: list[tuple[Key, str]] = field(default_factory=list)
    changed: list[Move] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)

    @property
    def has_regression(self) -> bool:
        """Whether ``polyloop report diff`` exits 1."""
        return bool(self.regressed or self.lost)


def suite_of(report: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """``(seam, promise id)`` of every promise the report's kit had: run, or not run."""
    return frozenset(
        (str(item["seam"]), str(promise_id))
        for item in report.get("implementations", [])
        for promise_id in [*(p["id"] for p in item["promises"]), *(item.get("missing") or [])]
    )


def diff_reports(old: Mapping[str, Any], new: Mapping[str, Any]) -> ReportDiff:
    """Compare two reports (see :class:`ReportDiff` for the groups)."""
    before, after = outcomes_by_key(old), outcomes_by_key(new)
    seams_before, seams_after = _seams(old), _seams(new)
    suite_before, suite_after = suite_of(old), suite_of(new)
    diff = ReportDiff()
    diff.lost.extend(sorted(seams_before.keys() - seams_after.keys()))
    diff.added.extend(sorted(seams_after.keys() - seams_before.keys()))
    for key in sorted(before.keys() | after.keys()):
        implementation, promise_id = key
        if implementation not in seams_before or implementation not in seams_after:
            continue  # lost or added: listed once, as an implementation
        in_before = (seams_before[implementation], promise_id) in suite_before
        in_after = (seams_after[implementation], promise_id) in suite_after
        was = before.get(key, NOT_RUN if in_before else None)
        now = after.get(key, NOT_RUN if in_after else None)
        if was is None:
            diff.appeared.append((key, str(now)))
        elif now is None:
            diff.disappeared.append((key, was))
        elif was == now:
            continue
        elif was == "held" and now not in DELIBERATE:
            diff.regressed.append((key, was, now))
        elif now == "held":
            diff.recovered.append((key, was, now))
        else:
            diff.changed.append((key, was, now))
    return diff


def _seams(report: Mapping[str, Any]) -> dict[str, str]:
    return {str(item["id"]): str(item["seam"]) for item in report.get("implementations", [])}


def _reasons(report: Mapping[str, Any]) -> dict[Key, str]:
    """The waiver reason of each promise that has one (shown beside a deliberate move)."""
    return {
        (item["id"], promise["id"]): str(promise["waiver_reason"])
        for item in report.get("implementations", [])
        for promise in item["promises"]
        if promise.get("waiver_reason")
    }


def _lost(implementation: str, new: Mapping[str, Any]) -> str:
    """A lost implementation, with why when NEW left it out (still a regression: not judged)."""
    for entry in new.get("left_out") or []:
        if implementation == entry["implementation"] or implementation in (entry.get("ids") or []):
            return f"{implementation}  (left out of NEW: it needs {entry['hint']})"
    return implementation


def render_diff(diff: ReportDiff, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The diff as text, regressions first; each move on its own line."""
    lines = [f"verdict: {old.get('verdict')} → {new.get('verdict')}"]
    if old.get("suite_hash") != new.get("suite_hash"):
        lines.append(f"suite: {old.get('suite_hash')} → {new.get('suite_hash')}")
    reasons = _reasons(new)

    def move(entry: Move) -> str:
        (implementation, promise_id), was, now = entry
        reason = reasons.get(entry[0]) if now in DELIBERATE else None
        return f"{implementation}  {promise_id}  {was} → {now}" + (
            f"  (reason: {reason})" if reason else ""
        )

    sections: list[tuple[str, list[str]]] = [
        ("regressed (held → anything but held, waived or overridden)", [
            move(entry) for entry in diff.regressed
        ]),
        ("implementations missing from NEW (regressed)", [
            _lost(implementation, new) for implementation in diff.lost
        ]),
        ("recovered (now held)", [move(entry) for entry in diff.recovered]),
        ("changed (not a regression)", [move(entry) for entry in diff.changed]),
        ("new in NEW's suite", [f"{i}  {p}  ({o})" for (i, p), o in diff.appeared]),
        ("no longer in NEW's suite", [f"{i}  {p}  (was {o})" for (i, p), o in diff.disappeared]),
        ("implementations new in NEW", list(diff.added)),
    ]  # fmt: skip
    for heading, entries in sections:
        lines.append(f"{heading}: {len(entries)}")
        lines.extend(f"  {entry}" for entry in entries)
    regressions = len(diff.regressed) + len(diff.lost)
    lines.append(
        f"{regressions} regression{'' if regressions == 1 else 's'}"
        if regressions
        else "no regression"
    )
    return "\n".join(lines) + "\n"

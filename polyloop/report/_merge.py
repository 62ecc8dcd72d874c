"""``polyloop report merge``: several CI jobs' reports as one.

Each input is one job, known by its report id (the same report given twice counts once; a
merged report brings the jobs it holds). A merge is a function of the *set* of jobs, so it is
commutative, associative and idempotent: every ordering below is by a key, never by input
order, and a merged report keeps each job's outcome of each promise (``runs``) so that it can
be merged again.

A cell combines the jobs that ran the promise, worst first (:data:`PRECEDENCE`): ``violated``
in any job is ``violated``, then ``stale_waiver``, ``pending``, ``setup_error``,
``unverifiable``, ``overridden``, ``waived``, ``not_applicable``; ``held`` only when every job
that ran it held. A job that did not run the promise (a shard) does not count. An
implementation left out of one job (a missing extra) and judged in another is judged; the
merged ``left_out`` lists only those no job judged.

Standard library only; :mod:`polyloop.report` re-exports :func:`merge_reports`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from polyloop.report._format import (
    OUTCOMES,
    SCHEMA,
    MergeError,
    count_outcomes,
    mark_knock_ons,
)

__all__ = ["PRECEDENCE", "MergeError", "merge_reports", "report_id_of"]

PRECEDENCE: tuple[str, ...] = (
    "violated",
    "stale_waiver",
    "pending",
    "setup_error",
    "unverifiable",
    "overridden",
    "waived",
    "not_applicable",
    "held",
)
assert set(PRECEDENCE) == set(OUTCOMES)


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def report_id_of(report: Mapping[str, Any]) -> str:
    """A report's id; a report written before report ids (``/1``) is known by its content."""
    rid = report.get("report_id")
    return str(rid) if rid else f"content-{_digest(report)[:32]}"


def _jobs(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The jobs a report stands for: itself, or those a merge holds."""
    if report.get("jobs"):
        return [dict(job) for job in report["jobs"]]
    return [
        {
            "report_id": report_id_of(report),
            "created_at": str(report.get("created_at", "")),
            "kit_version": str(report.get("kit_version", "")),
            "suite_hash": str(report.get("suite_hash", "")),
            "verdict": str(report.get("verdict", "")),
            "environment": report.get("environment"),
        }
    ]


def _runs(report: Mapping[str, Any], promise: Mapping[str, Any]) -> list[dict[str, str]]:
    if "runs" in promise:
        return [dict(run) for run in promise["runs"]]
    return [{"report_id": report_id_of(report), "outcome": str(promise["outcome"])}]


def _rank(run: Mapping[str, str]) -> tuple[int, str]:
    return PRECEDENCE.index(run["outcome"]), run["report_id"]


def _tokens(value: object) -> set[str]:
    return {part for part in str(value or "").split(", ") if part}


def merge_reports(
    reports: Sequence[Mapping[str, Any]],
    *,
    allow_mixed_suites: bool = False,
    names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One report (schema ``polyloop-conformance/2``, with ``jobs``) from several.

    Raises :class:`MergeError` for reports of different suite hashes unless
    ``allow_mixed_suites`` (which marks each promise the suites differ on with
    ``mixed_suite``), for an implementation id that is two different seams, and for two
    inputs that carry the same report id but differ in what that job says (its outcomes or
    its record): keeping either would make the result depend on the order of the inputs.
    ``names`` (the inputs' file names, in order) name the two inputs in that message.
    """
    if not reports:
        raise MergeError("nothing to merge: give at least one report")
    _refuse_differing_ids(reports, names)
    jobs: dict[str, dict[str, Any]] = {}
    for report in reports:
        for job in _jobs(report):
            jobs.setdefault(job["report_id"], job)
    suites = sorted({job["suite_hash"] for job in jobs.values()})
    if len(suites) > 1 and not allow_mixed_suites:
        raise MergeError(
            f"the reports were made by different suites ({', '.join(suites)}): merging them "
            "would mix promises; pass --allow-mixed-suites to merge anyway (the promises that "
            "differ are marked)"
        )
    items: dict[str, dict[str, Any]] = {}
    for report in reports:
        for item in report.get("implementations", []):
            _add_implementation(items, report, item)
    implementations = [_finish(items[key], mixed=len(suites) > 1) for key in sorted(items)]
    ordered_jobs = sorted(jobs.values(), key=lambda job: (job["created_at"], job["report_id"]))
    merged: dict[str, Any] = {
        "schema": SCHEMA,
        "report_id": f"merge-{_digest(sorted(jobs))[:32]}",
        "kit_version": ", ".join(sorted({job["kit_version"] for job in ordered_jobs})),
        "suite_hash": suites[0] if len(suites) == 1 else f"sha256:{_digest(suites)}",
        "pytest_version": ", ".join(
            sorted(set().union(*(_tokens(r.get("pytest_version")) for r in reports)))
        )
        or "unknown",
        "python_version": ", ".join(
            sorted(set().union(*(_tokens(r.get("python_version")) for r in reports)))
        )
        or "unknown",
        "created_at": max(job["created_at"] for job in ordered_jobs),
        "verdict": _verdict(implementations),
        "interrupted": any(bool(report.get("interrupted")) for report in reports),
        "jobs": ordered_jobs,
        "implementations": implementations,
    }
    left_out = merged_left_out(reports, {item["id"] for item in implementations})
    if left_out:
        merged["left_out"] = left_out
    if len(suites) > 1:
        merged["mixed_suites"] = True
    return merged


def merged_left_out(reports: Sequence[Mapping[str, Any]], judged: set[str]) -> list[dict[str, Any]]:
    """The union of the inputs' ``left_out`` lists, one entry per implementation name (the
    least, so the order of the inputs does not matter), without the implementations an input
    judged: left out of one job and judged in another is judged."""
    by_name: dict[str, dict[str, Any]] = {}
    for report in reports:
        for entry in report.get("left_out") or []:
            name = str(entry["implementation"])
            if name in judged or judged.intersection(entry.get("ids") or []):
                continue
            seen = by_name.get(name)
            if seen is None or _digest(entry) < _digest(seen):
                by_name[name] = dict(entry)
    return [by_name[name] for name in sorted(by_name)]


def _job_contents(report: Mapping[str, Any]) -> dict[str, tuple[str, list[Any]]]:
    """What each job a report holds says: report id → (its record, its outcomes, sorted)."""
    said: dict[str, tuple[str, list[Any]]] = {
        job["report_id"]: (_digest(job), []) for job in _jobs(report)
    }
    for item in report.get("implementations", []):
        for promise in item["promises"]:
            for run in _runs(report, promise):
                cell = [str(item["id"]), str(promise["id"]), run["outcome"]]
                said.setdefault(run["report_id"], ("", []))[1].append(cell)
    return {rid: (record, sorted(cells)) for rid, (record, cells) in said.items()}


def _refuse_differing_ids(
    reports: Sequence[Mapping[str, Any]], names: Sequence[str] | None
) -> None:
    """:class:`MergeError` when two inputs carry one report id with different contents."""
    seen: dict[str, tuple[int, tuple[str, list[Any]]]] = {}
    for index, report in enumerate(reports):
        for rid, contents in _job_contents(report).items():
            first = seen.setdefault(rid, (index, contents))
            if first[1] != contents:
                one, two = (_input_name(names, i) for i in (first[0], index))
                what = "outcomes" if first[1][1] != contents[1] else "job records"
                raise MergeError(
                    f"{one} and {two} both carry report id {rid!r} with different {what}: "
                    "a report id names one run, so one of them is not what it says (rerun "
                    "the job, or merge only one of them)"
                )


def _input_name(names: Sequence[str] | None, index: int) -> str:
    if names is not None and index < len(names):
        return str(names[index])
    return f"input {index + 1}"


def _add_implementation(
    items: dict[str, dict[str, Any]], report: Mapping[str, Any], item: Mapping[str, Any]
) -> None:
    key = str(item["id"])
    seen = items.get(key)
    if seen is not None and seen["seam"] != item["seam"]:
        raise MergeError(
            f"implementation {key!r} is a {seen['seam']} in one report and a {item['seam']} "
            "in another: rename one of them"
        )
    if seen is None:
        seen = items[key] = {
            "id": key,
            "seam": str(item["seam"]),
            "identity": [],  # (fixture, source, suite_hash) of every job: the least is shown
            "catalogue": 0,
            "missing": set(),
            "teardown_errors": set(),
            "setup_errors": [],
            "jobs": set(),
            "promises": {},
        }
    seen["identity"].append(
        (str(item.get("fixture", "-")), str(item.get("source", "-")), str(item.get("suite_hash")))
    )
    seen["catalogue"] = max(seen["catalogue"], int(item.get("catalogue", 0)))
    seen["missing"].update(item.get("missing") or [])
    seen["teardown_errors"].update(item.get("teardown_errors") or [])
    if item.get("setup_error"):
        seen["setup_errors"].append(dict(item["setup_error"]))
    seen["jobs"].update(item.get("jobs") or [report_id_of(report)])
    for promise in item["promises"]:
        entry = seen["promises"].setdefault(
            promise["id"], {"runs": {}, "candidates": [], "texts": set(), "mixed": False}
        )
        runs = _runs(report, promise)
        for run in runs:
            entry["runs"].setdefault(run["report_id"], run["outcome"])
        entry["candidates"].append((min(_rank(run) for run in runs), promise))
        entry["texts"].add(str(promise.get("promise")))
        entry["mixed"] = entry["mixed"] or bool(promise.get("mixed_suite"))


def _finish(seen: Mapping[str, Any], *, mixed: bool) -> dict[str, Any]:
    promises = []
    jobs = sorted(seen["jobs"])
    for promise_id in sorted(seen["promises"]):
        entry = seen["promises"][promise_id]
        runs = [{"report_id": rid, "outcome": o} for rid, o in sorted(entry["runs"].items())]
        outcome = min(runs, key=_rank)["outcome"]
        _, shown = min(entry["candidates"], key=lambda c: (c[0], _digest(c[1])))
        merged = {key: value for key, value in shown.items() if key not in ("runs", "mixed")}
        merged["outcome"] = outcome
        merged["runs"] = runs
        differs = entry["mixed"] or len(entry["texts"]) > 1
        if mixed and not differs:
            differs = {run["report_id"] for run in runs} != set(jobs)
        merged.pop("mixed_suite", None)
        if differs:
            merged["mixed_suite"] = True
        promises.append(merged)
    ran = {promise["id"] for promise in promises}
    mark_knock_ons(promises)  # on the merged outcomes: a job's pointer may no longer hold
    counts = count_outcomes(promises)
    fixture, source, suite_hash = min(seen["identity"])
    setup_errors = seen["setup_errors"]
    return {
        "id": seen["id"],
        "seam": seen["seam"],
        "fixture": fixture,
        "source": source,
        "suite_hash": suite_hash,
        "counts": counts,
        "collected": len(promises),
        "catalogue": max(seen["catalogue"], len(promises)),
        "missing": sorted(seen["missing"] - ran),
        "teardown_errors": sorted(seen["teardown_errors"]),
        "setup_error": min(setup_errors, key=_digest) if setup_errors else None,
        "jobs": jobs,
        "promises": promises,
    }


def _incomplete(item: Mapping[str, Any]) -> bool:
    return (
        item["collected"] < item["catalogue"]
        or not item["counts"]["held"]
        or bool(item["teardown_errors"])
        or any(
            p["outcome"] == "overridden" and not p.get("waiver_reason") for p in item["promises"]
        )
    )


def _verdict(implementations: Sequence[Mapping[str, Any]]) -> str:
    """The verdict of merged cells, by the rules a run's report uses."""
    if not implementations:
        return "no_implementations"
    if any(item["setup_error"] for item in implementations):
        return "setup_error"
    if any(
        item["counts"]["violated"] or item["counts"]["stale_waiver"] for item in implementations
    ):
        return "violations"
    if any(_incomplete(item) for item in implementations):
        return "incomplete"
    return "conformant"

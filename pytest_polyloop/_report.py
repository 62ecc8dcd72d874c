"""The conformance report, built from data: implementations, results, baseline → a dict.

The JSON, Markdown and terminal writers only render what this module built.
"""

from __future__ import annotations

import json
import os
import platform
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from polyloop._base import _extras
from polyloop._base._utf8_json import utf8_json, utf8_text
from polyloop._version import __version__ as POLYLOOP_VERSION
from polyloop.report import SCHEMA, load_report, outcomes_by_key
from polyloop.report._format import Key, count_outcomes, mark_knock_ons
from pytest_polyloop._outcomes import Judgement, PhaseResult, classify, teardown_failure

__all__ = [
    "Baseline",
    "build_report",
    "check_writable",
    "environment_of",
    "load_baseline",
    "new_report_id",
    "verdict_exit_status",
    "write_json",
    "write_markdown",
]


@dataclass(frozen=True, slots=True)
class Baseline:
    """What an earlier report says: each outcome, and which promises its kit had per seam."""

    outcomes: Mapping[Key, str]
    catalogue: frozenset[tuple[str, str]]  # (seam, promise id) judged for any implementation

    @property
    def implementations(self) -> frozenset[str]:
        return frozenset(implementation for implementation, _ in self.outcomes)

    def is_pending(self, seam: str, implementation_id: str, promise_id: str) -> bool:
        """A violation that does not fail the run: the implementation is in the baseline and
        the promise was ``pending`` there, or its kit did not have the promise yet. A new (or
        renamed) implementation gets no pending: its violations fail."""
        if implementation_id not in self.implementations:
            return False
        if self.outcomes.get((implementation_id, promise_id)) == "pending":
            return True
        return (seam, promise_id) not in self.catalogue


def load_baseline(path: Path) -> Baseline:
    """The outcomes and per-seam catalogue of an earlier JSON report.

    Raises :class:`polyloop.report.ReportError` naming the file if it is not a report.
    """
    report = load_report(path)
    catalogue = frozenset(
        (str(item.get("seam")), promise["id"])
        for item in report["implementations"]
        for promise in item["promises"]
    )
    return Baseline(outcomes_by_key(report), catalogue)


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split())


def _promise_text(judgement: Judgement, doc: str) -> str:
    """The row's promise. A ``not_applicable`` skip's ``promise=`` text is often a shared
    helper's (three inline-commit promises once read identically): its row shows the promise
    it skipped, the first paragraph of that promise's docstring."""
    if judgement.outcome == "not_applicable" and doc.strip():
        return _first_paragraph(doc)
    return judgement.promise or _first_paragraph(doc)


def _promise_entry(
    promise_id: str,
    nodeid: str,
    judgement: Judgement,
    doc: str,
    baseline: Baseline | None,
    implementation: tuple[str, str],  # (seam, implementation id)
) -> dict[str, Any]:
    outcome = judgement.outcome
    detail = judgement.detail
    if (
        outcome == "violated"
        and baseline is not None
        and baseline.is_pending(*implementation, promise_id)
    ):
        outcome = "pending"
        note = "pending: new in this kit or pending in the baseline, so it does not fail the run"
        detail = f"{detail}\n({note})" if detail else note
    entry = {
        "id": promise_id,
        "outcome": outcome,
        "nodeid": nodeid,
        "duration_s": judgement.duration_s,
        "promise": _promise_text(judgement, doc),
        "why": judgement.why,
        "verify_yourself": judgement.verify_yourself,
        "detail": detail,
        "waiver_reason": judgement.waiver_reason,
    }
    if judgement.kept_by:
        entry["kept_by"] = judgement.kept_by  # optional: only promises polyloop keeps itself
    if judgement.reruns:
        entry["reruns"] = judgement.reruns  # optional: only promises pytest-rerunfailures reran
    if judgement.search is not None and outcome in ("violated", "pending"):
        entry["search"] = judgement.search.get("search")  # optional: found by a search
        entry["detail"] = f"{detail or ''}\n({search_note(judgement.search)})".lstrip()
    return entry


#: How each search's finding is told in a violation's detail, and how to replay it.
_SEARCH_NOTES = {
    "seeded": "found by the default seeded search: the same examples are drawn on every run "
    "of this code, so rerunning the same command replays it",
    "wide": "found by the wide search (--polyloop-search=wide) and saved in {examples}: every "
    "run that can read that directory replays it first, the default one too",
    "replayed": "replayed from {examples}, where a wide search saved it: every run replays it "
    "until it holds (delete the directory to forget it)",
}


def search_note(search: Mapping[str, str]) -> str:
    """Which search produced a violation, and how to replay it."""
    note = _SEARCH_NOTES.get(search.get("search", ""), "found by a search")
    return note.format(examples=search.get("examples", "the examples directory"))


def build_implementation(
    entry: Mapping[str, Any],
    results: Mapping[str, Sequence[PhaseResult]],
    baseline: Baseline | None,
    parse_skip: Callable[[str], Mapping[str, str] | None],
) -> dict[str, Any]:
    """One implementation's part of the report from its entry and the results of its items."""
    docs = {promise["id"]: promise["doc"] for promise in entry["catalogue"]}
    waive: Mapping[str, str] = entry["waive"]
    overridden = set(entry["overridden"])
    judged: list[tuple[str, str, Judgement | None]] = []
    teardown_errors = []
    for nodeid, promise_id in sorted(entry["items"].items(), key=lambda pair: pair[1]):
        teardown_error = teardown_failure(results.get(nodeid, ()))
        if teardown_error is not None:
            teardown_errors.append(f"{teardown_error} (after {nodeid})")
        judgement = classify(
            results.get(nodeid, ()),
            overridden=promise_id in overridden,
            waiver_reason=waive.get(promise_id),
            parse_skip=parse_skip,
        )
        judged.append((nodeid, promise_id, judgement))
    setup_error = _first_setup_error(judged, str(entry["source"]))
    if setup_error is not None:
        judged = _folded(judged, setup_error)
    promises = [
        _promise_entry(
            promise_id, nodeid, judgement, docs[promise_id], baseline, (entry["seam"], entry["id"])
        )
        for nodeid, promise_id, judgement in judged
        if judgement is not None  # collected but never run (-x, a crash): counted as missing
    ]
    mark_knock_ons(promises)  # one cause counts once: a knock-on says which promise it follows
    counts = count_outcomes(promises)
    reported = {promise["id"] for promise in promises}
    return {
        "id": entry["id"],
        "seam": entry["seam"],
        "fixture": entry["fixture"],
        "source": entry["source"],
        "suite_hash": entry["suite_hash"],
        "counts": counts,
        "collected": len(reported),
        "catalogue": len(docs),
        "missing": sorted(set(docs) - reported),
        "teardown_errors": teardown_errors,
        "setup_error": setup_error,
        "promises": promises,
    }


Judged = list[tuple[str, str, Judgement | None]]  # (node id, promise id, judgement) per item


def _first_setup_error(judged: Judged, source: str) -> dict[str, str] | None:
    """The implementation's setup error (the first promise's, in catalogue order), with the
    fixture's ``path:line`` where the exception's own location is unknown."""
    for _, _, judgement in judged:
        if judgement is not None and judgement.setup_error is not None:
            failure = dict(judgement.setup_error)
            failure["location"] = failure.get("location") or source
            return failure
    return None


def _folded(judged: Judged, setup_error: Mapping[str, str]) -> Judged:
    """Every promise of an implementation that could not be built is ``setup_error``: also
    those that never ran and those that ran without the part that failed — none was judged
    on the implementation the user meant."""
    detail = f"not judged: the implementation's setup failed ({setup_error['type']})"
    return [
        (
            nodeid,
            promise_id,
            Judgement(
                outcome="setup_error",
                duration_s=judgement.duration_s if judgement else 0.0,
                detail=detail,
                waiver_reason=judgement.waiver_reason if judgement else None,
                setup_error=setup_error,
            ),
        )
        for nodeid, promise_id, judgement in judged
    ]


def _is_incomplete(implementation: Mapping[str, Any], waive: Mapping[str, str]) -> bool:
    if implementation["collected"] < implementation["catalogue"]:
        return True
    if implementation["counts"]["held"] == 0:
        return True  # an empty contract never passes trivially
    if implementation["teardown_errors"]:
        return True  # the run did not end cleanly; no promise is to blame for it
    return any(
        promise["outcome"] == "overridden" and not waive.get(promise["id"])
        for promise in implementation["promises"]
    )


def build_report(
    *,
    implementations: Sequence[Mapping[str, Any]],
    results: Mapping[str, Sequence[PhaseResult]],
    baseline: Baseline | None,
    parse_skip: Callable[[str], Mapping[str, str] | None],
    kit_version: str,
    suite_hash: str,
    pytest_version: str,
    python_version: str,
    created_at: str,
    environment: Mapping[str, Any],
    report_id: str,
    interrupted: bool = False,
    left_out: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The whole report (schema ``polyloop-conformance/2``) with its verdict. ``left_out``:
    the implementations not judged for want of an extra (``registry.leave_out``); listed, never
    counted in the verdict — but one that was judged after all is not listed."""
    waivers = {entry["id"]: entry["waive"] for entry in implementations}
    judged = [
        build_implementation(entry, results, baseline, parse_skip)
        for entry in sorted(implementations, key=lambda entry: str(entry["id"]))
    ]
    if not judged:
        verdict = "no_implementations"
    elif any(item["setup_error"] for item in judged):
        verdict = "setup_error"
    elif any(item["counts"]["violated"] or item["counts"]["stale_waiver"] for item in judged):
        verdict = "violations"
    elif any(_is_incomplete(item, waivers[item["id"]]) for item in judged):
        verdict = "incomplete"
    else:
        verdict = "conformant"
    return {
        "schema": SCHEMA,
        "report_id": report_id,
        "kit_version": kit_version,
        "suite_hash": suite_hash,
        "pytest_version": pytest_version,
        "python_version": python_version,
        "created_at": created_at,
        "verdict": verdict,
        "interrupted": interrupted,
        "environment": dict(environment),
        "implementations": judged,
        "left_out": _not_judged(left_out, {str(item["id"]) for item in judged}),
    }


def _not_judged(left_out: Sequence[Mapping[str, Any]], judged: set[str]) -> list[dict[str, Any]]:
    return [
        dict(entry)
        for entry in left_out
        if entry["implementation"] not in judged and not judged.intersection(entry.get("ids", ()))
    ]


def new_report_id() -> str:
    """A report's id: unique per run, so a merge counts the same report given twice once."""
    return uuid.uuid4().hex


def environment_of(config: pytest.Config) -> dict[str, Any]:
    """Where this run happens: Python, pytest and polyloop versions, the OS, the polyloop extras
    installed, the pytest-xdist worker count (0 without xdist) and the ``--polyloop-job``
    label (the CI job or shard; ``None`` unless given)."""
    dist = getattr(config.option, "dist", "no")
    tx = getattr(config.option, "tx", None) or []
    job = config.getoption("polyloop_job", None)
    return {
        "python": platform.python_version(),
        "pytest": pytest.__version__,
        "polyloop": POLYLOOP_VERSION,
        "os": platform.platform(terse=True),
        "extras": sorted(extra for extra in _extras.EXTRAS if _extras.extra_installed(extra)),
        "xdist_workers": len(tx) if dist != "no" else 0,
        "job": str(job) if job else None,
        "search": _search_of(config),
    }


def _search_of(config: pytest.Config) -> dict[str, Any] | None:
    """The session's search (``mode``, ``budget``, ``examples``), or ``None`` without the kit."""
    try:
        from polyloop.testing._shared._search import search_of
    except ImportError:
        return None
    search = search_of(config)
    examples = search.examples
    if examples is not None and examples.is_relative_to(config.rootpath):
        examples = examples.relative_to(config.rootpath)
    return {
        "mode": search.mode,
        "budget": search.budget,
        "examples": None if examples is None else examples.as_posix(),
    }


def verdict_exit_status(verdict: str) -> int:
    """0 conformant, 1 setup error/violations/incomplete, 5 no implementations."""
    statuses = {"conformant": 0, "setup_error": 1, "violations": 1, "incomplete": 1}
    return statuses.get(verdict, 5)


def check_writable(option: str, value: str | None) -> None:
    """Raise ``pytest.UsageError`` (one line) if a report could not be written to ``value``:
    a directory, a path under a regular file, a directory that refuses new files. Checked
    before the run, so a mistyped path does not cost a whole run and end in a traceback."""
    if not value:
        return
    path = Path(value)
    existing = next(parent for parent in (path, *path.parents) if parent.exists())
    if existing == path and path.is_dir():
        problem = "is a directory"
    elif existing != path and not existing.is_dir():
        problem = f"{existing} is not a directory"
    elif not os.access(existing, os.W_OK):
        problem = f"{existing} is not writable"
    else:
        return
    flag = "--" + option.replace("_", "-")
    raise pytest.UsageError(f"{flag} {value}: cannot write the report there: {problem}")


def write_json(report: Mapping[str, Any], path: Path) -> None:
    """Write the report as indented JSON (parent directories are created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Valid UTF-8 whatever a test printed or raised: a lone surrogate is written as its escape.
    text = utf8_json(json.dumps(report, indent=2, ensure_ascii=False))
    path.write_text(text + "\n", encoding="utf-8")


def write_markdown(markdown: str, path: Path | None) -> list[Path]:
    """Write ``markdown`` to ``path`` and append it to ``$GITHUB_STEP_SUMMARY`` when set."""
    written = []
    markdown = utf8_text(markdown)  # a lone surrogate from a test's output, escaped
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown, encoding="utf-8")
        written.append(path)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as stream:
            stream.write(markdown)
        written.append(Path(summary))
    return written

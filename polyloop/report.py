"""The conformance report format: one home for its schema, outcomes, reader and renderers.

``pytest --polyloop-conformance --polyloop-report PATH.json`` writes a report (schema
``polyloop-conformance/2``, described by the shipped ``report.schema.json``); this module reads
and checks one (:func:`load_report`, which also reads ``polyloop-conformance/1`` reports),
renders it as terminal text or Markdown and diffs two.
Standard library only, so it works where neither pytest nor the test kit is installed: the
plugin writes with it, ``polyloop report`` reads with it.

>>> from polyloop.report import OUTCOMES, SCHEMA
>>> SCHEMA, OUTCOMES[:3]
('polyloop-conformance/2', ('held', 'violated', 'setup_error'))
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from polyloop._shown import shown

__all__ = [
    "DELIBERATE",
    "GLYPHS",
    "OUTCOMES",
    "READABLE_SCHEMAS",
    "SCHEMA",
    "MergeError",
    "Outcome",
    "ReportDiff",
    "ReportError",
    "badge",
    "diff_reports",
    "load_report",
    "merge_reports",
    "outcomes_by_key",
    "render_diff",
    "render_html",
    "render_markdown",
    "render_matrix_markdown",
    "render_matrix_text",
    "render_text",
    "schema",
]

SCHEMA = "polyloop-conformance/2"
# Every schema tag the readers accept (``polyloop report``, ``report diff``, baselines): /1 has
# no setup_error and no interrupted, read as absent.
READABLE_SCHEMAS = frozenset({"polyloop-conformance/1", SCHEMA})
# /1 files are checked against the schema they were written with, shipped beside the current one.
_SCHEMA_FILES = {SCHEMA: "report.schema.json", "polyloop-conformance/1": "report-1.schema.json"}
Outcome = Literal[
    "held",
    "violated",
    "setup_error",
    "unverifiable",
    "not_applicable",
    "waived",
    "stale_waiver",
    "overridden",
    "pending",
]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)  # the report's order, written once above
Key = tuple[str, str]  # (implementation id, promise id)
_NULLABLE_TEXTS = ("why", "verify_yourself", "detail", "waiver_reason")  # of a promise
# How Hypothesis introduces the example that broke a property (kept whole on a terminal).
_EXAMPLE_MARKERS = ("Falsifying example", "Failing test case", "Failing explicit example")
# The promises a reader must look at, in the order they are listed, with their headings.
_ATTENTION = (
    ("violated", "violated"),
    ("stale_waiver", "stale waiver (the promise holds: remove the waiver)"),
    ("overridden", "overridden (not checked as written)"),
    ("pending", "pending (violated, but not yet held in the baseline)"),
    ("waived", "waived"),
    ("unverifiable", "unverifiable here (verify it yourself)"),
    ("kept_by_polyloop", "kept by polyloop (nothing to verify yourself)"),
)
_VERDICT_TEXT = {
    "conformant": "conformant",
    "setup_error": "SETUP ERROR (an implementation could not be built: its promises did not run)",
    "violations": "VIOLATIONS",
    "incomplete": "INCOMPLETE (promises missing, none held, overridden without a waiver, or a "
    "fixture teardown failed)",
    "no_implementations": "NO IMPLEMENTATIONS FOUND",
}


# The matrix views' glyph of each outcome (a cell reads without colour).
GLYPHS: dict[str, str] = {
    "held": "✓",
    "violated": "✗",
    "unverifiable": "~",
    "not_applicable": "–",
    "waived": "W",
    "overridden": "O",
    "stale_waiver": "S",
    "pending": "P",
    "setup_error": "E",
}


class ReportError(Exception):
    """A file is not a readable report (see :data:`READABLE_SCHEMAS`); the message names the
    file and is one line."""


def schema(version: str = SCHEMA) -> dict[str, Any]:
    """The JSON Schema of a report version (the current one unless ``version`` names an older
    one of :data:`READABLE_SCHEMAS`), shipped beside this module."""
    name = _SCHEMA_FILES.get(version)
    if name is None:
        raise ValueError(f"no schema for {version!r}; known: {', '.join(_SCHEMA_FILES)}")
    text = resources.files("polyloop").joinpath(name).read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def load_report(path: str | Path) -> dict[str, Any]:
    """Read and check a JSON report; raise :class:`ReportError` naming the file otherwise.

    Never anything else: a file nested too deeply for the parser, or holding text that cannot
    be printed (an escaped lone surrogate), is a :class:`ReportError` too.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ReportError(f"{path}: cannot read the report: {error.strerror or error}") from error
    except RecursionError:
        raise ReportError(f"{path}: not a report (JSON nested too deeply)") from None
    except ValueError as error:
        raise ReportError(f"{path}: not JSON: {_one_line(str(error))}") from error
    tag = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(tag, str) or tag not in READABLE_SCHEMAS:
        found = tag if isinstance(data, dict) else type(data).__name__
        newer = _is_newer(found)
        raise ReportError(
            f"{path}: not a {SCHEMA} report (schema: {_shown(found)})"
            + (": a newer polyloop wrote it; upgrade polyloop to read it" if newer else "")
        )
    problem = _unprintable(data) or _structure_problem(data)
    if problem is not None:
        raise ReportError(f"{path}: {problem}")
    return data


def _is_newer(tag: object) -> bool:
    """``polyloop-conformance/N`` with N above this polyloop's version of the format."""
    prefix, _, current = SCHEMA.rpartition("/")
    if not isinstance(tag, str) or not tag.startswith(prefix + "/"):
        return False
    number = tag[len(prefix) + 1 :]
    return number.isdigit() and len(number) < 6 and int(number) > int(current)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _shown(value: object) -> str:
    """``repr`` of a value read from a file, short and printable whatever it holds."""
    if not isinstance(value, str | int | float | bool | type(None)):
        return type(value).__name__
    return shown(value, 80)


def _unprintable(data: object) -> str | None:
    """Where the report holds a string that cannot be written as UTF-8 (a lone surrogate, which
    JSON can escape as ``\\ud800``), or ``None``. Walked without recursion: ``json`` already
    refused what is nested too deeply for it, but this must not depend on that."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return f"malformed report (a string holds an unpaired surrogate: {_shown(value)})"
    return None


Check = tuple[str, Callable[[object], bool], str]  # field, test, what it must be


def _text(value: object) -> bool:
    return isinstance(value, str)


def _text_or_null(value: object) -> bool:
    return value is None or isinstance(value, str)


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(part, str) for part in value)


def _number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _object(value: object) -> bool:
    return isinstance(value, dict)


def _setup_error(value: object) -> bool:
    return value is None or (
        isinstance(value, dict)
        and all(isinstance(value.get(part), str) for part in ("type", "message", "location"))
    )


def _count_of_reruns(value: object) -> bool:
    return _number(value) and isinstance(value, int) and value >= 1


# What the readers rely on, checked in this order: first the keys diffs and baselines use,
# then what the renderers print (so a baseline is refused for its keys before anything else).
_KEYS: tuple[Check, ...] = (("id", _text, "a string"),)
_RENDERED: tuple[Check, ...] = (
    ("seam", _text, "a string"),
    ("collected", _number, "a number"),
    ("catalogue", _number, "a number"),
    ("counts", _object, "an object"),
    ("source", _text, "a string"),
    ("missing", _texts, "a list of strings"),
    ("teardown_errors", _texts, "a list of strings"),
    ("setup_error", _setup_error, "null or an object with 'type', 'message' and 'location'"),
)
_PROMISE_RENDERED: tuple[Check, ...] = (
    ("nodeid", _text, "a string"),
    ("promise", _text, "a string"),
    *((name, _text_or_null, "a string or null") for name in _NULLABLE_TEXTS),
    ("reruns", _count_of_reruns, "a whole number of at least 1"),
)
_OPTIONAL = frozenset(
    {"source", "missing", "teardown_errors", "setup_error", "reruns", *_NULLABLE_TEXTS}
)


def _field_problem(entry: Mapping[str, Any], checks: tuple[Check, ...]) -> str | None:
    for name, test, kind in checks:
        if not (name not in entry and name in _OPTIONAL) and not test(entry.get(name)):
            return f"{name!r} must be {kind}"
    return None


def _promise_problem(promise: object, rendered: bool) -> str | None:
    if not isinstance(promise, dict):
        return "not an object"
    problem = _field_problem(promise, _PROMISE_RENDERED if rendered else _KEYS)
    if problem is None and not rendered and promise.get("outcome") not in OUTCOMES:
        problem = f"'outcome' must be one of {', '.join(OUTCOMES)}"
    return problem


def _structure_problem(data: Mapping[str, Any]) -> str | None:
    """What is wrong with a report's structure (one line), or ``None``."""
    implementations = data.get("implementations")
    if not isinstance(implementations, list) or not all(
        isinstance(item, dict) and isinstance(item.get("promises"), list)
        for item in implementations
    ):
        return "'implementations' must be a list of objects with 'promises'"
    for rendered in (False, True):
        for index, item in enumerate(implementations):
            problem = _field_problem(item, _RENDERED if rendered else _KEYS)
            if problem is not None:
                return f"implementations[{index}]: {problem}"
            for number, promise in enumerate(item["promises"]):
                problem = _promise_problem(promise, rendered)
                if problem is not None:
                    return f"implementations[{index}].promises[{number}]: {problem}"
    if data.get("verdict") not in _VERDICT_TEXT:
        return f"'verdict' must be one of {', '.join(_VERDICT_TEXT)}"
    if not isinstance(data.get("interrupted", False), bool):
        return "'interrupted' must be true or false"
    return None


def outcomes_by_key(report: Mapping[str, Any]) -> dict[Key, str]:
    """``(implementation id, promise id) → outcome`` of every promise in ``report``."""
    return {
        (item["id"], promise["id"]): promise["outcome"]
        for item in report.get("implementations", [])
        for promise in item["promises"]
    }


Pair = tuple[Mapping[str, Any], Mapping[str, Any]]  # (implementation, promise)


@dataclass(frozen=True, slots=True)
class _Walked:
    """What both renderers list after the implementations, gathered in one walk of the report:
    per attention group (an outcome, except that unverifiable promises polyloop keeps itself,
    ``kept_by``, are their own group) and the promises that needed reruns, in report order."""

    groups: dict[str, list[Pair]]
    reran: list[Pair]


def _walk(report: Mapping[str, Any]) -> _Walked:
    walked = _Walked({group: [] for group, _ in _ATTENTION}, [])
    for item in report.get("implementations", []):
        for promise in item["promises"]:
            group = walked.groups.get(_group_of(promise))
            if group is not None:
                group.append((item, promise))
            if promise.get("reruns"):
                walked.reran.append((item, promise))
    return walked


def _group_of(promise: Mapping[str, Any]) -> str:
    if promise["outcome"] == "unverifiable" and promise.get("kept_by"):
        return "kept_by_polyloop"
    return str(promise["outcome"])


def _counts_text(counts: Mapping[str, int]) -> str:
    return "  ".join(f"{name} {counts.get(name, 0)}" for name in OUTCOMES if counts.get(name, 0))


def _indent(text: str, prefix: str) -> list[str]:
    return [prefix + line for line in text.splitlines() if line.strip()]


def _where(item: Mapping[str, Any]) -> str:
    """The source, unless the id already says it (a hand-written class: ``path::Class``)."""
    source = str(item.get("source") or "")
    path = source.rsplit(":", 1)[0]
    return "" if not source or str(item["id"]).startswith(f"{path}::") else f"  {source}"


class _Whole(str):
    """A line of terminal text never wrapped: a command to copy, a falsifying example."""

    __slots__ = ()


def render_text(report: Mapping[str, Any], columns: int | None = None) -> str:
    """The report as terminal text: one line per implementation, then each promise to look at
    (unverifiable ones once per promise, with the implementations they apply to).

    With ``columns`` (the terminal's width), prose lines longer than it are wrapped between words —
    so a node id or a path is never split and stays copyable — and continue indented; the
    ``rerun:`` commands and Hypothesis's falsifying examples are left whole. The report itself
    (JSON, Markdown) always keeps the full, unwrapped text.
    """
    lines = [
        f"verdict: {_VERDICT_TEXT.get(report['verdict'], report['verdict'])}",
        f"kit {report.get('kit_version')}  suite {report.get('suite_hash')}  "
        f"pytest {report.get('pytest_version')}  python {report.get('python_version')}",
    ]
    if report.get("interrupted"):
        lines.insert(1, _INTERRUPTED)
    implementations = report.get("implementations", [])
    # The column the seams line up in: past _ALIGN_AT characters an id overflows it instead,
    # so that one long id does not push every line (and its wrapped parts) off the screen.
    width = min(max((len(item["id"]) for item in implementations), default=0), _ALIGN_AT)
    for item in implementations:
        lines.append(
            f"{item['id']:<{width}}  {item['seam']}  {item['collected']}/{item['catalogue']}  "
            f"{_counts_text(item['counts'])}{_where(item)}"
        )
        missing = item.get("missing") or []
        if missing:
            lines.append(f"{'':<{width}}  not run: {', '.join(missing)}")
        setup_error = item.get("setup_error")
        if setup_error:
            lines += [f"{'':<{width}}  {line}" for line in _setup_error_lines(setup_error)]
        elif not item["counts"].get("held"):
            lines.append(f"{'':<{width}}  no promise held: an empty contract never passes")
        lines.extend(f"{'':<{width}}  {error}" for error in item.get("teardown_errors") or [])
    walked = _walk(report)
    for outcome, heading in _ATTENTION:
        entries = walked.groups[outcome]
        if not entries:
            continue
        lines += ["", f"{heading}:"]
        if outcome in ("unverifiable", "kept_by_polyloop"):
            lines += _unverifiable_lines(entries)
            continue
        for item, promise in entries:
            lines.append(f"  {item['id']}  {promise['id']} — {promise['promise']}")
            if promise.get("waiver_reason"):
                lines.append(f"      waiver: {promise['waiver_reason']}")
            if promise.get("detail") and outcome in ("violated", "pending"):
                lines.extend(_detail_lines(promise["detail"], "      "))
            if outcome in ("violated", "stale_waiver", "pending"):
                command = f"pytest --polyloop-conformance '{_suite_of(promise)}'"
                lines.append(_Whole(f"      rerun: {command}"))
    if walked.reran:
        lines += ["", f"{_reruns_heading(len(walked.reran))}:"]
        lines += [
            f"  {item['id']}  {promise['id']} — {_after_reruns(promise)}"
            for item, promise in walked.reran
        ]
    if columns is not None:
        lines = [part for line in lines for part in _wrapped(line, columns)]
    return "\n".join(lines) + "\n"


_ALIGN_AT = 32

_INTERRUPTED = (
    "interrupted: the session stopped before every promise ran (Ctrl-C, a collection error, -x "
    "or --maxfail)"
)


def _setup_error_lines(setup_error: Mapping[str, str]) -> list[str]:
    """An implementation that could not be built, said once: the exception and where."""
    return [
        f"setup error: {setup_error['type']}: {setup_error['message']}",
        f"  at {setup_error['location']}: fix the fixture; none of its promises ran",
    ]


def _detail_lines(detail: str, prefix: str) -> list[str]:
    """A violation's detail, indented: its message is prose, the falsifying example (from
    Hypothesis's marker on) is kept whole."""
    lines: list[str] = []
    whole = False
    for line in _indent(detail, prefix):
        whole = whole or line.strip().startswith(_EXAMPLE_MARKERS)
        lines.append(_Whole(line) if whole else line)
    return lines


def _wrapped(line: str, columns: int) -> list[str]:
    if isinstance(line, _Whole) or len(line) <= columns:
        return [line]
    indent = line[: len(line) - len(line.lstrip(" "))]
    return textwrap.wrap(
        line.strip(),
        width=max(columns, len(indent) + 20),
        initial_indent=indent,
        subsequent_indent=indent + "    ",
        break_long_words=False,  # a node id, a path or a command is never split
        break_on_hyphens=False,
        replace_whitespace=False,
    ) or [line]


def _reruns_heading(count: int) -> str:
    return f"needed reruns ({count} promise{'' if count == 1 else 's'})"


def _after_reruns(promise: Mapping[str, Any]) -> str:
    """``held (after 2 reruns)``: a flaky promise keeps its outcome, but it is marked."""
    count = promise["reruns"]
    return f"{promise['outcome']} (after {count} rerun{'' if count == 1 else 's'})"


def _suite_of(promise: Mapping[str, Any]) -> str:
    """The node id of the promise's class: rerunning the whole suite judges the whole catalogue,
    so the rerun can end ``conformant`` (one item alone is always ``incomplete``)."""
    nodeid = str(promise.get("nodeid") or "")
    return nodeid.rsplit("::", 1)[0] if "::" in nodeid else nodeid


def _unverifiable_lines(entries: list[Pair]) -> list[str]:
    by_promise: dict[str, list[Pair]] = {}
    for item, promise in entries:
        by_promise.setdefault(promise["id"], []).append((item, promise))
    lines = []
    for promise_id, group in sorted(by_promise.items()):
        promise = group[0][1]
        lines.append(f"  {promise_id} — {promise['promise']}")
        lines.append(f"      why: {promise.get('why')}")
        if promise.get("kept_by"):
            lines.append(f"      kept by polyloop, documented in: {promise['kept_by']}")
        else:
            lines.append(f"      verify it yourself: {promise.get('verify_yourself')}")
        lines.append(f"      for: {', '.join(item['id'] for item, _ in group)}")
    return lines


def _md_cell(text: object) -> str:
    """Report text as inert Markdown on one line: HTML metacharacters as entities; what could
    start markup (a link, a code span, an escape) or end a table cell backslash-escaped."""
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`\[\]|])", r"\\\1", text)


def _md_code(text: object) -> str:
    """A code span holding ``text`` whatever it holds: a backtick in it cannot end the span
    (the fence is one backtick longer than its longest run), a ``|`` cannot end a table cell."""
    body = " ".join(str(text).split()).replace("|", "\\|")
    fence = _md_fence(body)[: _longest_backticks(body) + 1]
    return f"{fence} {body} {fence}" if "`" in body else f"`{body}`"


def _longest_backticks(text: str) -> int:
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def _md_fence(text: str) -> str:
    """A code fence longer than any backtick run in ``text`` (so the text cannot close it)."""
    return "`" * max(3, _longest_backticks(text) + 1)


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown (a table per implementation, the promises to look at)."""
    out = [
        "## polyloop conformance",
        "",
        f"**Verdict: {_VERDICT_TEXT.get(report['verdict'], report['verdict'])}** — kit "
        f"`{report.get('kit_version')}`, suite `{report.get('suite_hash')}`"
        + (f" — {_INTERRUPTED}" if report.get("interrupted") else ""),
        "",
        "| implementation | seam | promises | " + " | ".join(OUTCOMES) + " |",
        "|---|---|---|" + "---|" * len(OUTCOMES),
    ]
    setup_errors, teardown_errors = [], []
    for item in report.get("implementations", []):
        counts = item["counts"]
        out.append(
            f"| {_md_code(item['id'])} | {item['seam']} "
            f"| {item['collected']}/{item['catalogue']} | "
            + " | ".join(str(counts.get(name, 0)) for name in OUTCOMES)
            + " |"
        )
        if item.get("setup_error"):
            error_lines = " ".join(_setup_error_lines(item["setup_error"]))
            setup_errors.append(f"- {_md_code(item['id'])} {_md_cell(error_lines)}")
        teardown_errors += [
            f"- {_md_code(item['id'])} {_md_cell(error)}"
            for error in item.get("teardown_errors") or []
        ]
    if setup_errors:
        out += ["", "### setup error (the implementation could not be built)", "", *setup_errors]
    if teardown_errors:
        out += ["", "### fixture teardown failed (no promise is blamed; the run is incomplete)", ""]
        out += teardown_errors
    walked = _walk(report)
    for outcome, heading in _ATTENTION:
        entries = walked.groups[outcome]
        if not entries:
            continue
        out += ["", f"### {heading}", ""]
        for item, promise in entries:
            line = f"- {_md_code(item['id'])} `{promise['id']}` — {_md_cell(promise['promise'])}"
            if promise.get("waiver_reason"):
                line += f" (waiver: {_md_cell(promise['waiver_reason'])})"
            if outcome == "unverifiable" and promise.get("verify_yourself"):
                line += f" — verify it yourself: {_md_cell(promise['verify_yourself'])}"
            if outcome == "kept_by_polyloop":
                line += f" — kept by polyloop, documented in: {_md_cell(promise['kept_by'])}"
            out.append(line)
            if outcome in ("violated", "pending") and promise.get("detail"):
                fence = _md_fence(promise["detail"])
                out += ["", f"  {fence}", *_indent(promise["detail"], "  "), f"  {fence}"]
    if walked.reran:
        out += ["", f"### {_reruns_heading(len(walked.reran))}", ""]
        out += [
            f"- {_md_code(item['id'])} `{promise['id']}` — {_after_reruns(promise)}"
            for item, promise in walked.reran
        ]
    return "\n".join(out) + "\n\n" + render_matrix_markdown(report)


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
        ("implementations missing from NEW (regressed)", list(diff.lost)),
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


# The matrix views and the merge live in their own modules (which import this one); these are
# their public entry points.


class MergeError(ValueError):
    """Reports that cannot be merged (one line, naming what differs)."""


def render_matrix_text(
    report: Mapping[str, Any], columns: int | None = None, *, colour: bool = False
) -> str:
    """The promise × implementation matrix as terminal text (see
    :func:`polyloop._matrix.render_matrix_text`)."""
    from polyloop import _matrix

    return _matrix.render_matrix_text(report, columns, colour=colour)


def render_matrix_markdown(
    report: Mapping[str, Any], baselines: Sequence[Mapping[str, Any]] = ()
) -> str:
    """The matrix as GitHub Markdown, a collapsible block per seam."""
    from polyloop import _matrix

    return _matrix.render_matrix_markdown(report, baselines)


def render_html(report: Mapping[str, Any], baselines: Sequence[Mapping[str, Any]] = ()) -> str:
    """The matrix as one self-contained HTML page; ``baselines`` (oldest first) mark changes."""
    from polyloop import _matrix

    return _matrix.render_html(report, baselines)


def badge(report: Mapping[str, Any]) -> dict[str, Any]:
    """The shields.io endpoint JSON of ``report``."""
    from polyloop import _matrix

    return _matrix.badge(report)


def merge_reports(
    reports: Sequence[Mapping[str, Any]], *, allow_mixed_suites: bool = False
) -> dict[str, Any]:
    """Several jobs' reports as one (see :mod:`polyloop._merge` for the rules)."""
    from polyloop import _merge

    return _merge.merge_reports(reports, allow_mixed_suites=allow_mixed_suites)

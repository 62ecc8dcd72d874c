"""The report as terminal text and as Markdown (the matrix views are in :mod:`._matrix`)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from polyloop.report._format import _VERDICT_TEXT, FOLLOWS, OUTCOMES
from polyloop.report._matrix import render_matrix_markdown

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
    """``held 20  violated 1 (+2 following it)``: a knock-on is counted apart, once per cause."""
    parts = [f"{name} {counts.get(name, 0)}" for name in OUTCOMES if counts.get(name, 0)]
    follows = counts.get(FOLLOWS, 0)
    if follows:
        at = next((i for i, part in enumerate(parts) if part.startswith("violated ")), None)
        note = f"(+{follows} following {'it' if counts.get('violated') == 1 else 'them'})"
        if at is None:
            parts.append(f"violated 0 {note}")
        else:
            parts[at] += f" {note}"
    return "  ".join(parts)


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


def _implementation_lines(implementations: Sequence[Mapping[str, Any]]) -> list[str]:
    """A line per implementation (id, seam, how many ran, the counts), and under it what was
    not run, its setup or teardown errors, or that no promise held."""
    # The column the seams line up in: past _ALIGN_AT characters an id overflows it instead,
    # so that one long id does not push every line (and its wrapped parts) off the screen.
    width = min(max((len(item["id"]) for item in implementations), default=0), _ALIGN_AT)
    lines = []
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
    return lines


def render_text(
    report: Mapping[str, Any], columns: int | None = None, *, verbose: bool = True
) -> str:
    """The report as terminal text: one line per implementation, the implementations left out,
    then each promise to look at, and last what to do next.

    ``verbose`` (the default; the plugin's ``-v`` or ``--polyloop-verbose``) lists each
    unverifiable promise once with why and how to verify it yourself, and the implementations
    it applies to; without it those promises are counted on one line that says where to read
    them (``-v``, ``polyloop report [--markdown] REPORT.json``, the HTML matrix), so the section
    reads at a glance.

    With ``columns`` (the terminal's width), prose lines longer than it are wrapped between words —
    so a node id or a path is never split and stays copyable — and continue indented; the
    ``rerun:`` commands, the install hints of left-out implementations and Hypothesis's
    falsifying examples are left whole. The report itself (JSON, Markdown) always keeps the full,
    unwrapped text.
    """
    lines = [
        f"verdict: {_VERDICT_TEXT.get(report['verdict'], report['verdict'])}",
        f"kit {report.get('kit_version')}  suite {report.get('suite_hash')}  "
        f"pytest {report.get('pytest_version')}  python {report.get('python_version')}",
    ]
    if report.get("interrupted"):
        lines.insert(1, _INTERRUPTED)
    lines += _implementation_lines(report.get("implementations", []))
    lines += _left_out_lines(report.get("left_out") or [])
    walked = _walk(report)
    for outcome, heading in _ATTENTION:
        entries = walked.groups[outcome]
        if entries:
            lines += _attention_lines(outcome, heading, entries, verbose)
    if walked.reran:
        lines += ["", f"{_reruns_heading(len(walked.reran))}:"]
        lines += [
            f"  {item['id']}  {promise['id']} — {_after_reruns(promise)}"
            for item, promise in walked.reran
        ]
    if report["verdict"] != "no_implementations":  # the plugin says why there are none
        lines += ["", f"next: {next_step(report, walked, verbose)}"]
    if columns is not None:
        lines = [part for line in lines for part in _wrapped(line, columns)]
    return "\n".join(lines) + "\n"


def _attention_lines(outcome: str, heading: str, entries: list[Pair], verbose: bool) -> list[str]:
    """One attention group: its heading, then each promise (unverifiable ones by promise)."""
    if outcome in ("unverifiable", "kept_by_polyloop"):
        if not verbose:
            return ["", _brief_unverifiable(outcome, entries)]
        return ["", f"{heading}:", *_unverifiable_lines(entries)]
    lines = ["", f"{heading}:"]
    for item, promise in entries:
        lines.append(f"  {item['id']}  {promise['id']} — {promise['promise']}")
        if promise.get(FOLLOWS):
            lines.append(
                f"      follows: {promise[FOLLOWS]} (the same cause, counted once there: fix it "
                "first)"
            )
        if promise.get("waiver_reason"):
            lines.append(f"      waiver: {promise['waiver_reason']}")
        if promise.get("detail") and outcome in ("violated", "pending"):
            lines.extend(_detail_lines(promise["detail"], "      "))
        if outcome in ("violated", "stale_waiver", "pending"):
            command = f"pytest --polyloop-conformance '{_suite_of(promise)}'"
            lines.append(_Whole(f"      rerun: {command}"))
    return lines


def _brief_unverifiable(outcome: str, entries: list[Pair]) -> str:
    """The unverifiable promises (or those polyloop keeps) counted on one line."""
    count = len({promise["id"] for _, promise in entries})
    promises = f"{count} promise{'' if count == 1 else 's'}"
    if outcome == "kept_by_polyloop":
        return f"kept by polyloop: {promises} (nothing to verify yourself)"
    return (
        f"unverifiable here: {promises} the suite cannot check at this layer; how to verify "
        f"{'it' if count == 1 else 'each'} yourself: {_VERBOSE_WHERE}"
    )


# Where the texts a brief terminal section leaves out are read.
_VERBOSE_WHERE = (
    "rerun with -v (or --polyloop-verbose), or polyloop report [--markdown] REPORT.json"
)


def next_step(
    report: Mapping[str, Any], walked: _Walked | None = None, verbose: bool = True
) -> str:
    """What to do next, in one line, for the report's verdict."""
    walked = walked or _walk(report)
    verdict = report["verdict"]
    if verdict == "setup_error":
        return "fix the setup error above (the fixture or its samples); no promise of it ran"
    if verdict == "violations":
        return "fix each violated promise above (or remove each stale waiver), then run its rerun"
    if verdict == "incomplete":
        return (
            "make every implementation run its whole catalogue with a promise held, an override "
            "waived and no teardown failing (see above), then rerun"
        )
    if verdict == "no_implementations":
        return "tag the fixture that builds your implementation with @pytest_polyloop.seam(...)"
    todo = []
    if report.get("left_out"):
        todo.append("install what each left-out implementation needs to judge it too")
    if walked.groups["unverifiable"]:
        todo.append(
            f"verify the unverifiable promises yourself ({'above' if verbose else 'how: -v'})"
        )
    return "; ".join(todo) if todo else "nothing: every promise that can be checked here held"


def _left_out_lines(left_out: Sequence[Mapping[str, Any]]) -> list[str]:
    """The implementations not judged in this run, each with what to install; kept whole (the
    hint is a command to copy)."""
    if not left_out:
        return []
    lines = ["", "left out (not judged, so not in the verdict):"]
    lines += [_Whole(f"  {left_out_sentence(entry)}") for entry in left_out]
    return lines


def left_out_sentence(entry: Mapping[str, Any]) -> str:
    """``X is not judged in this conformance run: it needs …`` for one left-out entry."""
    return (
        f"{entry['implementation']} is not judged in this conformance run: it needs {entry['hint']}"
    )


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


def _left_out_markdown(left_out: Sequence[Mapping[str, Any]]) -> list[str]:
    """The implementations not judged in this run: a table of what each needs."""
    if not left_out:
        return []
    out = [
        "",
        "### left out (not judged in this run, so not in the verdict)",
        "",
        "| implementation | seam | extra | to judge it, install |",
        "|---|---|---|---|",
    ]
    for entry in left_out:
        extra = _md_code(entry["extra"]) if entry.get("extra") else "—"
        out.append(
            f"| {_md_code(entry['implementation'])} | {_md_cell(entry.get('seam') or '—')} "
            f"| {extra} | {_md_cell(entry['hint'])} |"
        )
    return out


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
    out += _left_out_markdown(report.get("left_out") or [])
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
    out += ["", f"**Next:** {_md_cell(next_step(report, walked))}"]
    return "\n".join(out) + "\n\n" + render_matrix_markdown(report)

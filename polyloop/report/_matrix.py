"""The promise × implementation matrix of a report, and its three views: terminal, Markdown, HTML.

Rows are promises grouped by seam (each with its one-line text), columns are implementations,
and a cell is an outcome with a glyph that reads without colour. Every cell that is not
``held`` (and every cell that changed since a baseline) has an anchor with its reason.
Every string that comes from a report (implementation ids, promise text, details, waiver
reasons) is escaped for the view it is written into: never markup.

Standard library only, like :mod:`polyloop.report`, which re-exports the public names.
"""

from __future__ import annotations

import functools
import html
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from polyloop.report._diff import diff_reports
from polyloop.report._format import FOLLOWS, GLYPHS, OUTCOMES

__all__ = [
    "GLYPHS",
    "NOT_RUN_GLYPH",
    "Matrix",
    "badge",
    "build_matrix",
    "render_html",
    "render_matrix_markdown",
    "render_matrix_text",
]

NOT_RUN_GLYPH = "·"  # the implementation's suite has the promise, but it was not run
NOT_RUN = "not_run"
_LABELS = {outcome: outcome.replace("_", " ") for outcome in OUTCOMES} | {NOT_RUN: "not run"}
# Worst first: what a sort by a column puts on top, and the legend's order.
_RANK = (
    "violated",
    "stale_waiver",
    "setup_error",
    "pending",
    NOT_RUN,
    "unverifiable",
    "overridden",
    "waived",
    "not_applicable",
    "held",
)
_CHANGE_MARKS = {"regressed": "▼", "recovered": "▲", "changed": "Δ"}
_MIXED_MARK = "≠"  # merged with --allow-mixed-suites: the jobs' suites differ on the promise
_FOLLOWS_MARK = "↳"  # violated by another violated promise's cause (counted once, there)


@dataclass(frozen=True, slots=True)
class Change:
    """A cell that moved since a baseline (``report diff``'s groups decide ``kind``)."""

    since: str  # "2026-11-30T10:00:00.000Z (kit 0.1.0)"
    kind: str  # regressed, recovered or changed
    was: str
    now: str


@dataclass(slots=True)
class Cell:
    outcome: str  # one of OUTCOMES, or NOT_RUN
    promise: Mapping[str, Any] | None  # the report's entry (None when not run)
    changes: list[Change] = field(default_factory=list)
    anchor: str | None = None  # set when the cell has a reason to link to

    @property
    def glyph(self) -> str:
        return GLYPHS.get(self.outcome, NOT_RUN_GLYPH)

    @property
    def marked(self) -> bool:
        """Changed since a baseline, or merged from suites that differ on the promise."""
        return bool(self.changes) or bool((self.promise or {}).get("mixed_suite"))

    @property
    def mark(self) -> str:
        mixed = _MIXED_MARK if (self.promise or {}).get("mixed_suite") else ""
        follows = _FOLLOWS_MARK if (self.promise or {}).get(FOLLOWS) else ""
        return follows + "".join(_CHANGE_MARKS[change.kind] for change in self.changes) + mixed

    @property
    def runs_differ(self) -> bool:
        runs = (self.promise or {}).get("runs") or []
        return len({run["outcome"] for run in runs}) > 1


@dataclass(slots=True)
class Column:
    number: int  # 1-based, as the terminal and Markdown legends show it
    id: str
    seam: str
    item: Mapping[str, Any]


@dataclass(slots=True)
class Row:
    seam: str
    promise_id: str
    text: str
    cells: dict[int, Cell]  # column number → cell (only the seam's implementations)
    anchor: str = ""

    @property
    def outcomes(self) -> set[str]:
        return {cell.outcome for cell in self.cells.values()}


@dataclass(slots=True)
class Matrix:
    report: Mapping[str, Any]
    columns: list[Column]
    seams: list[tuple[str, list[Row]]]
    baselines: list[tuple[str, Mapping[str, Any]]]  # (label, report), oldest first

    def rows(self) -> Iterable[Row]:
        for _, rows in self.seams:
            yield from rows

    def cells(self) -> Iterable[tuple[Row, Column, Cell]]:
        by_number = {column.number: column for column in self.columns}
        for row in self.rows():
            for number, cell in sorted(row.cells.items()):
                yield row, by_number[number], cell


def _since(report: Mapping[str, Any]) -> str:
    return f"{report.get('created_at')} (kit {report.get('kit_version')})"


def build_matrix(report: Mapping[str, Any], baselines: Sequence[Mapping[str, Any]] = ()) -> Matrix:
    """The matrix of ``report``; ``baselines`` (oldest first) mark the cells that changed
    since each, by :func:`polyloop.report.diff_reports`'s rules."""
    items = sorted(report.get("implementations", []), key=lambda i: (str(i["seam"]), str(i["id"])))
    columns = [
        Column(number, str(item["id"]), str(item["seam"]), item)
        for number, item in enumerate(items, 1)
    ]
    changes: dict[tuple[str, str], list[Change]] = {}
    for baseline in baselines:
        diff = diff_reports(baseline, report)
        for kind in ("regressed", "recovered", "changed"):
            for key, was, now in getattr(diff, kind):
                changes.setdefault(key, []).append(Change(_since(baseline), kind, was, now))
    seams: dict[str, dict[str, Row]] = {}
    for column in columns:
        rows = seams.setdefault(column.seam, {})
        for promise in column.item["promises"]:
            row = rows.setdefault(
                promise["id"], Row(column.seam, promise["id"], str(promise["promise"]), {})
            )
            row.cells[column.number] = Cell(
                str(promise["outcome"]), promise, changes.get((column.id, promise["id"]), [])
            )
        for promise_id in column.item.get("missing") or []:
            row = rows.setdefault(promise_id, Row(column.seam, promise_id, "", {}))
            row.cells[column.number] = Cell(NOT_RUN, None, changes.get((column.id, promise_id), []))
    ordered = [(seam, [rows[key] for key in sorted(rows)]) for seam, rows in sorted(seams.items())]
    matrix = Matrix(report, columns, ordered, [(_since(b), b) for b in baselines])
    for number, row in enumerate(matrix.rows(), 1):
        row.anchor = f"p-{number}"
        row.text = row.text or "(not run in this report: its text is unknown)"
    for number, (_, _, cell) in enumerate(
        (entry for entry in matrix.cells() if entry[2].outcome != "held" or entry[2].marked), 1
    ):
        cell.anchor = f"c-{number}"
    return matrix


def _reason_lines(cell: Cell) -> list[tuple[str, str]]:
    """(label, text) pairs that say why a cell is what it is."""
    promise = cell.promise or {}
    lines: list[tuple[str, str]] = []
    if promise.get(FOLLOWS):
        lines.append(("follows", f"{promise[FOLLOWS]} (the same cause, counted once there)"))
    if cell.outcome == NOT_RUN:
        lines.append(("why", "its suite has this promise, but it was not run (deselected, or "
                              "the run stopped before it)"))  # fmt: skip
    for key, label in (("waiver_reason", "waiver"), ("why", "why")):
        if promise.get(key):
            lines.append((label, str(promise[key])))
    if promise.get("kept_by"):
        lines.append(("kept by polyloop, documented in", str(promise["kept_by"])))
    elif promise.get("verify_yourself"):
        lines.append(("verify it yourself", str(promise["verify_yourself"])))
    if cell.runs_differ:
        runs = ", ".join(f"{run['report_id']}: {run['outcome']}" for run in promise["runs"])
        lines.append(("jobs", runs))
    if promise.get("mixed_suite"):
        lines.append(("suites", "the merged jobs' suites differ on this promise"))
    for change in cell.changes:
        lines.append((f"since {change.since}", f"{change.was} → {change.now} ({change.kind})"))
    return lines


# -- terminal --------------------------------------------------------------------------------


def _legend_entries() -> list[str]:
    return [f"{GLYPHS.get(o, NOT_RUN_GLYPH)} {_LABELS[o]}" for o in _RANK]


def _legend() -> str:
    return "  ".join(_legend_entries())


def _legend_lines(columns: int | None) -> list[str]:
    """The legend, entries never split, in lines that fit ``columns``."""
    lines = [" "]
    for entry in _legend_entries():
        if columns is not None and len(lines[-1]) + 2 + len(entry) > columns and lines[-1] != " ":
            lines.append(" ")
        lines[-1] += " " + entry if lines[-1] == " " else "  " + entry
    return lines


def _fit(text: str, width: int | None) -> str:
    if width is None or len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + "…"


def _fit_middle(text: str, width: int | None) -> str:
    """``text`` cut in the middle to ``width``: an id's start (the file) and end (the class)
    both stay readable."""
    if width is None or len(text) <= width:
        return text
    if width < 5:
        return _fit(text, max(width, 1))
    keep = width - 1
    return text[: keep // 3] + "…" + text[len(text) - (keep - keep // 3) :]


_ANSI = {  # a colour per glyph on a terminal that has them; the glyph alone says the outcome
    "held": "32",
    "violated": "1;31",
    "setup_error": "1;35",
    "stale_waiver": "33",
    "pending": "33",
    "unverifiable": "34",
}


def _coloured(cell: Cell | None, step: int, colour: bool) -> str:
    text = f"{cell.glyph if cell else ' ':>{step}}"
    code = _ANSI.get(cell.outcome) if (cell and colour) else None
    return f"{text[:-1]}\x1b[{code}m{text[-1]}\x1b[0m" if code else text


def render_matrix_text(
    report: Mapping[str, Any], columns: int | None = None, *, colour: bool = False
) -> str:
    """The matrix as terminal text: implementations as numbered columns (legend first), a
    block per seam, one line per promise (cells, then the promise id and text).

    With ``columns`` (the terminal's width) no line is longer than it: the promise text is
    cut with "…", and a seam with more implementations than fit is printed as several
    column groups, each a whole block of rows; a row is never wrapped. With ``colour``, each
    glyph is also coloured (ANSI), which the widths do not count.
    """
    matrix = build_matrix(report)
    lines = ["promise × implementation matrix", *_legend_lines(columns), "implementations:"]
    width = len(str(len(matrix.columns)))
    for column in matrix.columns:
        head = f"  {column.number:>{width}}  {column.seam}  "
        lines.append(
            head + _fit_middle(column.id, None if columns is None else columns - len(head))
        )
    step = width + 1
    for seam, rows in matrix.seams:
        numbers = sorted({number for row in rows for number in row.cells})
        label = max(20, min(40, max((len(row.promise_id) for row in rows), default=0)))
        room = None if columns is None else max(1, (columns - 2 - label) // step)
        groups = [numbers] if room is None else [
            numbers[start : start + room] for start in range(0, len(numbers), room)
        ]  # fmt: skip
        for index, group in enumerate(groups, 1):
            part = f" (columns {group[0]}–{group[-1]}, part {index}/{len(groups)})"
            lines += ["", _fit(f"{seam}{part if len(groups) > 1 else ''}:", columns)]
            lines.append(_fit("".join(f"{n:>{step}}" for n in group), columns))
            for row in rows:
                cells = "".join(_coloured(row.cells.get(n), step, False) for n in group)
                line = _fit(f"{cells}  {row.promise_id} — {row.text}", columns)
                if colour and line.startswith(cells):
                    shown = "".join(_coloured(row.cells.get(n), step, True) for n in group)
                    line = shown + line[len(cells) :]
                lines.append(line)
    return "\n".join(lines) + "\n"


# -- Markdown --------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~:])")


def md_text(value: object) -> str:
    """Report text as inert Markdown: one line, HTML metacharacters as entities, every
    Markdown punctuation character backslash-escaped (``|`` too, so tables hold)."""
    text = " ".join(str(value).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def _environment_text(environment: Mapping[str, Any] | None) -> str:
    if not environment:
        return "unknown (a polyloop-conformance/1 report)"
    workers = environment.get("xdist_workers") or 0
    parts = [
        f"Python {environment.get('python')}",
        f"pytest {environment.get('pytest')}",
        f"polyloop {environment.get('polyloop')}",
        str(environment.get("os")),
        "extras: " + (", ".join(environment.get("extras") or []) or "none"),
        f"xdist: {workers} worker{'' if workers == 1 else 's'}" if workers else "no xdist",
    ]
    if environment.get("job"):
        parts.insert(0, f"job {environment['job']}")
    return "; ".join(parts)


def environments(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(report id, environment text) of each run the report holds: one, or a merge's jobs."""
    jobs = report.get("jobs")
    if jobs:
        return [(str(job["report_id"]), _environment_text(job.get("environment"))) for job in jobs]
    return [(str(report.get("report_id", "-")), _environment_text(report.get("environment")))]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def render_matrix_markdown(
    report: Mapping[str, Any], baselines: Sequence[Mapping[str, Any]] = ()
) -> str:
    """The matrix as GitHub Markdown: a collapsible ``<details>`` block per seam (open when a
    cell is not held), each non-held cell linked to its reason below."""
    matrix = build_matrix(report, baselines)
    out = ["### promise × implementation matrix", "", md_text(_legend()), ""]
    out += ["Environments:", ""]
    out += [f"- {md_text(rid)}: {md_text(text)}" for rid, text in environments(report)]
    out += ["", "Implementations:", ""]
    out += [
        f"{column.number}\\. {md_text(column.id)} \\({md_text(column.seam)}\\)"
        + (f" — jobs: {md_text(', '.join(column.item['jobs']))}" if column.item.get("jobs") else "")
        + ("  " if column is not matrix.columns[-1] else "")
        for column in matrix.columns
    ]
    for seam, rows in matrix.seams:
        numbers = sorted({number for row in rows for number in row.cells})
        attention = sum(1 for row in rows for cell in row.cells.values() if cell.outcome != "held")
        summary = (
            f"{md_text(seam)}: {_plural(len(rows), 'promise')} × "
            f"{_plural(len(numbers), 'implementation')}"
        )
        summary += f", {attention} not held" if attention else ", all held"
        out += ["", f"<details{' open' if attention else ''}><summary>{summary}</summary>", ""]
        out.append("| promise | " + " | ".join(str(n) for n in numbers) + " |")
        out.append("|---|" + ":-:|" * len(numbers))
        for row in rows:
            cells = []
            for number in numbers:
                cell = row.cells.get(number)
                if cell is None:
                    cells.append(" ")
                    continue
                text = cell.glyph + cell.mark
                cells.append(f"[{text}](#{cell.anchor})" if cell.anchor else text)
            label = f'<a id="{row.anchor}"></a>{md_text(row.promise_id)} — {md_text(row.text)}'
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out += ["", "</details>"]
    reasons = [entry for entry in matrix.cells() if entry[2].anchor]
    if reasons:
        out += ["", "#### why each cell is not held", ""]
        for row, column, cell in reasons:
            line = (
                f'- <a id="{cell.anchor}"></a>{cell.glyph} {_LABELS[cell.outcome]}: '
                f"{md_text(column.id)} — {md_text(row.promise_id)} \\([back](#{row.anchor})\\)"
            )
            line += "".join(
                f"; {md_text(label)}: {md_text(text)}" for label, text in _reason_lines(cell)
            )
            out.append(line)
    return "\n".join(out) + "\n"


# -- HTML ------------------------------------------------------------------------------------

_COLOURS = {  # (background, text): dark text on light backgrounds, contrast above 7:1
    "held": ("#dcf2e3", "#0b3d1a"),
    "violated": ("#fbd9dd", "#6b0d19"),
    "setup_error": ("#f9d9f0", "#5c0a45"),
    "stale_waiver": ("#fde3cf", "#5a2a05"),
    "pending": ("#fff0c2", "#4d3a00"),
    "unverifiable": ("#e2e8f5", "#1c2a4a"),
    "overridden": ("#efe0fa", "#3d1660"),
    "waived": ("#eeeeee", "#2b2b2b"),
    "not_applicable": ("#f6f6f6", "#333333"),
    NOT_RUN: ("#ffffff", "#333333"),
}


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _change_words(cell: Cell) -> str:
    """What a cell's marks say, in the legend's words: `` (regressed)``, `` (recovered,
    changed)``…, one per baseline it moved since (``""`` when it did not move)."""
    if not cell.changes:
        return ""
    return f" ({', '.join(change.kind for change in cell.changes)})"


_CODE_SPAN = re.compile(r"``(.+?)``|`([^`]+)`")


def _prose(value: object) -> str:
    """A promise's text (a docstring's first paragraph) as HTML: escaped, its ``code`` spans
    (reStructuredText's double backticks, or Markdown's single ones) rendered as ``<code>``."""
    text, out, last = str(value), [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_e(text[last : match.start()]))
        out.append(f"<code>{_e(match.group(1) or match.group(2))}</code>")
        last = match.end()
    out.append(_e(text[last:]))
    return "".join(out)


def _header_name(implementation_id: str) -> str:
    """The id in a column header: all of it is the header's text, only its end (the class or
    fixture name, after the last ``::`` or ``/``) is shown; the rest is for screen readers and
    the tooltip."""
    colons, slash = implementation_id.rfind("::"), implementation_id.rfind("/")
    cut = max(colons + 2 if colons >= 0 else 0, slash + 1)
    if cut >= len(implementation_id):
        cut = 0
    head, tail = implementation_id[:cut], implementation_id[cut:]
    hidden = f'<span class="sr">{_e(head)}</span>' if head else ""
    return f'{hidden}<span class="name" title="{_e(implementation_id)}">{_e(tail)}</span>'


@functools.cache
def _page() -> string.Template:
    """The page's structure, style and script, as HTML (``matrix.html`` beside this module).
    A ``${name}`` that stands at the start of a line is a list of whole lines (each ending in a
    newline, none when the list is empty); any other is text within its line."""
    text = resources.files(__package__).joinpath("matrix.html").read_text(encoding="utf-8")
    return string.Template(text)


def _lines(items: Iterable[str]) -> str:
    return "".join(f"{item}\n" for item in items)


def render_html(report: Mapping[str, Any], baselines: Sequence[Mapping[str, Any]] = ()) -> str:
    """The matrix as one self-contained HTML page: no network, no external asset (a Content
    Security Policy forbids both); one ``<table>`` with column and row headers; sortable and
    filterable by seam and outcome with an inline script, and whole without it."""
    matrix = build_matrix(report, baselines)
    return _page().substitute(
        verdict=_e(report.get("verdict")),
        colours="".join(
            f".o-{name}{{background:{bg};color:{fg}}}" for name, (bg, fg) in _COLOURS.items()
        ),
        kit=_e(report.get("kit_version")),
        suite=_e(report.get("suite_hash")),
        made=_e(report.get("created_at")),
        interrupted=". Interrupted: not every promise ran." if report.get("interrupted") else ".",
        environments=_lines(
            f"<li><code>{_e(rid)}</code>: {_e(text)}</li>" for rid, text in environments(report)
        ),
        history=_history_html(report, matrix),
        legend=_lines(
            f'<li><span class="o-{o}">{_e(GLYPHS.get(o, NOT_RUN_GLYPH))}</span> '
            f"{_e(_LABELS[o])}</li>"
            for o in _RANK
        ),
        seam_options=_lines(
            f'<option value="{_e(seam)}">{_e(seam)}</option>' for seam, _ in matrix.seams
        ),
        outcome_options=_lines(f'<option value="{o}">{_e(_LABELS[o])}</option>' for o in _RANK),
        rank=_e(json.dumps(_RANK)),
        column_headers=_lines(
            f'<th scope="col" id="col-{column.number}"><button type="button" '
            f'data-sort="{column.number}">{column.number}</button>'
            f" {_header_name(column.id)}</th>"
            for column in matrix.columns
        ),
        seam_bodies=_lines(_seam_body_html(matrix, seam, rows) for seam, rows in matrix.seams),
        reasons=_lines(
            _reason_html(row, column, cell) for row, column, cell in matrix.cells() if cell.anchor
        ),
        implementations=_lines(_implementations_html(report, matrix)),
        left_out=_lines(_left_out_html(report.get("left_out") or [])),
    )


def _left_out_html(left_out: Sequence[Mapping[str, Any]]) -> list[str]:
    """The implementations not judged in this run, with what each needs (none: nothing)."""
    if not left_out:
        return []
    items = [
        f"<li><strong>{_e(entry['implementation'])}</strong>"
        + (f" ({_e(entry['seam'])})" if entry.get("seam") else "")
        + f": it needs {_prose(entry['hint'])}</li>"
        for entry in left_out
    ]
    heading = '<h2 id="left-out">Left out (not judged in this run, so not in the verdict)</h2>'
    return [heading, "<ul>", *items, "</ul>"]


def _history_html(report: Mapping[str, Any], matrix: Matrix) -> str:
    if not matrix.baselines:
        return ""
    items = []
    for label, baseline in matrix.baselines:
        diff = diff_reports(baseline, report)
        items.append(
            f"<li>since {_e(label)}: {len(diff.regressed)} regressed "
            f"({_CHANGE_MARKS['regressed']}), {len(diff.recovered)} recovered "
            f"({_CHANGE_MARKS['recovered']}), {len(diff.changed)} changed "
            f"({_CHANGE_MARKS['changed']}), implementations lost: "
            f"{_e(', '.join(diff.lost) or 'none')}</li>"
        )
    return _lines(['<h2 id="history">Changes since the baselines</h2>', "<ul>", *items, "</ul>"])


def _seam_body_html(matrix: Matrix, seam: str, rows: Sequence[Row]) -> str:
    """One ``<tbody>`` a seam: its heading row, then a row a promise with a cell a column."""
    out = [
        f'<tbody data-seam="{_e(seam)}">',
        f'<tr><th scope="rowgroup" colspan="{len(matrix.columns) + 1}">{_e(seam)}</th></tr>',
    ]
    for row in rows:
        outcomes = " ".join(sorted(row.outcomes))
        out.append(
            f'<tr data-outcomes="{_e(outcomes)}" data-promise="{_e(row.promise_id)}">'
            f'<th scope="row" id="{row.anchor}"><code>{_e(row.promise_id)}</code> '
            f"{_prose(row.text)}</th>"
        )
        out += [_cell_html(row.cells.get(column.number), column) for column in matrix.columns]
        out.append("</tr>")
    out.append("</tbody>")
    return "\n".join(out)


def _cell_html(cell: Cell | None, column: Column) -> str:
    if cell is None:
        return '<td class="o-none"><span class="sr">not this seam</span></td>'
    mark = cell.mark
    label = _LABELS[cell.outcome] + _change_words(cell)
    label += " (suites differ)" if _MIXED_MARK in mark else ""
    follows = (cell.promise or {}).get(FOLLOWS)
    label += f" (follows {follows})" if follows else ""
    shown = f'<span aria-hidden="true">{_e(cell.glyph + mark)}</span>'
    inner = (
        f'<a href="#{cell.anchor}">{shown}<span class="sr">{_e(label)}</span></a>'
        if cell.anchor
        else f'{shown}<span class="sr">{_e(label)}</span>'
    )
    return (
        f'<td class="o-{cell.outcome}" data-outcome="{cell.outcome}" '
        f'data-column="{column.number}" title="{_e(label)}">{inner}</td>'
    )


def _reason_html(row: Row, column: Column, cell: Cell) -> str:
    """The article a cell that is not held links to: the promise, the reasons, the detail."""
    out = [
        f'<article id="{cell.anchor}">',
        f'<h3><span class="o-{cell.outcome}">{_e(cell.glyph)} {_e(_LABELS[cell.outcome])}'
        f"</span> {_e(column.id)} — <code>{_e(row.promise_id)}</code></h3>",
        f"<p>{_prose(row.text)}</p>",
    ]
    reasons = _reason_lines(cell)
    if reasons:
        out.append("<dl>")
        out += [f"<dt>{_e(label)}</dt><dd>{_prose(text)}</dd>" for label, text in reasons]
        out.append("</dl>")
    detail = (cell.promise or {}).get("detail")
    if detail:
        out.append(f"<pre>{_e(detail)}</pre>")
    out += [f'<p><a href="#{row.anchor}">back to the matrix</a></p>', "</article>"]
    return "\n".join(out)


def _implementations_html(report: Mapping[str, Any], matrix: Matrix) -> list[str]:
    env_of = dict(environments(report))
    items = []
    for column in matrix.columns:
        item = column.item
        jobs = [f"{rid}: {env_of.get(rid, 'unknown')}" for rid in item.get("jobs") or []]
        items.append(
            f"<li><strong>{_e(column.id)}</strong> ({_e(column.seam)}), "
            f"<code>{_e(item.get('source'))}</code>"
            + ("; seen in: " + "; ".join(_e(job) for job in jobs) if jobs else "")
            + "</li>"
        )
    return items


# -- badge -----------------------------------------------------------------------------------


def badge(report: Mapping[str, Any]) -> dict[str, Any]:
    """The shields.io endpoint JSON for ``report``, in one unit, implementations:
    ``conformant 25/25 implementations``, ``violations in 3/25 implementations`` (a violated
    promise or a stale waiver), ``setup error in 1/25 implementations``, ``incomplete 20/25
    implementations`` (the clean ones) or ``no implementations``; implementations left out of
    the run (not judged) are added in the same unit: ``conformant 18/18 implementations, 5 left
    out``."""
    items = report.get("implementations", [])
    total = len(items)
    verdict = report.get("verdict")
    violating = sum(
        1 for item in items if item["counts"].get("violated") or item["counts"].get("stale_waiver")
    )
    clean = sum(
        1
        for item in items
        if not item.get("setup_error")
        and not item["counts"].get("violated")
        and not item["counts"].get("stale_waiver")
    )
    if verdict == "conformant":
        message, colour = f"conformant {total}/{total} implementations", "brightgreen"
    elif verdict == "violations":
        message, colour = f"violations in {violating}/{total} implementations", "red"
    elif verdict == "setup_error":
        broken = sum(1 for item in items if item.get("setup_error"))
        message, colour = f"setup error in {broken}/{total} implementations", "red"
    elif verdict == "incomplete":
        message, colour = f"incomplete {clean}/{total} implementations", "orange"
    else:
        message, colour = "no implementations", "lightgrey"
    left_out = len(report.get("left_out") or [])
    if left_out:  # not judged: never counted among the conformant ones
        message += f", {left_out} left out"
    return {"schemaVersion": 1, "label": "polyloop", "message": message, "color": colour}

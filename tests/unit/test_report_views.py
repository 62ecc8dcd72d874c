"""The matrix views (terminal, Markdown, HTML) and the badge, rendered from fixed reports and
checked for structure: every outcome, a not-run cell, long, unicode and hostile names, 1 and 40
implementations. Report text is escaped in every view, never markup."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from polyloop.cli import main
from polyloop.report import (
    GLYPHS,
    OUTCOMES,
    badge,
    merge_reports,
    render_html,
    render_markdown,
    render_matrix_markdown,
    render_matrix_text,
    schema,
)
from tests.conftest import require_extra
from tests.unit._reports import (
    HOSTILE,
    every_outcome_report,
    implementation,
    many_report,
    report,
)

ONE = report(implementation("only_one", "event_sink", {"event_sink.a": "held"}))
FIXED = {"every outcome": every_outcome_report(), "one": ONE, "forty": many_report(40)}


class Page(HTMLParser):
    """What the structure checks need from a page: tags, ids, links, header cells, cells."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: set[str] = set()
        self.header_cells: list[str] = []
        self.cells: list[dict[str, Any]] = []  # td: attrs and the links inside
        self.styles: list[str] = []
        self._stack: list[str] = []
        self._header: list[str] | None = None
        self._cell: dict[str, Any] | None = None
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if attributes.get("id"):
            self.ids.add(str(attributes["id"]))
        self._stack.append(tag)
        if tag == "th" and "thead" in self._stack:
            self._header = []
        if tag == "td":
            self._cell = {"attrs": attributes, "links": []}
        if tag == "a" and self._cell is not None:
            self._cell["links"].append(attributes.get("href"))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self._header is not None:
            self.header_cells.append(" ".join("".join(self._header).split()))
            self._header = None
        if tag == "td" and self._cell is not None:
            self.cells.append(self._cell)
            self._cell = None
        if self._stack and self._stack[-1] == tag:
            self._stack.pop()
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._header is not None:
            self._header.append(data)
        if self._in_style:
            self.styles.append(data)


def parse(page: str) -> Page:
    parser = Page()
    parser.feed(page)
    parser.close()
    return parser


def implementation_ids(fixed: dict[str, Any]) -> list[str]:
    items = sorted(fixed["implementations"], key=lambda i: (i["seam"], i["id"]))
    return [item["id"] for item in items]


@pytest.mark.parametrize("name", FIXED)
def test_the_html_page_has_one_table_with_a_header_cell_per_implementation(name: str) -> None:
    fixed = FIXED[name]
    page = parse(render_html(fixed))
    assert [tag for tag, _ in page.tags].count("table") == 1
    ids = implementation_ids(fixed)
    assert page.header_cells == ["Promise"] + [f"{n} {i}" for n, i in enumerate(ids, 1)]
    scopes = [attrs.get("scope") for tag, attrs in page.tags if tag == "th"]
    assert scopes.count("col") == len(ids) + 1
    assert scopes.count("row") == sum(
        len({p["id"] for i in fixed["implementations"] if i["seam"] == s for p in i["promises"]}
            | {m for i in fixed["implementations"] if i["seam"] == s for m in i["missing"]})
        for s in {i["seam"] for i in fixed["implementations"]}
    )  # fmt: skip


@pytest.mark.parametrize("name", FIXED)
def test_every_cell_not_held_links_to_an_anchor_that_exists(name: str) -> None:
    page = parse(render_html(FIXED[name]))
    judged = [cell for cell in page.cells if cell["attrs"].get("data-outcome")]
    assert judged
    for cell in judged:
        if cell["attrs"]["data-outcome"] == "held":
            continue
        assert len(cell["links"]) == 1, cell
        href = cell["links"][0]
        assert href.startswith("#"), href
        assert href[1:] in page.ids, href
    for tag, attrs in page.tags:  # every in-page link lands somewhere (back links too)
        if tag == "a" and str(attrs.get("href", "")).startswith("#"):
            assert str(attrs["href"])[1:] in page.ids


def test_the_every_outcome_page_shows_every_outcome_and_the_not_run_cell() -> None:
    page = parse(render_html(FIXED["every outcome"]))
    shown = {
        cell["attrs"]["data-outcome"] for cell in page.cells if "data-outcome" in cell["attrs"]
    }
    assert shown == {*OUTCOMES, "not_run"}


@pytest.mark.parametrize("name", FIXED)
def test_the_page_references_no_external_resource(name: str) -> None:
    text = render_html(FIXED[name])
    page = parse(text)
    for tag, attrs in page.tags:
        for attribute in ("src", "href", "action", "srcset", "poster", "data"):
            value = attrs.get(attribute)
            if value is None:
                continue
            assert value.startswith("#") or value.startswith("data:"), (tag, attribute, value)
        assert tag not in ("iframe", "object", "embed", "img", "base")
    assert [attrs.get("rel") for tag, attrs in page.tags if tag == "link"] == ["icon"]
    assert all("url(" not in style and "@import" not in style for style in page.styles)
    assert "default-src 'none'" in text  # the page's policy forbids the network too


def test_hostile_names_and_texts_are_text_in_the_page_never_markup() -> None:
    text = render_html(FIXED["every outcome"])
    page = parse(text)
    assert [tag for tag, _ in page.tags].count("script") == 1  # the page's own, inline
    assert all(not attrs.get("src") for tag, attrs in page.tags if tag == "script")
    assert HOSTILE not in text  # only escaped
    assert f"3 {HOSTILE}" not in page.header_cells
    assert any(cell == f"1 {' '.join(HOSTILE.split())}" for cell in page.header_cells)
    assert "Ünïcode执行器Executor" in text
    assert not any(
        str(value).lower().startswith("javascript")
        for _, attrs in page.tags
        for value in attrs.values()
    )


def test_the_page_reads_without_javascript_the_filters_are_hidden_until_it_runs() -> None:
    page = parse(render_html(FIXED["every outcome"]))
    form = next(attrs for tag, attrs in page.tags if tag == "form")
    assert "hidden" in form  # shown by the script; without it every row is there
    assert all(not attrs.get("hidden") for tag, attrs in page.tags if tag in ("tr", "tbody"))


def test_baselines_mark_cells_that_changed_with_the_baselines_date_and_kit() -> None:
    old = report(
        implementation("a", "event_sink", {"event_sink.x": "held", "event_sink.y": "violated"}),
        created_at="2026-01-01T00:00:00.000Z",
    )
    new = report(
        implementation("a", "event_sink", {"event_sink.x": "violated", "event_sink.y": "held"})
    )
    text = render_html(new, [old])
    page = parse(text)
    assert "since 2026-01-01T00:00:00.000Z (kit 0.1.0): 1 regressed" in text
    cells = {cell["attrs"]["title"]: cell for cell in page.cells if "title" in cell["attrs"]}
    # in the legend's words: a ▼ cell is "regressed", never "changed" (which is Δ)
    assert set(cells) == {"violated (regressed)", "held (recovered)"}
    for cell in cells.values():  # the recovered held cell links to its change as well
        assert cell["links"]
        assert cell["links"][0][1:] in page.ids
    assert "held → violated (regressed)" in text
    assert "violated → held (recovered)" in text
    markdown = render_matrix_markdown(new, [old])
    assert "✗▼" in markdown
    assert "✓▲" in markdown


# -- Markdown --------------------------------------------------------------------------------

ALLOWED_MARKDOWN_TAGS = {"details", "summary", "a"}


@pytest.mark.parametrize("name", FIXED)
def test_the_markdown_matrix_is_collapsible_per_seam_and_its_links_land(name: str) -> None:
    fixed = FIXED[name]
    markdown = render_matrix_markdown(fixed)
    page = parse(markdown)
    assert {tag for tag, _ in page.tags} <= ALLOWED_MARKDOWN_TAGS
    seams = {item["seam"] for item in fixed["implementations"]}
    assert [tag for tag, _ in page.tags].count("details") == len(seams)
    targets = re.findall(r"\]\(#([^)]+)\)", markdown)
    assert bool(targets) == (name != "one")  # only cells not held link
    assert set(targets) <= page.ids
    for block in re.findall(r"<details.*?</details>", markdown, re.S):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        bars = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
        assert len(bars) == 1, rows  # every row has as many cells as the header


def outside_code(markdown: str) -> str:
    """The Markdown less its code spans and fences (whose text GitHub shows as it is)."""
    markdown = re.sub(r"^ *(`{3,}).*?^ *\1", "", markdown, flags=re.S | re.M)
    return re.sub(r"(?<![`\\])(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)


def has_link(markdown: str) -> bool:
    """A Markdown link or image whose brackets are not escaped."""
    return re.search(r"(?<!\\)\]\(", markdown) is not None


def test_the_markdown_never_carries_report_text_as_markup() -> None:
    fixed = FIXED["every outcome"]
    for markdown in (render_matrix_markdown(fixed), outside_code(render_markdown(fixed))):
        assert "<script" not in markdown
        assert "<!--" not in markdown
        assert "](javascript" not in markdown
        assert not has_link(re.sub(r"\]\(#[cp]-\d+\)", "", markdown))
        assert {tag for tag, _ in parse(markdown).tags} <= ALLOWED_MARKDOWN_TAGS
    assert "&lt;script&gt;" in render_matrix_markdown(fixed)


def test_an_id_with_backticks_cannot_end_its_code_span_in_the_markdown_report() -> None:
    fixed = report(implementation("a``b|c", "event_sink", {"event_sink.x": "violated"}))
    markdown = render_markdown(fixed)
    assert "| ``` a``b\\|c ``` |" in markdown
    assert "- ``` a``b\\|c ``` `event_sink.x`" in markdown


def test_the_step_summary_markdown_holds_the_matrix() -> None:
    assert "### promise × implementation matrix" in render_markdown(ONE)


# -- terminal --------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [40, 60, 80, 120])
def test_the_terminal_matrix_fits_the_width_in_column_groups_never_wrapping_a_row(
    columns: int,
) -> None:
    text = render_matrix_text(many_report(40), columns)
    lines = text.splitlines()
    assert all(len(line) <= columns for line in lines)
    groups = [line for line in lines if line.startswith("model_client (columns")]
    assert len(groups) >= 2  # 40 columns of 3 characters never fit beside the promise ids
    assert len(groups) == len(set(groups))
    numbers = [int(n) for line in lines if re.fullmatch(r"[ 0-9]+", line) for n in line.split()]
    assert numbers == list(range(1, 41))  # every column once, in order
    rows = [line for line in lines if "model_client.p2 —" in line]
    assert len(rows) == len(groups)  # each group is a whole block of rows
    assert "".join(row.split("  model_client")[0] for row in rows).split() == [
        GLYPHS["violated"] if n % 7 == 3 else GLYPHS["held"] for n in range(40)
    ]


def test_the_terminal_matrix_without_a_width_is_one_block_with_a_legend() -> None:
    text = render_matrix_text(FIXED["every outcome"])
    assert "(columns" not in text
    for outcome in OUTCOMES:
        assert f"{GLYPHS[outcome]} {outcome.replace('_', ' ')}" in text
    assert "· not run" in text
    assert "  1  <script>" in text or "  1  " in text


# -- badge -----------------------------------------------------------------------------------


def test_the_badge_is_shields_endpoint_json() -> None:
    conformant = report(implementation("a", "event_sink", {"event_sink.x": "held"}))
    assert badge(conformant) == {
        "schemaVersion": 1,
        "label": "polyloop",
        "message": "conformant 1/1 implementations",
        "color": "brightgreen",
    }
    violated = badge(many_report(40))
    broken = sum(
        1
        for item in many_report(40)["implementations"]
        if item["counts"]["violated"] or item["counts"]["stale_waiver"]
    )
    # one unit, implementations, as in every other message (it said "6 violated": promises)
    assert (violated["message"], violated["color"]) == (
        f"violations in {broken}/40 implementations",
        "red",
    )
    assert badge(FIXED["every outcome"])["message"] == "setup error in 1/3 implementations"


def test_report_html_and_badge_commands_write_their_files(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(FIXED["every outcome"]), encoding="utf-8")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(ONE), encoding="utf-8")
    out = tmp_path / "conformance.html"
    assert main(["report", "html", str(path), "-o", str(out), "--baseline", str(old)]) == 0
    assert parse(out.read_text(encoding="utf-8")).header_cells[0] == "Promise"
    assert main(["report", "badge", str(path), "-o", str(tmp_path / "badge.json")]) == 0
    assert json.loads((tmp_path / "badge.json").read_text())["label"] == "polyloop"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "html", "A", "B"], "report html takes one REPORT"),
        (["report", "badge"], "report badge takes one REPORT"),
        (["report", "merge"], "report merge takes one or more reports"),
        (["report", "badge", "R", "--baseline", "X"], "report badge does not take --baseline"),
        (["report", "R", "-o", "X"], "report FILE does not take -o"),
        (["report", "diff", "A", "B", "-o", "X"], "report diff does not take -o"),
    ],
)
def test_wrong_arguments_to_the_new_forms_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"polyloop: error: {message}")
    assert err.count("\n") == 1


def test_promise_texts_and_reasons_in_the_markdown_report_are_text() -> None:
    # On main the promise text went into the Markdown as it was: `<script>` and the link were
    # markup there.
    fixed = report(
        implementation(
            "a",
            "event_sink",
            {"event_sink.x": "violated", "event_sink.y": "unverifiable"},
            texts={"event_sink.x": HOSTILE, "event_sink.y": HOSTILE},
        )
    )
    markdown = outside_code(render_markdown(fixed))
    assert "<script" not in markdown
    assert not has_link(re.sub(r"\]\(#[cp]-\d+\)", "", markdown))  # the matrix's own links
    assert "&lt;script&gt;" in markdown


def test_report_matrix_option_prints_the_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(ONE), encoding="utf-8")
    assert main(["report", "--matrix", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("verdict: conformant\n")
    assert "promise × implementation matrix" in out
    assert "  1  event_sink  only_one\n" in out


@pytest.mark.parametrize(
    ("implementation_id", "shown"),
    [
        ("tool_executor", "tool_executor"),
        ("tests/contract/test_x.py::TestXContract", "TestXContract"),
        ("pkg/fixture_name", "fixture_name"),
        ("odd::", "odd::"),
    ],
)
def test_a_column_header_shows_the_ids_end_and_holds_all_of_it(
    implementation_id: str, shown: str
) -> None:
    fixed = report(implementation(implementation_id, "event_sink", {"event_sink.a": "held"}))
    page = render_html(fixed)
    assert f'<span class="name" title="{implementation_id}">{shown}</span>' in page
    assert parse(page).header_cells[1] == f"1 {implementation_id}"


@pytest.mark.parametrize(
    "module", ["polyloop.report._matrix", "polyloop.report._merge", "polyloop.report"]
)
def test_each_report_module_imports_first_in_a_fresh_interpreter(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_a_merged_report_shows_one_column_per_implementation_with_its_jobs() -> None:
    other = "sha256:" + "b" * 64
    first = report(
        implementation("s", "event_sink", {"event_sink.a": "held", "event_sink.b": "held"}),
        report_id="job-a",
        job="py311",
    )
    second = report(
        implementation(
            "s",
            "event_sink",
            {"event_sink.a": "violated", "event_sink.b": "held"},
            texts={"event_sink.b": "reworded"},
            suite=other,
        ),
        report_id="job-b",
        suite=other,
        job="py312",
    )
    merged = merge_reports([first, second], allow_mixed_suites=True)
    text = render_html(merged)
    page = parse(text)
    assert page.header_cells == ["Promise", "1 s"]
    assert "seen in: job-a: job py311; Python 3.11.2" in text
    assert "; job-b: job py312; Python 3.11.2" in text
    assert "<dt>jobs</dt><dd>job-a: held, job-b: violated</dd>" in text
    titles = [cell["attrs"]["title"] for cell in page.cells]
    assert titles == ["violated", "held (suites differ)"]
    assert all(cell["links"] for cell in page.cells)  # the marked held cell links too
    markdown = render_matrix_markdown(merged)
    assert "1\\. s \\(event\\_sink\\) — jobs: job\\-a, job\\-b" in markdown
    assert "[✓≠](#c-2)" in markdown


@pytest.mark.parametrize("name", FIXED)
def test_the_fixed_reports_are_valid_reports(name: str) -> None:
    require_extra("schema")
    import jsonschema

    jsonschema.validate(FIXED[name], schema())


def test_the_terminal_matrix_colours_glyphs_only_when_asked_and_widths_ignore_colour() -> None:
    plain = render_matrix_text(FIXED["forty"], 60)
    coloured = render_matrix_text(FIXED["forty"], 60, colour=True)
    assert "\x1b[" not in plain
    assert "\x1b[1;31m✗\x1b[0m" in coloured
    assert "\x1b[32m✓\x1b[0m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain


def test_a_report_without_implementations_renders_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = report()
    assert parse(render_html(empty)).header_cells == ["Promise"]
    assert "implementations:" in render_matrix_text(empty, 80)
    assert "<details" not in render_matrix_markdown(empty)
    assert badge(empty)["message"] == "no implementations"
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(empty), encoding="utf-8")
    assert main(["report", "badge", str(path)]) == 0  # no -o: standard output
    assert json.loads(capsys.readouterr().out)["color"] == "lightgrey"


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_every_cell_colour_has_enough_contrast_for_its_text() -> None:
    from polyloop.report._matrix import _COLOURS

    page = render_html(FIXED["every outcome"])
    for outcome, (background, text) in _COLOURS.items():
        assert f".o-{outcome}{{background:{background};color:{text}}}" in page
        light, dark = sorted((_luminance(background), _luminance(text)), reverse=True)
        assert (light + 0.05) / (dark + 0.05) >= 7, outcome  # WCAG AAA for normal text


def test_docstring_code_spans_are_rendered_in_the_html_not_shown_raw() -> None:
    promise = "``append(run_id, record)`` refuses a `<b>` and ``a`b``; plain <i> stays text"
    item = implementation("s", "event_sink", {"event_sink.x": "violated"})
    item["promises"][0]["promise"] = promise
    text = render_html(report(item))
    assert "``" not in text
    assert "<code>append(run_id, record)</code> refuses a <code>&lt;b&gt;</code>" in text
    assert "<code>a`b</code>" in text
    assert "plain &lt;i&gt; stays text" in text


def test_a_cell_that_merely_changed_is_marked_delta_and_titled_changed() -> None:
    old = report(implementation("a", "event_sink", {"event_sink.x": "held"}))
    new = report(implementation("a", "event_sink", {"event_sink.x": "waived"}))
    page = parse(render_html(new, [old]))
    titled = [cell for cell in page.cells if "title" in cell["attrs"]]
    assert [cell["attrs"]["title"] for cell in titled] == ["waived (changed)"]
    assert "Δ changed" in render_html(new, [old])  # the legend names the mark the cell shows

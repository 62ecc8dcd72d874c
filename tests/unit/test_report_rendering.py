"""What a reader sees of a report: the terminal text and the Markdown, pinned line by line.

One report holds every branch the renderers have (every outcome, a setup error, teardown
errors, reruns, a promise polyloop keeps itself, one unverifiable promise shared by two
implementations, a falsifying example, an interrupted session). Its renderings are compared
with the files in ``golden/``; after a deliberate change of the text, rewrite them with
``POLYLOOP_UPDATE_GOLDEN=1 pytest tests/unit/test_report_rendering.py`` and read the diff.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from polyloop.report import render_markdown, render_text
from tests.unit._reports import every_outcome_report, implementation, report

GOLDEN = Path(__file__).parent / "golden"

_EXAMPLE = (
    "assert 2 == 3\n"
    "Falsifying example: test_p0(\n"
    "    self=<tests.contract.test_x.Suite object at 0x7f>, action=Action(text='a long "
    "argument that must never be wrapped because it is copied back into a test'),\n"
    ")"
)


_PROSE = (
    "the observation was cut at 4000 characters but the executor reported 3999 characters "
    "as cut, so the count and the text disagree"
)
_HOSTILE_TEXT = "a <b>bold</b> & [link](x) | `code` \\escape > end"


def _rendering_report() -> dict[str, Any]:
    data = every_outcome_report()
    data["interrupted"] = True
    first, second, third = data["implementations"]
    first["teardown_errors"] = ["teardown of impl failed: OSError: disk gone"]
    first["missing"] = ["action_executor.zz_not_run", "action_executor.zzz_not_run_either"]
    promises = {p["id"]: p for p in first["promises"]}
    promises["action_executor.p3"]["reruns"] = 1
    promises["action_executor.p4"]["reruns"] = 2
    promises["action_executor.p1"]["detail"] = (
        "```python\nassert observation == expected  # a fenced block in a failure message\n```"
    )
    promises["action_executor.p5"]["waiver_reason"] = _HOSTILE_TEXT  # waived
    promises["action_executor.p6"]["promise"] = _HOSTILE_TEXT  # stale waiver
    for promise in second["promises"]:
        if promise["outcome"] == "violated":
            promise["detail"] = _PROSE + "\n\n" + _EXAMPLE
        if promise["outcome"] == "pending":
            promise["nodeid"] = "no_class_in_this_nodeid.py"
        if promise["id"] == "action_executor.p0":
            promise["nodeid"] = None  # a report written without it
    kept = implementation(
        "tests/test_store.py::MyStore",
        "run_store",
        {"run_store.survives_power_loss": "unverifiable", "run_store.is_durable": "unverifiable"},
    )
    kept["source"] = "tests/test_store.py:12"
    kept["promises"][1]["kept_by"] = "docs/explanation/crash-safety.md"
    shared = implementation(
        "OtherStore",
        "run_store",
        {"run_store.survives_power_loss": "unverifiable", "run_store.p1": "held"},
    )
    none_held = implementation("EmptySink", "event_sink", {"event_sink.a": "waived"})
    data["implementations"] = [first, second, third, kept, shared, none_held]
    data["left_out"] = [
        {
            "implementation": "PostgresStore",
            "seam": "run_store",
            "extra": "postgres",
            "hint": "the `postgres` extra (in a polyloop checkout: pip install -e '.[postgres]') "
            "and the PostgreSQL binaries (apt-get install -y postgresql)",
            "ids": ["tests/contract/test_postgres_store_contract.py::TestPostgresStoreContract"],
        },
        {"implementation": _HOSTILE_TEXT, "seam": None, "extra": None, "hint": _HOSTILE_TEXT},
    ]
    return data


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("POLYLOOP_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"rendering differs from golden/{name}"


@pytest.mark.parametrize("columns", [None, 5, 40, 72, 200])
def test_terminal_text_line_by_line(columns: int | None) -> None:
    _check(f"report-{columns or 'unwrapped'}.txt", render_text(_rendering_report(), columns))


@pytest.mark.parametrize("columns", [None, 72])
def test_the_brief_terminal_text_line_by_line(columns: int | None) -> None:
    """Without -v: the verdict, a line per implementation, the left-out ones, what to look at
    and what to do next; each unverifiable promise is counted, not explained."""
    text = render_text(_rendering_report(), columns, verbose=False)
    _check(f"report-brief-{columns or 'unwrapped'}.txt", text)
    assert "verify it yourself:" not in text
    assert "why:" not in text
    assert "rerun with -v (or --polyloop-verbose)" in text


def test_markdown_line_by_line() -> None:
    _check("report.md", render_markdown(_rendering_report()))


def test_rendering_reads_the_report_and_never_changes_it() -> None:
    data = _rendering_report()
    before = copy.deepcopy(data)
    render_text(data, 50)
    render_markdown(data)
    assert data == before


@pytest.mark.parametrize(
    ("verdict", "first_line"),
    [
        ("conformant", "verdict: conformant"),
        ("violations", "verdict: VIOLATIONS"),
        ("no_implementations", "verdict: NO IMPLEMENTATIONS FOUND"),
        ("setup_error", "verdict: SETUP ERROR (an implementation could not be built: its "),
        ("incomplete", "verdict: INCOMPLETE (promises missing, none held, overridden without"),
        ("made_up", "verdict: made_up"),
    ],
)
def test_each_verdict_has_its_own_first_line(verdict: str, first_line: str) -> None:
    data = report(implementation("Impl", "model_client", {"model_client.a": "held"}))
    data["verdict"] = verdict
    assert render_text(data).splitlines()[0].startswith(first_line)
    assert f"**Verdict: {first_line.removeprefix('verdict: ')}" in render_markdown(data)


def test_only_an_interrupted_session_says_so() -> None:
    data = report(implementation("Impl", "model_client", {"model_client.a": "held"}))
    assert "interrupted" not in render_text(data)
    assert "interrupted" not in render_markdown(data).split("\n\n")[1]
    data["interrupted"] = True
    assert render_text(data).splitlines()[1].startswith("interrupted: the session stopped")
    assert " — interrupted: the session stopped" in render_markdown(data)


def test_a_conformant_report_lists_nothing_to_look_at() -> None:
    data = report(implementation("Impl", "model_client", {"model_client.a": "held"}))
    lines = render_text(data).splitlines()
    assert lines[2:] == [
        "Impl  model_client  1/1  held 1  conftest.py:1",
        "",
        "next: nothing: every promise that can be checked here held",
    ]
    summary = render_markdown(data).split("### promise × implementation matrix")[0]
    assert "\n### " not in summary


def _whole(line: str) -> bool:
    """A rerun command, a falsifying example or a left-out implementation's install hint: left
    whole so it can be copied (and found by grep)."""
    return (
        "rerun: pytest" in line
        or "Falsifying example" in line
        or "action=Action(" in line
        or "is not judged in this conformance run" in line
    )


@pytest.mark.parametrize("columns", [40, 72])
def test_wrapped_text_fits_the_terminal_even_with_a_very_long_implementation_id(
    columns: int,
) -> None:
    # The report has a 115-character implementation id. Continuation lines (not run, setup
    # error, teardown error, "no promise held") used to be indented by the longest id, so
    # with 40 columns they were 130 characters wide, wrapped or not.
    lines = render_text(_rendering_report(), columns).splitlines()
    for line in lines:
        if _whole(line) or len(line.split()) == 1:
            continue  # kept whole, or one word that cannot be broken
        indent = len(line) - len(line.lstrip(" "))
        assert len(line) <= max(columns, indent + 20), line
        assert indent <= 40, line  # seam column (at most 32) + 2, "at" line + 2, wrapped + 4
    assert any(_whole(line) and len(line) > columns for line in lines)


def test_a_line_that_fits_is_not_wrapped_and_prose_breaks_between_words() -> None:
    data = _rendering_report()
    unwrapped = render_text(data).splitlines()
    wide = render_text(data, 10_000).splitlines()
    assert wide == unwrapped
    narrow = render_text(data, 40)
    # Every word survives wrapping, in order.
    assert narrow.split() == render_text(data).split()


def _small(**fields: Any) -> dict[str, Any]:
    item = implementation("Impl", "model_client", {"model_client.a": "held"})
    item.update(fields)
    return report(item, verdict="conformant")


def test_a_conformant_report_in_full() -> None:
    _check("conformant.txt", render_text(_small(), 80))
    _check("conformant.md", render_markdown(_small()))


def test_a_report_with_no_implementations_key_renders() -> None:
    data = {"verdict": "no_implementations"}
    assert (
        render_text(data)
        == "verdict: NO IMPLEMENTATIONS FOUND\nkit None  suite None  pytest None  python None\n"
    )
    markdown = render_markdown(data)
    assert markdown.startswith("## polyloop conformance\n\n**Verdict: NO IMPLEMENTATIONS FOUND**")
    assert "\n| implementation | seam | promises |" in markdown


def test_counts_an_older_report_leaves_out_read_as_zero() -> None:
    data = _small(counts={"held": 1})
    assert render_text(data).splitlines()[2] == "Impl  model_client  1/1  held 1  conftest.py:1"
    row = next(line for line in render_markdown(data).splitlines() if line.startswith("| `Impl`"))
    assert row == "| `Impl` | model_client | 1/1 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |"


@pytest.mark.parametrize("source", [None, ""])
def test_no_source_is_no_trailing_text(source: str | None) -> None:
    data = _small(source=source)
    assert render_text(data).splitlines()[2] == "Impl  model_client  1/1  held 1"
    del data["implementations"][0]["source"]
    assert render_text(data).splitlines()[2] == "Impl  model_client  1/1  held 1"


@pytest.mark.parametrize(
    ("impl_id", "source", "shown"),
    [
        ("C:/proj/t.py::MyStore", "C:/proj/t.py:12", False),  # a class: its id says where
        ("C:/proj/t.py::MyStore", "C:/other.py:12", True),
        ("my_store", "C:/proj/conftest.py:7", True),
        ("conftest.py::x", "conftest.py:1", False),
    ],
)
def test_the_source_is_shown_unless_the_id_already_says_it(
    impl_id: str, source: str, shown: bool
) -> None:
    data = _small(id=impl_id, source=source)
    line = render_text(data).splitlines()[2]
    assert line.endswith(f"held 1  {source}") is shown
    assert line.endswith("held 1") is not shown


@pytest.mark.parametrize("only", ["waived", "unverifiable", "pending", "overridden"])
def test_a_later_group_is_listed_when_the_earlier_ones_are_empty(only: str) -> None:
    data = report(implementation("Impl", "run_store", {"run_store.a": only, "run_store.b": "held"}))
    heading = {
        "waived": "waived",
        "unverifiable": "unverifiable here (verify it yourself)",
        "pending": "pending (violated, but not yet held in the baseline)",
        "overridden": "overridden (not checked as written)",
    }[only]
    assert f"\n{heading}:\n  " in render_text(data)
    assert f"\n### {heading}\n\n- " in render_markdown(data)


def test_a_line_exactly_as_wide_as_the_terminal_is_left_as_it_is() -> None:
    data = _small(teardown_errors=["teardown failed  "])  # two trailing spaces
    line = next(line for line in render_text(data).splitlines() if "teardown" in line)
    assert line.endswith("failed  ")
    assert line in render_text(data, len(line)).splitlines()
    narrower = render_text(data, len(line) - 1).splitlines()
    assert line not in narrower
    assert line.rstrip() in narrower


def test_a_blank_line_wider_than_the_terminal_is_kept() -> None:
    data = _small(teardown_errors=[" " * 60])
    assert any(line and set(line) == {" "} for line in render_text(data, 30).splitlines())


def test_whitespace_inside_prose_is_kept_when_wrapped() -> None:
    data = _small(teardown_errors=["a\x0bvertical tab and a\x0cform feed " * 4])
    wrapped = render_text(data, 40)
    assert "a\x0bvertical" in wrapped
    assert "a\x0cform" in wrapped


def test_a_hyphenated_word_is_not_split() -> None:
    data = _small(teardown_errors=["see tests/unit/test_report-rendering-with-hyphens.py " * 3])
    for line in render_text(data, 30).splitlines():
        assert not line.endswith("-"), line


@pytest.mark.parametrize(
    ("outcomes", "verdict", "verbose", "next_line"),
    [
        ({"model_client.a": "violated"}, "violations", False, "next: fix each violated promise"),
        ({"model_client.a": "waived"}, "incomplete", False, "next: make every implementation"),
        (
            {"model_client.a": "held", "model_client.b": "unverifiable"},
            "conformant",
            False,
            "next: verify the unverifiable promises yourself (how: -v)",
        ),
        (
            {"model_client.a": "held", "model_client.b": "unverifiable"},
            "conformant",
            True,
            "next: verify the unverifiable promises yourself (above)",
        ),
    ],
)
def test_the_last_line_says_what_to_do_next(
    outcomes: dict[str, str], verdict: str, verbose: bool, next_line: str
) -> None:
    data = report(implementation("Impl", "model_client", outcomes), verdict=verdict)
    last = render_text(data, verbose=verbose).splitlines()[-1]
    assert last.startswith(next_line), last
    assert render_markdown(data).count("**Next:**") == 1

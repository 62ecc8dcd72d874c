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


def _rendering_report() -> dict[str, Any]:
    data = every_outcome_report()
    data["interrupted"] = True
    first, second, third = data["implementations"]
    first["teardown_errors"] = ["teardown of impl failed: OSError: disk gone"]
    promises = {p["id"]: p for p in first["promises"]}
    promises["action_executor.p3"]["reruns"] = 1
    promises["action_executor.p4"]["reruns"] = 2
    for promise in second["promises"]:
        if promise["outcome"] == "violated":
            promise["detail"] = "the observation was cut\n\n" + _EXAMPLE
        if promise["outcome"] == "pending":
            promise["nodeid"] = "no_class_in_this_nodeid.py"
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
    return data


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("POLYLOOP_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"rendering differs from golden/{name}"


@pytest.mark.parametrize("columns", [None, 40, 72, 200])
def test_terminal_text_line_by_line(columns: int | None) -> None:
    _check(f"report-{columns or 'unwrapped'}.txt", render_text(_rendering_report(), columns))


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
    assert lines[2:] == ["Impl  model_client  1/1  held 1  conftest.py:1"]
    summary = render_markdown(data).split("### promise × implementation matrix")[0]
    assert "\n### " not in summary


def _whole(line: str) -> bool:
    """A rerun command or a falsifying example: left whole so it can be copied."""
    return "rerun: pytest" in line or "Falsifying example" in line or "action=Action(" in line


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

"""Issue 37 §5: a promise violated as a knock-on of another ("same cause as <id>: …", "this is
not a failure to recover: …") is counted once, under its cause, in the counts, the matrix and
the badge; its cell says which promise it follows. Older reports, without ``follows``, load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

from polyloop.report import (
    badge,
    load_report,
    merge_reports,
    render_html,
    render_matrix_markdown,
    render_text,
    schema,
)
from pytest_polyloop._outcomes import PhaseResult
from pytest_polyloop._report import build_implementation
from tests.plugin._sandbox import Project
from tests.unit._reports import SUITE, report

SEAM = "decision_parser"
CAUSE = "decision_parser.never_raises"
KNOCK = "decision_parser.is_deterministic"
ALONE = "decision_parser.action_is_serialisable"
HELD = "decision_parser.returns_one_of_three_branches"
PROMISES = (ALONE, KNOCK, CAUSE, HELD)


def _ran(failure: str | None) -> list[PhaseResult]:
    if failure is None:
        call = PhaseResult(when="call", outcome="passed", duration=0.1)
    else:
        call = PhaseResult(when="call", outcome="failed", duration=0.1, crash=failure)
    return [
        PhaseResult(when="setup", outcome="passed", duration=0.1),
        call,
        PhaseResult(when="teardown", outcome="passed", duration=0.1),
    ]


def _implementation(failures: Mapping[str, str | None]) -> dict[str, Any]:
    entry = {
        "id": "parser",
        "seam": SEAM,
        "fixture": "parser",
        "source": "conftest.py:1",
        "suite_hash": SUITE,
        "catalogue": [{"id": p, "doc": f"{p} holds.", "kind": "promise"} for p in PROMISES],
        "waive": {},
        "overridden": [],
        "items": {f"t.py::test_{p}": p for p in PROMISES},
    }
    results = {f"t.py::test_{p}": _ran(failures.get(p)) for p in PROMISES}
    return build_implementation(entry, results, None, lambda text: None)


_FAILURES = {
    CAUSE: "Failed: parse() raised SystemExit: 2 on ModelReply(text='ACT ls')",
    KNOCK: f"Failed: same cause as {CAUSE}: parse() raised SystemExit: 2 on ModelReply(…)",
    # A pointer to a promise that held is no knock-on: a cause of its own, never hidden.
    ALONE: f"Failed: same cause as {HELD}: the decision is not JSON",
}


def test_a_knock_on_counts_once_under_its_cause_and_says_which_promise_it_follows() -> None:
    item = _implementation(_FAILURES)
    by_id = {promise["id"]: promise for promise in item["promises"]}
    assert by_id[KNOCK]["outcome"] == "violated"  # never a false green
    assert by_id[KNOCK]["follows"] == CAUSE
    assert "follows" not in by_id[CAUSE]
    assert "follows" not in by_id[ALONE]
    assert item["counts"]["violated"] == 2  # never_raises and action_is_serialisable
    assert item["counts"]["follows"] == 1
    assert item["counts"]["held"] == 1


def test_the_report_with_a_knock_on_is_valid_and_shows_it_everywhere() -> None:
    item = _implementation(_FAILURES)
    whole = report(item)
    jsonschema.validate(whole, schema())
    text = render_text(whole)
    assert "violated 2 (+1 following them)" in text
    assert f"follows: {CAUSE} (the same cause, counted once there" in text
    markdown = render_matrix_markdown(whole)
    assert f"follows: {CAUSE.replace('_', chr(92) + '_')}" in markdown.replace("\\.", ".")
    assert "✗↳" in markdown
    assert f"(follows {CAUSE})" in render_html(whole)
    assert badge(whole)["message"] == "violations in 1/1 implementations"


def test_a_merge_keeps_one_cause_counted_once() -> None:
    first = report(_implementation(_FAILURES), report_id="a")
    second = report(_implementation(_FAILURES), report_id="b")
    merged = merge_reports([first, second])
    (item,) = merged["implementations"]
    assert item["counts"]["violated"] == 2
    assert item["counts"]["follows"] == 1
    assert {p["id"]: p.get("follows") for p in item["promises"]}[KNOCK] == CAUSE


def test_an_older_report_without_follows_still_loads(tmp_path: Any) -> None:
    import json

    item = _implementation({CAUSE: _FAILURES[CAUSE]})
    assert "follows" not in item["counts"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(report(item)))
    assert load_report(path)["implementations"][0]["counts"]["violated"] == 1


_PARSER = """\
from tests.kit import broken, broken_parsers


@pytest.fixture
def parser_samples():
    return broken.PARSER_SAMPLES


@pytest_polyloop.seam("decision_parser", samples="parser_samples")
@pytest.fixture
def argparse_parser():
    return broken_parsers.ReadsOptionsWithArgparse()
"""


def test_a_real_run_counts_a_parser_that_exits_once(project: Project) -> None:
    # One input makes parse() raise SystemExit: never_raises names it, three other promises
    # point at it ("same cause as decision_parser.never_raises: …").
    project.conftest("tests", _PARSER)
    # argparse is also quadratic in the words of a long reply: parse_time_is_linear is a
    # cause of its own, left out here.
    run = project.run("-k", "not across_processes and not parse_time_is_linear")
    counts = run.counts("argparse_parser")
    assert counts["violated"] == 1, counts
    assert counts["follows"] == 3, counts
    for name in ("returns_one_of_three_branches", "is_deterministic", "action_is_serialisable"):
        promise = run.promise("argparse_parser", f"decision_parser.{name}")
        assert promise["outcome"] == "violated"
        assert promise["follows"] == CAUSE
    assert "violated 1 (+3 following it)" in run.output

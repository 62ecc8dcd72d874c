"""``diff_reports`` at its edges: an implementation lost or added before others in sort order, a
promise the suite had but did not run, reports without implementations. Each survived mutation
testing before it had its own test (docs/explanation/mutation-testing.md)."""

from __future__ import annotations

from polyloop.report import ReportDiff, diff_reports, render_diff
from polyloop.report._diff import NOT_RUN
from tests.unit.test_report_diff import implementation, report


def test_a_lost_implementation_sorted_first_hides_no_regression_of_the_others() -> None:
    # "a" is lost and sorts before "b": the walk over the keys must go on past a's promises.
    old = report(implementation("a", {"a.one": "held"}), implementation("b", {"a.one": "held"}))
    new = report(implementation("b", {"a.one": "violated"}))
    diff = diff_reports(old, new)
    assert diff.lost == ["a"]
    assert diff.regressed == [(("b", "a.one"), "held", "violated")]
    assert diff.has_regression


def test_an_added_implementation_sorted_first_hides_no_recovery_of_the_others() -> None:
    old = report(implementation("b", {"a.one": "violated"}))
    new = report(implementation("a", {"a.one": "held"}), implementation("b", {"a.one": "held"}))
    diff = diff_reports(old, new)
    assert diff.added == ["a"]
    assert diff.recovered == [(("b", "a.one"), "violated", "held")]


def test_a_promise_not_run_before_and_held_now_is_recovered_from_not_run() -> None:
    old = report(implementation("x", {"a.one": "held"}, missing=("a.two",)))
    new = report(implementation("x", {"a.one": "held", "a.two": "held"}))
    diff = diff_reports(old, new)
    assert diff.recovered == [(("x", "a.two"), NOT_RUN, "held")]
    assert diff.appeared == []
    assert "x  a.two  not run → held" in render_diff(diff, old, new)


def test_a_promise_not_run_before_and_violated_now_is_changed_not_new() -> None:
    old = report(implementation("x", {"a.one": "held"}, missing=("a.two",)))
    new = report(implementation("x", {"a.one": "held", "a.two": "violated"}))
    diff = diff_reports(old, new)
    assert diff.changed == [(("x", "a.two"), NOT_RUN, "violated")]
    assert diff.appeared == []
    assert diff.regressed == []


def test_reports_without_implementations_differ_in_nothing() -> None:
    assert diff_reports({}, {}) == ReportDiff()
    assert diff_reports({"implementations": []}, {}) == ReportDiff()
    new = report(implementation("x", {"a.one": "held"}))
    assert diff_reports({}, new) == ReportDiff(added=["x"])
    assert diff_reports(new, {}) == ReportDiff(lost=["x"])


def test_the_diff_text_names_a_changed_suite_and_counts_every_regression() -> None:
    old = report(implementation("a", {"a.one": "held"}), implementation("b", {"a.one": "held"}))
    new = {
        **report(implementation("b", {"a.one": "violated"}, reasons={"a.one": "ticket 9"})),
        "suite_hash": "s2",
    }
    text = render_diff(diff_reports(old, new), old, new)
    assert "suite: s → s2\n" in text
    # A reason is shown beside a deliberate move only: a violation under a waiver shows none.
    assert "  b  a.one  held → violated\n" in text
    assert "ticket 9" not in text
    assert text.endswith("\n2 regressions\n")


def test_the_diff_text_of_two_reports_without_implementations() -> None:
    text = render_diff(ReportDiff(), {}, {})
    assert text.startswith("verdict: None → None\n")
    assert text.endswith("\nno regression\n")

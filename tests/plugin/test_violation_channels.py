"""The violation's text and its search, from plain data: what a failure inside an exception
group says (``group_violation``), how a phase's recorded violation and search reach the
judgement (``phase_result``, ``classify``) and the report's entry (``_promise_entry``).

In-process and exact, so that the CI mutation slice judges these functions by them."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_polyloop._outcomes import (
    PROPERTY_SEARCH,
    PROPERTY_VIOLATION,
    Judgement,
    PhaseResult,
    _violation_detail,
    classify,
    group_violation,
    phase_result,
)
from pytest_polyloop._report import _promise_entry


class _Flaky(ExceptionGroup):  # stands in for Hypothesis's FlakyFailure
    pass


def _flaky(leaf: Exception, said: str, *notes: str) -> _Flaky:
    group = _Flaky(said, [leaf])
    for note in notes:
        group.add_note(note)
    return group


def test_a_plain_exception_is_no_group_violation() -> None:
    assert group_violation(AssertionError("x")) is None


def test_the_first_leaf_its_example_and_what_the_group_said() -> None:
    leaf = AssertionError("the kit's own message\nsecond line")
    leaf.add_note("Falsifying example: test_x(\n    store=1,\n)")
    group = _flaky(
        leaf,
        "Hypothesis test_x(store=1) produces unreliable results: Falsified on the first call",
    )
    assert group_violation(group) == (
        "AssertionError: the kit's own message\nsecond line\n"
        "Falsifying example: test_x(\n    store=1,\n)\n"
        "(Hypothesis, _Flaky: the test produces unreliable results: Falsified on the first call "
        "(1 sub-exception))"
    )


def test_a_nested_group_is_read_by_its_first_leaf_and_notes_of_both_once() -> None:
    inner = ValueError("inner cause")
    inner.add_note("Failing test case: a=2")
    nested = ExceptionGroup("several", [ExceptionGroup("inside", [inner]), KeyError("k")])
    nested.add_note("Failing test case: a=2")  # the same example on the group: shown once
    nested.add_note("an unrelated note")
    assert group_violation(nested) == (
        "ValueError: inner cause\nFailing test case: a=2\n"
        "(Hypothesis, ExceptionGroup: the test several (2 sub-exceptions))"
    )


def test_a_wrapper_without_text_is_read_by_its_cause() -> None:
    cause = AssertionError("the real failure")
    wrapper = RuntimeError()
    wrapper.__cause__ = cause
    group = _flaky(wrapper, "")
    assert group_violation(group) == (
        "AssertionError: the real failure\n(Hypothesis, _Flaky: the test  (1 sub-exception))"
    )


def test_a_wrapper_with_text_is_read_itself() -> None:
    wrapper = RuntimeError("its own words")
    wrapper.__cause__ = AssertionError("not this")
    text = group_violation(_flaky(wrapper, "x"))
    assert text is not None
    assert text.startswith("RuntimeError: its own words\n")


def test_what_the_group_said_is_its_first_line_and_at_most_160_characters() -> None:
    said = "y" * 200 + "\nsecond line"
    text = group_violation(_flaky(AssertionError("m"), said))
    assert text == f"AssertionError: m\n(Hypothesis, _Flaky: the test {'y' * 160})"


def test_a_long_message_is_kept_whole_up_to_sixteen_thousand_characters() -> None:
    whole = group_violation(_flaky(AssertionError("a" * 16_000), "s"))
    assert whole is not None
    assert whole.startswith("AssertionError: " + "a" * 15_984 + "… [16 more characters]\n")
    example = "Falsifying example: " + "e" * 5_000
    leaf = AssertionError("m")
    leaf.add_note(example)
    shown = group_violation(_flaky(leaf, "s"))
    assert shown == (
        f"AssertionError: m\n{example[:4000]}\n(Hypothesis, _Flaky: the test s (1 sub-exception))"
    )


def test_an_example_note_may_be_indented_and_other_notes_are_left_out() -> None:
    leaf = AssertionError("m")
    leaf.add_note("  Falsifying explicit example: test_x(a=1)")
    leaf.add_note("Explanation: not an example")
    assert group_violation(_flaky(leaf, "s")) == (
        "AssertionError: m\n  Falsifying explicit example: test_x(a=1)\n"
        "(Hypothesis, _Flaky: the test s (1 sub-exception))"
    )


def _report(when: str, outcome: str, **properties: Any) -> Any:
    return SimpleNamespace(
        when=when,
        outcome=outcome,
        duration=0.5,
        longrepr=None,
        longreprtext="E   the text pytest kept",
        user_properties=[(name, json.dumps(value)) for name, value in properties.items()],
    )


def test_a_recorded_violation_and_search_travel_on_the_phase() -> None:
    search = {"search": "wide", "examples": ".polyloop/examples"}
    got = phase_result(
        _report(
            "call",
            "failed",
            **{PROPERTY_VIOLATION: "the whole violation", PROPERTY_SEARCH: search},
        )
    )
    assert got.violation == "the whole violation"
    assert got.search == search
    assert got.text == "E   the text pytest kept"
    plain = phase_result(_report("call", "failed"))
    assert plain.violation is None
    assert plain.search is None
    ignored = _report("call", "failed")
    ignored.user_properties = [(PROPERTY_VIOLATION, 3), (PROPERTY_SEARCH, None)]
    assert phase_result(ignored).violation is None
    assert phase_result(ignored).search is None


def _phase(when: str, outcome: str, **fields: Any) -> PhaseResult:
    return PhaseResult(when=when, outcome=outcome, duration=0.25, **fields)


@pytest.mark.parametrize(
    ("when", "detail"),
    [("call", "the whole violation"), ("setup", "error in setup:\nthe whole violation")],
)
def test_the_recorded_violation_is_the_detail_whole(when: str, detail: str) -> None:
    failed = _phase(when, "failed", text="E   cut", crash="cut", violation="the whole violation")
    assert _violation_detail(failed) == detail
    plain = _phase(when, "failed", text="E   cut", crash="cut")
    assert _violation_detail(plain) == ("cut" if when == "call" else "error in setup:\ncut")


def test_a_failed_call_with_a_recorded_violation_is_violated_with_it() -> None:
    judged = classify(
        [
            _phase("setup", "passed"),
            _phase("call", "failed", text="E   cut", crash="cut", violation="whole"),
            _phase("teardown", "passed"),
        ]
    )
    assert judged is not None
    assert (judged.outcome, judged.detail) == ("violated", "whole")


def test_a_violation_carries_the_search_that_found_it() -> None:
    search = {"search": "seeded"}
    judged = classify(
        [
            _phase("setup", "passed"),
            _phase("call", "failed", text="E   boom", crash="boom", search=search),
            _phase("teardown", "passed"),
        ]
    )
    assert judged is not None
    assert judged.outcome == "violated"
    assert judged.search == search
    assert judged.detail == "boom"
    held = classify(
        [
            _phase("setup", "passed"),
            _phase("call", "passed", search=search),
            _phase("teardown", "passed"),
        ]
    )
    assert held is not None
    assert held.search is None


def _entry(judgement: Judgement) -> dict[str, Any]:
    return _promise_entry("s.p", "t.py::T::test_p", judgement, "The promise.", None, ("s", "i"))


def test_the_report_says_which_search_found_a_violation_and_how_to_replay_it() -> None:
    search = {"search": "wide", "examples": "/tmp/ex"}
    entry = _entry(Judgement(outcome="violated", duration_s=1.0, detail="boom", search=search))
    assert entry["search"] == "wide"
    assert entry["detail"] == (
        "boom\n(found by the wide search (--polyloop-search=wide) and saved in /tmp/ex: every "
        "run that can read that directory replays it first, the default one too)"
    )
    bare = _entry(Judgement(outcome="violated", duration_s=1.0, search={"search": "?"}))
    assert bare["detail"] == "(found by a search)"
    assert bare["search"] == "?"
    replayed = _entry(Judgement(outcome="violated", duration_s=1.0, search={"search": "replayed"}))
    assert replayed["detail"] == (
        "(replayed from the examples directory, where a wide search saved it: every run replays "
        "it until it holds (delete the directory to forget it))"
    )


def test_a_held_promise_names_no_search() -> None:
    entry = _entry(Judgement(outcome="held", duration_s=1.0, search={"search": "seeded"}))
    assert "search" not in entry
    assert entry["detail"] is None


def test_an_example_noted_on_the_group_alone_is_shown() -> None:
    group = _flaky(AssertionError("m"), "s", "Falsifying example: test_x(a=1)")
    assert group_violation(group) == (
        "AssertionError: m\nFalsifying example: test_x(a=1)\n"
        "(Hypothesis, _Flaky: the test s (1 sub-exception))"
    )


def test_the_sentence_is_what_follows_the_last_produces() -> None:
    said = "Hypothesis test_x(a='it produces x') produces unreliable results: flaky"
    text = group_violation(_flaky(AssertionError("m"), said))
    assert text == (
        "AssertionError: m\n(Hypothesis, _Flaky: the test produces unreliable results: flaky "
        "(1 sub-exception))"
    )


def test_a_group_whose_message_starts_with_a_new_line_says_its_first_line() -> None:
    text = group_violation(_flaky(AssertionError("m"), "\nsecond"))
    assert text == "AssertionError: m\n(Hypothesis, _Flaky)"


def test_a_pending_violation_names_its_search_too() -> None:
    from pytest_polyloop._report import Baseline

    baseline = Baseline(outcomes={("i", "s.p"): "pending"}, catalogue=frozenset({("s", "s.p")}))
    judgement = Judgement(
        outcome="violated", duration_s=1.0, detail="boom", search={"search": "seeded"}
    )
    entry = _promise_entry("s.p", "t.py::T::test_p", judgement, "P.", baseline, ("s", "i"))
    assert entry["outcome"] == "pending"
    assert entry["search"] == "seeded"
    assert entry["detail"].endswith(
        "(found by the default seeded search: the same examples are drawn on every run of this "
        "code, so rerunning the same command replays it)"
    )

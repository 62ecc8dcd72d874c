"""Outcome classification from plain phase data (what arrives from a serial run or a worker)."""

from __future__ import annotations

from pytest_polyloop._outcomes import PhaseResult, classify, teardown_failure


def phase(when: str, outcome: str, **fields: object) -> PhaseResult:
    return PhaseResult(when=when, outcome=outcome, duration=0.25, **fields)  # type: ignore[arg-type]


PASSED_SETUP = phase("setup", "passed")
PASSED_TEARDOWN = phase("teardown", "passed")


def test_a_strict_xpass_shipped_by_an_xdist_worker_is_a_stale_waiver() -> None:
    text = "[gw1] linux -- Python 3.11.7 /usr/bin/python\n[XPASS(strict)] waived: old bug"
    call = phase("call", "failed", text=text)
    judgement = classify([PASSED_SETUP, call, PASSED_TEARDOWN])
    assert judgement is not None
    assert judgement.outcome == "stale_waiver"
    assert judgement.waiver_reason == "old bug"
    assert judgement.duration_s == 0.75


def test_an_error_in_setup_is_a_setup_error_not_a_violation() -> None:
    setup = phase("setup", "failed", text="E   RuntimeError: no db", crash="RuntimeError: no db")
    judgement = classify([setup, PASSED_TEARDOWN])
    assert judgement is not None
    assert judgement.outcome == "setup_error"
    assert judgement.setup_error == {"type": "RuntimeError", "message": "no db", "location": ""}


def test_a_worker_that_died_before_setup_was_reported_is_a_setup_error() -> None:
    crash = phase("???", "failed", text="worker 'gw0' crashed while running 'x.py::T::test_a'")
    judgement = classify([crash])
    assert judgement is not None
    assert judgement.outcome == "setup_error"
    assert judgement.setup_error is not None
    assert judgement.setup_error["type"] == "WorkerCrashed"


def test_a_worker_that_died_after_setup_is_a_violation() -> None:
    crash = phase("???", "failed", text="worker 'gw0' crashed while running 'x.py::T::test_a'")
    judgement = classify([PASSED_SETUP, crash])
    assert judgement is not None
    assert judgement.outcome == "violated"


def test_a_failing_teardown_after_a_pass_is_held_and_blamed_on_the_fixture() -> None:
    teardown = phase("teardown", "failed", text="E   OSError: leak", crash="OSError: leak")
    phases = [PASSED_SETUP, phase("call", "passed"), teardown]
    judgement = classify(phases)
    assert judgement is not None
    assert judgement.outcome == "held"
    assert teardown_failure(phases) == "teardown failed: OSError: leak"


def test_a_failing_teardown_after_an_unverifiable_skip_stays_unverifiable() -> None:
    parts = {"outcome": "unverifiable", "promise": "p", "why": "w", "verify_yourself": "v"}
    call = phase("call", "skipped", skip_reason="Skipped: p", contract_skip=parts)
    teardown = phase("teardown", "failed", text="E   RuntimeError: cancel scope")
    judgement = classify([PASSED_SETUP, call, teardown])
    assert judgement is not None
    assert judgement.outcome == "unverifiable"


def test_a_teardown_that_passed_is_no_teardown_failure() -> None:
    assert teardown_failure([PASSED_SETUP, phase("call", "failed"), PASSED_TEARDOWN]) is None


def test_a_test_whose_worker_died_is_violated_saying_so() -> None:
    crash = phase("???", "failed", text="worker 'gw0' crashed while running 't.py::T::test_x'")
    judgement = classify([PASSED_SETUP, crash])
    assert judgement is not None
    assert judgement.outcome == "violated"
    assert judgement.detail == (
        "the worker running this test died: worker 'gw0' crashed while running 't.py::T::test_x'"
    )


def test_a_test_that_never_finished_has_no_outcome() -> None:
    assert classify([PASSED_SETUP]) is None
    assert classify([PASSED_SETUP, phase("call", "passed")]) is None


def test_a_plain_skip_is_not_applicable_without_a_verify_yourself() -> None:
    call = phase("call", "skipped", skip_reason="Skipped: needs a GPU")
    judgement = classify([PASSED_SETUP, call, PASSED_TEARDOWN])
    assert judgement is not None
    assert (judgement.outcome, judgement.why, judgement.verify_yourself) == (
        "not_applicable",
        "needs a GPU",
        None,
    )


def test_a_non_strict_xpass_is_a_stale_waiver_too() -> None:
    call = phase("call", "passed", wasxfail="waived: flaky")
    judgement = classify([PASSED_SETUP, call, PASSED_TEARDOWN])
    assert judgement is not None
    assert judgement.outcome == "stale_waiver"
    assert judgement.waiver_reason == "flaky"


def test_the_skip_text_is_parsed_when_no_structured_parts_travelled() -> None:
    parts = {"outcome": "unverifiable", "promise": "p", "why": "w", "verify_yourself": "v"}
    call = phase("call", "skipped", skip_reason="Skipped: p — …")
    judgement = classify(
        [call, PASSED_TEARDOWN],
        parse_skip=lambda text: parts if text.startswith("Skipped: p") else None,
    )
    assert judgement is not None
    assert (judgement.outcome, judgement.promise, judgement.verify_yourself) == (
        "unverifiable",
        "p",
        "v",
    )


def test_a_promise_that_never_reported_has_no_outcome() -> None:
    assert classify([]) is None


# --------------------------------------------------------------------------- precedence


def test_a_failure_of_an_overridden_test_is_violated_not_overridden() -> None:
    call = phase("call", "failed", text="E   AssertionError: no", crash="AssertionError: no")
    judgement = classify([PASSED_SETUP, call, PASSED_TEARDOWN], overridden=True)
    assert judgement is not None
    assert (judgement.outcome, judgement.detail) == ("violated", "AssertionError: no")


def test_a_failing_teardown_after_a_strict_xpass_is_still_stale() -> None:
    call = phase("call", "failed", text="[XPASS(strict)] waived: old bug")
    teardown = phase("teardown", "failed", text="E   OSError: leak", crash="OSError: leak")
    judgement = classify([PASSED_SETUP, call, teardown], waiver_reason="old bug")
    assert judgement is not None
    assert (judgement.outcome, judgement.waiver_reason) == ("stale_waiver", "old bug")


def test_an_overridden_test_under_a_waiver_that_passes_is_overridden_not_stale() -> None:
    call = phase("call", "passed", wasxfail="waived: flaky")
    judgement = classify(
        [PASSED_SETUP, call, PASSED_TEARDOWN], overridden=True, waiver_reason="flaky"
    )
    assert judgement is not None
    assert (judgement.outcome, judgement.waiver_reason) == ("overridden", "flaky")


def test_an_overridden_test_that_skips_is_overridden_not_not_applicable() -> None:
    call = phase("call", "skipped", skip_reason="Skipped: needs a GPU")
    judgement = classify([PASSED_SETUP, call, PASSED_TEARDOWN], overridden=True)
    assert judgement is not None
    assert judgement.outcome == "overridden"


def test_a_failure_under_a_waiver_is_waived_with_the_waivers_reason() -> None:
    call = phase("call", "skipped", wasxfail="waived: known bug")
    judgement = classify([PASSED_SETUP, call, PASSED_TEARDOWN])
    assert judgement is not None
    assert (judgement.outcome, judgement.waiver_reason) == ("waived", "known bug")


def test_a_structured_contract_skip_wins_over_parsing_the_skip_text() -> None:
    parts = {"outcome": "not_applicable", "why": "no tools"}
    call = phase("call", "skipped", skip_reason="Skipped: x", contract_skip=parts)
    judgement = classify(
        [call, PASSED_TEARDOWN], parse_skip=lambda text: {"outcome": "unverifiable"}
    )
    assert judgement is not None
    assert (judgement.outcome, judgement.why) == ("not_applicable", "no tools")


def test_only_the_first_skipped_phase_decides() -> None:
    setup = phase("setup", "skipped", skip_reason="Skipped: no db")
    teardown = phase("teardown", "skipped", wasxfail="waived: later")
    judgement = classify([setup, teardown])
    assert judgement is not None
    assert (judgement.outcome, judgement.why) == ("not_applicable", "no db")


def test_every_phase_passed_is_held() -> None:
    judgement = classify([PASSED_SETUP, phase("call", "passed"), PASSED_TEARDOWN])
    assert judgement is not None
    assert (judgement.outcome, judgement.detail, judgement.duration_s) == ("held", None, 0.75)


# -- pytest-rerunfailures: each run of a test is an attempt; a rerun phase is no result ------


def test_a_crash_rerun_that_never_reported_again_is_missing_not_held() -> None:
    crash = phase("???", "rerun", text="worker 'gw0' crashed while running 't.py::T::test_x'")
    assert classify([PASSED_SETUP, crash]) is None


def test_a_crash_rerun_that_held_on_its_second_run_is_held_after_one_rerun() -> None:
    crash = phase("???", "rerun", text="worker 'gw0' crashed while running 't.py::T::test_x'")
    second = [phase(when, "passed", attempt=1) for when in ("setup", "call", "teardown")]
    judgement = classify([PASSED_SETUP, crash, *second])
    assert judgement is not None
    assert (judgement.outcome, judgement.reruns) == ("held", 1)


def test_only_the_last_run_is_judged() -> None:
    first = [PASSED_SETUP, phase("call", "rerun", text="E   AssertionError"), PASSED_TEARDOWN]
    skipped = phase("call", "skipped", attempt=1, skip_reason="Skipped: gone")
    last = [phase("setup", "passed", attempt=1), skipped, phase("teardown", "passed", attempt=1)]
    judgement = classify([*first, *last])
    assert judgement is not None
    assert (judgement.outcome, judgement.reruns) == ("not_applicable", 1)


def test_a_test_run_once_counts_no_reruns() -> None:
    judgement = classify([PASSED_SETUP, phase("call", "passed"), PASSED_TEARDOWN])
    assert judgement is not None
    assert judgement.reruns == 0

"""What pytest's results carry into an outcome, each channel alone: the contract's skip parts,
the skip text, the setup error, Hypothesis's example in a violation, the waiver's reason, and a
failing teardown's text. Each of these survived mutation testing before it had its own test
(docs/explanation/mutation-testing.md): another channel always carried the same thing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pytest_polyloop._outcomes import (
    PROPERTY_SETUP_ERROR,
    PROPERTY_SKIP,
    PhaseResult,
    classify,
    phase_result,
    teardown_failure,
)


@dataclass
class FakeReport:
    """The attributes of a pytest ``TestReport`` that ``phase_result`` reads."""

    when: str
    outcome: str
    longrepr: Any = None
    user_properties: list[tuple[str, object]] = field(default_factory=list)
    duration: float = 0.5
    longreprtext: str = ""


def phase(when: str, outcome: str, **fields: object) -> PhaseResult:
    return PhaseResult(when=when, outcome=outcome, duration=0.25, **fields)  # type: ignore[arg-type]


SETUP = phase("setup", "passed")
TEARDOWN = phase("teardown", "passed")
UNVERIFIABLE = {
    "outcome": "unverifiable",
    "promise": "the store survives a crash",
    "why": "no crash sample",
    "verify_yourself": "give samples.crash",
}


# -- the two skip channels, each alone ------------------------------------------------------


def test_the_skip_text_reaches_the_phase_without_any_property() -> None:
    report = FakeReport("call", "skipped", longrepr=("t.py", 3, "Skipped: needs a GPU"))
    result = phase_result(report)
    assert (result.skip_reason, result.contract_skip) == ("Skipped: needs a GPU", None)
    judgement = classify([SETUP, result, TEARDOWN])
    assert judgement is not None
    assert (judgement.outcome, judgement.why) == ("not_applicable", "needs a GPU")


def test_the_contract_skip_reaches_the_phase_when_its_text_says_nothing() -> None:
    report = FakeReport(
        "call",
        "skipped",
        longrepr=("t.py", 3, "Skipped: unreadable"),
        user_properties=[("other", "x"), (PROPERTY_SKIP, json.dumps(UNVERIFIABLE))],
    )
    result = phase_result(report)
    assert result.contract_skip == UNVERIFIABLE
    assert result.setup_error is None
    judgement = classify([SETUP, result, TEARDOWN], parse_skip=lambda text: None)
    assert judgement is not None
    assert (judgement.outcome, judgement.promise, judgement.verify_yourself) == (
        "unverifiable",
        "the store survives a crash",
        "give samples.crash",
    )


def test_the_skip_text_alone_is_parsed_into_the_outcome() -> None:
    report = FakeReport("call", "skipped", longrepr=("t.py", 3, "Skipped: coded"))
    result = phase_result(report)
    judgement = classify(
        [SETUP, result, TEARDOWN],
        parse_skip=lambda text: UNVERIFIABLE if text == "Skipped: coded" else None,
    )
    assert judgement is not None
    assert (judgement.outcome, judgement.why, judgement.verify_yourself) == (
        "unverifiable",
        "no crash sample",
        "give samples.crash",
    )


def test_a_setup_error_property_is_the_setup_error_not_a_skip() -> None:
    error = {"type": "TypeError", "message": "bad samples", "location": "conftest.py:3"}
    report = FakeReport(
        "setup", "passed", user_properties=[(PROPERTY_SETUP_ERROR, json.dumps(error))]
    )
    result = phase_result(report)
    assert (result.setup_error, result.contract_skip) == (error, None)


def test_a_passed_or_failed_phase_has_no_skip_text() -> None:
    passed = phase_result(FakeReport("call", "passed", longrepr=("t.py", 3, "Skipped: no")))
    assert passed.skip_reason == ""
    failed = FakeReport("call", "failed", longrepr=("t.py", 3, "x"), longreprtext="E   boom")
    assert (phase_result(failed).skip_reason, phase_result(failed).text) == ("", "E   boom")


# -- a violation's detail keeps Hypothesis's example ------------------------------------------

LONG_FORM = """\
    def test_x(x):
>       assert x < 3
E       AssertionError: too big
E       assert 3 < 3
E       Falsifying example: test_x(
E           x=3,
E       )

t.py:5: AssertionError"""


def test_the_falsifying_example_is_added_to_a_violations_message() -> None:
    call = phase("call", "failed", text=LONG_FORM, crash="AssertionError: too big")
    judgement = classify([SETUP, call, TEARDOWN])
    assert judgement is not None
    assert judgement.detail == "AssertionError: too big\nFalsifying example: test_x(\n    x=3,\n)"


def test_an_example_already_in_the_message_is_not_added_twice() -> None:
    crash = "AssertionError: too big\nFalsifying example: test_x(x=3)"
    call = phase("call", "failed", text=LONG_FORM, crash=crash)
    judgement = classify([SETUP, call, TEARDOWN])
    assert judgement is not None
    assert judgement.detail == crash


def test_the_example_of_a_native_traceback_is_kept_too() -> None:
    text = "Traceback …\nAssertionError: too big\nFailing test case: test_x(\n    x=3,\n)\n"
    call = phase("call", "failed", text=text, crash="AssertionError: too big")
    judgement = classify([SETUP, call, TEARDOWN])
    assert judgement is not None
    assert judgement.detail == "AssertionError: too big\nFailing test case: test_x(\n    x=3,\n)"


# -- a violation keeps the waiver's reason ---------------------------------------------------


def test_a_violation_under_a_waiver_keeps_the_waivers_reason() -> None:
    call = phase("call", "failed", text="E   AssertionError: no", crash="AssertionError: no")
    judgement = classify([SETUP, call, TEARDOWN], waiver_reason="ticket 12")
    assert judgement is not None
    assert (judgement.outcome, judgement.waiver_reason) == ("violated", "ticket 12")


# -- a failing teardown says what failed, whatever pytest gave -------------------------------


def test_a_failing_teardown_without_a_crash_line_names_the_last_line_of_its_text() -> None:
    teardown = phase("teardown", "failed", text="Traceback …\nOSError: leak\n\n")
    assert teardown_failure([SETUP, teardown]) == "teardown failed: OSError: leak"


def test_a_failing_teardown_with_no_text_at_all_still_says_so() -> None:
    teardown = phase("teardown", "failed", text="  \n")
    assert teardown_failure([SETUP, teardown]) == "teardown failed: error in teardown"


# -- a stale waiver is not hidden by a skip in another phase ---------------------------------


def test_a_waived_promise_that_held_before_a_skipping_teardown_is_still_a_stale_waiver() -> None:
    # pytest.skip() in a fixture's cleanup reports the teardown as skipped: the promise held
    # under its waiver all the same, so the waiver must go (the stale check comes before skips).
    call = phase("call", "passed", wasxfail="waived: old bug")
    teardown = phase("teardown", "skipped", skip_reason="Skipped: cleanup skipped")
    judgement = classify([SETUP, call, teardown])
    assert judgement is not None
    assert (judgement.outcome, judgement.waiver_reason) == ("stale_waiver", "old bug")


def test_a_waiver_reason_that_quotes_the_xpass_marker_is_kept_whole() -> None:
    text = "[XPASS(strict)] waived: pytest prints [XPASS(strict)] for it"
    judgement = classify([SETUP, phase("call", "failed", text=text), TEARDOWN])
    assert judgement is not None
    assert (judgement.outcome, judgement.waiver_reason) == (
        "stale_waiver",
        "pytest prints [XPASS(strict)] for it",
    )


# -- the rest of what phase_result reads from a report ---------------------------------------


class BareReport:
    """A report with only the attributes every pytest version sets (no duration, no rerun)."""

    when = "call"
    outcome = "passed"
    longrepr = None
    user_properties: list[tuple[str, object]] = []  # noqa: RUF012 (read only)
    longreprtext = "not read: the phase passed"


class Crash:
    """A ``reprcrash`` without a message."""


class Longrepr:
    def __init__(self, reprcrash: object) -> None:
        self.reprcrash = reprcrash


def test_a_report_with_no_duration_rerun_or_crash_reads_as_zero_and_empty() -> None:
    result = phase_result(BareReport())
    assert (result.duration, result.attempt, result.crash, result.text) == (0.0, 0, "", "")


def test_the_duration_and_the_rerun_count_are_read_from_the_report() -> None:
    report = FakeReport("call", "passed", duration=0.125)
    report.rerun = 2  # type: ignore[attr-defined]
    result = phase_result(report)
    assert (result.duration, result.attempt) == (0.125, 2)
    zero = FakeReport("call", "passed", duration=0.0)
    assert phase_result(zero).duration == 0.0


def test_a_rerun_count_that_is_not_an_int_counts_as_the_first_run() -> None:
    for value in (True, "2", None, 1.5):
        report = FakeReport("call", "passed")
        report.rerun = value  # type: ignore[attr-defined]
        assert phase_result(report).attempt == 0, value


def test_a_crash_without_a_message_reads_as_empty() -> None:
    report = FakeReport("call", "failed", longrepr=Longrepr(Crash()), longreprtext="E   boom")
    assert (phase_result(report).crash, phase_result(report).text) == ("", "E   boom")
    report = FakeReport("call", "failed", longrepr=Longrepr(type("C", (), {"message": "m"})()))
    assert phase_result(report).crash == "m"


# -- a violation's detail from the text alone ------------------------------------------------


def test_a_violation_without_a_crash_line_shows_the_last_line_of_its_text() -> None:
    call = phase("call", "failed", text="Traceback …\nAssertionError: lost\n")
    judgement = classify([SETUP, call, TEARDOWN])
    assert judgement is not None
    assert judgement.detail == "AssertionError: lost"


def test_a_violation_with_no_text_at_all_still_says_which_phase_failed() -> None:
    judgement = classify([SETUP, phase("call", "failed", text=" \n"), TEARDOWN])
    assert judgement is not None
    assert judgement.detail == "call failed"


def test_an_example_line_less_indented_than_its_marker_is_kept_stripped() -> None:
    text = "E       Falsifying example: test_x(\nE   x=3,\nE       )\n\nt.py:5: AssertionError"
    call = phase("call", "failed", text=text, crash="AssertionError: too big")
    judgement = classify([SETUP, call, TEARDOWN])
    assert judgement is not None
    assert judgement.detail == "AssertionError: too big\nFalsifying example: test_x(\nx=3,\n)"


def test_an_example_inside_a_line_is_taken_from_its_first_marker_without_e_prefixes() -> None:
    text = (
        "E   AssertionError: see Falsifying example: test_x(\n"
        "E       x=3,\n"
        "E   )\n"
        "  Falsifying example: again\n"
    )
    call = phase("call", "failed", text=text, crash="AssertionError: too big")
    judgement = classify([SETUP, call, TEARDOWN])
    assert judgement is not None
    assert judgement.detail == (
        "AssertionError: too big\nFalsifying example: test_x(\n    x=3,\n)\n"
        "  Falsifying example: again"
    )


def test_an_indented_marker_outside_pytests_e_lines_is_found_too() -> None:
    text = "Traceback …\nAssertionError: too big\n  Failing test case: test_x(x=3)\n"
    call = phase("call", "failed", text=text, crash="AssertionError: too big")
    judgement = classify([SETUP, call, TEARDOWN])
    assert judgement is not None
    assert judgement.detail == "AssertionError: too big\nFailing test case: test_x(x=3)"


def test_a_stale_waiver_says_the_waiver_should_go() -> None:
    call = phase("call", "passed", wasxfail="waived: old bug")
    judgement = classify([SETUP, call, TEARDOWN])
    assert judgement is not None
    assert judgement.detail == "the promise held although it is waived: remove the waiver"


# -- what a failed setup or a worker that died in it is reported as --------------------------


def test_a_setup_crash_is_split_at_its_first_colon_and_a_bare_one_still_says_so() -> None:
    setup = phase("setup", "failed", crash="OSError: [Errno 2]: no such file")
    judgement = classify([setup, TEARDOWN])
    assert judgement is not None
    assert judgement.setup_error == {
        "type": "OSError",
        "message": "[Errno 2]: no such file",
        "location": "",
    }
    bare = classify([phase("setup", "failed"), TEARDOWN])
    assert bare is not None
    assert bare.setup_error == {"type": "error in setup", "message": "", "location": ""}


def test_a_worker_that_died_in_setup_names_the_last_line_of_its_report_or_says_it_crashed() -> None:
    crash = phase("???", "failed", text="[gw0] node down\nworker 'gw0' crashed\n")
    judgement = classify([crash])
    assert judgement is not None
    assert judgement.setup_error == {
        "type": "WorkerCrashed",
        "message": (
            "the worker died while building the implementation's fixtures (worker 'gw0' crashed)"
        ),
        "location": "",
    }
    silent = classify([phase("???", "failed", text="  ")])
    assert silent is not None
    assert silent.setup_error is not None
    assert silent.setup_error["message"] == (
        "the worker died while building the implementation's fixtures (worker crashed)"
    )


def test_a_promise_takes_the_time_of_all_its_phases_to_the_microsecond() -> None:
    phases = [PhaseResult(when=w, outcome="passed", duration=0.1234564) for w in ("setup", "call")]
    phases.append(PhaseResult(when="teardown", outcome="passed", duration=0.0000001))
    judgement = classify(phases)
    assert judgement is not None
    assert judgement.duration_s == 0.246913

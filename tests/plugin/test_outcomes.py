"""Every outcome kind, produced by a real downstream project and read back from the JSON report
(which validates against the shipped schema on every run — see ``Project.run``)."""

from __future__ import annotations

import pytest

from polyloop.testing import ActionExecutorContract
from tests.plugin._sandbox import (
    CANCELLATION,
    ERROR_PROMISE,
    FIVE_FIELDS,
    HANDWRITTEN,
    MIXED_PROJECT,
    Project,
)

#: The action-executor catalogue grows; the sandbox executors are judged on all of it.
EXECUTOR_PROMISES = len(ActionExecutorContract.promises())

STATUS_TRIGGERS = "action_executor.status_trigger_conditions"


@pytest.fixture
def mixed(project: Project) -> Project:
    project.conftest("tests", MIXED_PROJECT)
    project.write("tests/test_handwritten.py", HANDWRITTEN)
    return project


def test_a_promise_the_implementation_keeps_is_held(mixed: Project) -> None:
    run = mixed.run()
    assert run.outcome("good_executor", FIVE_FIELDS) == "held"
    assert run.outcome("good_executor", ERROR_PROMISE) == "held"
    assert run.counts("good_executor")["violated"] == 0


def test_a_failing_promise_is_violated_with_the_assertion_message(mixed: Project) -> None:
    run = mixed.run()
    violated = run.promise("broken_executor", ERROR_PROMISE)
    assert violated["outcome"] == "violated"
    assert "env_error" in violated["detail"]
    assert violated["nodeid"] == (
        "tests/conftest.py::ActionExecutorContract__broken_executor::"
        "test_action_error_is_a_normal_observation_not_an_env_error"
    )
    assert run.report is not None
    assert run.report["verdict"] == "violations"
    assert run.ret == 1


def test_an_unverifiable_promise_says_why_and_how_to_verify_it(mixed: Project) -> None:
    entry = mixed.run().promise("good_executor", STATUS_TRIGGERS)
    assert entry["outcome"] == "unverifiable"
    assert entry["why"]
    assert entry["verify_yourself"]
    assert entry["detail"] is None


def test_a_capability_the_implementation_lacks_is_not_applicable(mixed: Project) -> None:
    entry = mixed.run().promise("good_executor", CANCELLATION)
    assert entry["outcome"] == "not_applicable"
    assert entry["why"]
    assert entry["verify_yourself"]


def test_a_failure_under_a_waiver_is_waived_with_its_reason(mixed: Project) -> None:
    entry = mixed.run().promise("waived_executor", ERROR_PROMISE)
    assert entry["outcome"] == "waived"
    assert entry["waiver_reason"] == "our sandbox reports a crashing tool as env_error (ticket 12)"


def test_a_pass_under_a_waiver_is_a_stale_waiver(mixed: Project) -> None:
    entry = mixed.run().promise("stale_executor", FIVE_FIELDS)
    assert entry["outcome"] == "stale_waiver"
    assert entry["waiver_reason"] == "was broken in 0.9"


def test_a_replaced_promise_test_is_overridden_not_held(mixed: Project) -> None:
    run = mixed.run()
    overridden = "tests/test_handwritten.py::TestOverridden"
    assert run.outcome(overridden, FIVE_FIELDS) == "overridden"
    assert run.outcome(overridden, ERROR_PROMISE) == "held"
    implementation = run.implementation(overridden)
    assert implementation["fixture"] == "action_executor"
    assert implementation["source"].startswith("tests/test_handwritten.py:")


def test_a_replaced_test_that_fails_is_violated_not_overridden(mixed: Project) -> None:
    entry = mixed.run().promise("tests/test_handwritten.py::TestOverriddenAndFailing", FIVE_FIELDS)
    assert entry["outcome"] == "violated"
    assert "our replacement fails" in entry["detail"]


def test_an_override_with_a_waiver_reason_keeps_the_reason(mixed: Project) -> None:
    waived = "tests/test_handwritten.py::TestOverriddenWithWaiver"
    entry = mixed.run().promise(waived, CANCELLATION)
    assert entry["outcome"] == "overridden"
    assert entry["waiver_reason"] == "our own cancellation test covers it"


def test_every_implementation_reports_the_whole_catalogue(mixed: Project) -> None:
    run = mixed.run()
    assert run.report is not None
    ids = sorted(entry["id"] for entry in run.report["implementations"])
    assert ids == [
        "broken_executor",
        "good_executor",
        "stale_executor",
        "tests/test_handwritten.py::TestOverridden",
        "tests/test_handwritten.py::TestOverriddenAndFailing",
        "tests/test_handwritten.py::TestOverriddenWithWaiver",
        "waived_executor",
    ]
    for entry in run.report["implementations"]:
        assert entry["collected"] == entry["catalogue"] == EXECUTOR_PROMISES
        assert sum(entry["counts"].values()) == EXECUTOR_PROMISES
        assert entry["suite_hash"].startswith("sha256:")


def test_the_report_names_the_contract_version_it_judged(mixed: Project) -> None:
    from polyloop.testing import BUILTIN_SUITES, KIT_VERSION, suite_hash

    report = mixed.run().report
    assert report is not None
    every_promise = [spec for suite in BUILTIN_SUITES.values() for spec in suite.promises()]
    assert report["suite_hash"] == suite_hash(every_promise)
    assert report["kit_version"] == KIT_VERSION
    executor_hash = suite_hash(BUILTIN_SUITES["action_executor"].promises())
    assert {entry["suite_hash"] for entry in report["implementations"]} == {executor_hash}


def test_a_promise_that_held_in_the_baseline_and_now_fails_is_a_regression(
    project: Project,
) -> None:
    fixture = """\
        @pytest_polyloop.seam("action_executor", samples="samples", id="executor")
        @pytest.fixture
        def my_executor():
            return SandboxExecutor(broken={broken})
        """
    project.conftest("tests", fixture.format(broken=False))
    baseline = project.run()
    baseline_path = project.path / "baseline.json"
    baseline_path.write_text(__import__("json").dumps(baseline.report), encoding="utf-8")
    project.conftest("tests", fixture.format(broken=True))
    run = project.run(f"--polyloop-baseline={baseline_path}")
    assert run.outcome("executor", ERROR_PROMISE) == "violated"
    assert run.ret == 1


def test_a_violated_hypothesis_promise_carries_its_falsifying_example(project: Project) -> None:
    project.conftest(
        "tests",
        """\
        class PickySink:
            async def emit(self, event):
                if type(event.record).__name__ == "RunFinished":
                    raise ValueError("cannot store run_finished")


        @pytest_polyloop.seam("event_sink")
        @pytest.fixture
        def picky_sink():
            return PickySink()
        """,
    )
    entry = project.run().promise("picky_sink", "event_sink.accepts_every_event_kind")
    assert entry["outcome"] == "violated"
    detail = entry["detail"]
    assert detail.startswith("ValueError: cannot store run_finished\n")
    assert "Falsifying example" in detail or "Failing test case" in detail
    assert "RunFinished(" in detail

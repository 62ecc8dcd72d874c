"""Every probe has a time limit: an implementation that hangs is violated, the session goes on
and writes its report (weakness class 11, issue 21).

Each broken implementation in ``broken_hangs`` hung the kit before the limit existed (pytest
never returned and no report was written); its correct twin stays clean under the same limit.
The sandbox runs in a child process, itself bounded, so a regression fails instead of hanging.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from polyloop.testing import ActionExecutorContract
from polyloop.testing._shared._time_limit import ProbeTimedOut, parse_time_limit, time_limit
from tests.kit import broken_hangs

LIMIT_S = 10

SAMPLES = """
from polyloop import Action, Message, ModelReply
from polyloop.testing import ActionSamples, ModelSamples, ParserSamples

ACTION_SAMPLES = ActionSamples(
    executes_cleanly=Action(text="echo hello"), executes_but_errors=Action(text="fail now")
)
MODEL_SAMPLES = ModelSamples(messages=[Message(role="user", content="Say hello.")])
PARSER_SAMPLES = ParserSamples(
    action_reply=ModelReply(text="ACT ls -la", call_id="c1"),
    invalid_reply=ModelReply(text="I think I will look around."),
    final_reply=ModelReply(text="FINAL 42"),
)
"""

TWINS = """
import pytest
from polyloop import testing

import broken_hangs
from samples import ACTION_SAMPLES, MODEL_SAMPLES, PARSER_SAMPLES


class TestOneSession(testing.ActionExecutorContract):
    @pytest.fixture
    def action_executor(self):
        return broken_hangs.OneSessionExecutor()

    @pytest.fixture
    def action_samples(self):
        return ACTION_SAMPLES


class TestLeaksTheSession(TestOneSession):
    @pytest.fixture
    def action_executor(self):
        return broken_hangs.LeaksTheSessionWhenCancelled()


class TestPooled(testing.ModelClientContract):
    @pytest.fixture
    def model_client(self):
        return broken_hangs.PooledModel()

    @pytest.fixture
    def model_samples(self):
        return MODEL_SAMPLES


class TestLeaksAPoolSlot(TestPooled):
    @pytest.fixture
    def model_client(self):
        return broken_hangs.LeaksAPoolSlotWhenCancelled()


class TestRetrying(testing.DecisionParserContract):
    @pytest.fixture
    def decision_parser(self):
        return broken_hangs.RetryingParser()

    @pytest.fixture
    def parser_samples(self):
        return PARSER_SAMPLES


class TestRetriesForever(TestRetrying):
    @pytest.fixture
    def decision_parser(self):
        return broken_hangs.RetriesUntilItParses()
"""

# Broken implementation → (its correct twin, the promises its hang makes time out).
HANGS = {
    "TestLeaksTheSession": (
        "TestOneSession",
        {"action_executor.cancellation_propagates_and_is_not_swallowed"},
    ),
    "TestLeaksAPoolSlot": ("TestPooled", {"model_client.cancellation_propagates"}),
    "TestRetriesForever": ("TestRetrying", {"decision_parser.invalid_reply_gets_feedback"}),
}
# The parser's property-based promises hang on the broken parser too, each costing the whole
# limit; two promises show the hang and that the rest of the suite still runs.
PARSER_PROMISES = "not Retr or invalid_reply or recognises_its_action"


def _sandbox(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        broken_hangs=Path(broken_hangs.__file__).read_text(encoding="utf-8"),
        samples=SAMPLES,
        test_hangs=TWINS,
    )


def _conformance(pytester: pytest.Pytester, *args: str) -> tuple[int, str, dict[str, Any]]:
    report = pytester.path / "report.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        result = pytester.runpytest_subprocess(
            "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:rerunfailures",
            "--polyloop-conformance", f"--polyloop-report={report}", *args,
            timeout=300,
        )  # fmt: skip
    output = result.stdout.str() + result.stderr.str()
    assert report.exists(), output
    return result.ret, output, json.loads(report.read_text(encoding="utf-8"))


def _outcomes(report: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        entry["id"].rsplit("::", 1)[-1]: {promise["id"]: promise for promise in entry["promises"]}
        for entry in report["implementations"]
    }


@pytest.mark.slow  # waits out real time limits: CI's slow step (README)
def test_a_hanging_implementation_is_violated_with_timed_out_and_the_report_is_written(
    pytester: pytest.Pytester,
) -> None:
    _sandbox(pytester)
    started = time.monotonic()
    ret, output, report = _conformance(
        pytester, f"--polyloop-timeout={LIMIT_S}", "-k", PARSER_PROMISES
    )
    elapsed = time.monotonic() - started
    assert ret == 1
    assert report["verdict"] == "violations"
    outcomes = _outcomes(report)
    for broken, (twin, timed_out) in HANGS.items():
        twin_not_held = {
            pid: p["outcome"]
            for pid, p in outcomes[twin].items()
            if p["outcome"] not in ("held", "unverifiable", "not_applicable")
        }
        assert not twin_not_held, (twin, twin_not_held)
        for promise_id in timed_out:
            promise = outcomes[broken][promise_id]
            assert promise["outcome"] == "violated", (broken, promise_id, promise)
            assert promise["detail"].startswith(f"timed out after {LIMIT_S:g} s in {promise_id}")
        # Only the hanging promises are judged violated: the rest of the suite still ran.
        others = {pid: p["outcome"] for pid, p in outcomes[broken].items() if pid not in timed_out}
        assert "violated" not in others.values(), (broken, others)
        assert any(outcome == "held" for outcome in others.values()), (broken, others)
    # The hung parse is interrupted inside the implementation's own loop, and says where.
    detail = outcomes["TestRetriesForever"]["decision_parser.invalid_reply_gets_feedback"]
    assert "interrupted at" in detail["detail"]
    assert "broken_hangs.py" in detail["detail"]
    # A hung await is found in the task that waits, not in the idle event loop.
    leak = outcomes["TestLeaksTheSession"][
        "action_executor.cancellation_propagates_and_is_not_swallowed"
    ]
    assert "interrupted while awaiting at" in leak["detail"]
    assert "in execute" in leak["detail"]
    assert elapsed < 120, output


def test_a_subclass_sets_its_own_limit_and_plain_pytest_applies_it(
    pytester: pytest.Pytester,
) -> None:
    _sandbox(pytester)
    pytester.makepyfile(
        test_own_limit="""
        import test_hangs

        class TestWithItsOwnLimit(test_hangs.TestLeaksTheSession):
            time_limit_s = 1
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "test_own_limit.py",
        "-k", "cancellation", timeout=120,
    )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*timed out after 1 s in action_executor.cancellation_propagates_and_is_not_swallowed*"]
    )


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon", ""])
def test_a_bad_time_limit_is_one_usage_error_line(pytester: pytest.Pytester, value: str) -> None:
    _sandbox(pytester)
    result = pytester.runpytest_subprocess(
        "--polyloop-conformance", f"--polyloop-timeout={value}", timeout=60
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*polyloop: --polyloop-timeout must be a*"])
    assert "Traceback" not in result.stderr.str()


def test_a_bad_time_limit_on_a_subclass_is_a_subclass_misuse() -> None:
    with pytest.raises(ValueError, match=r"time_limit_s must be a finite number"):

        class TestNegative(ActionExecutorContract):
            time_limit_s = -3


@pytest.mark.parametrize(
    ("value", "expected"), [(0, None), ("0", None), (2, 2.0), ("0.5", 0.5), (1e-3, 1e-3)]
)
def test_time_limits_parse_to_seconds_or_none(value: object, expected: float | None) -> None:
    assert parse_time_limit(value, "x") == expected


@pytest.mark.parametrize("value", [True, None, "1s", float("inf"), -0.1, "\ud800"])
def test_time_limits_refuse_what_is_not_seconds(value: object) -> None:
    with pytest.raises(ValueError, match=r"^x must be"):
        parse_time_limit(value, "x")


def test_the_watchdog_interrupts_a_blocking_call_and_restores_the_callers_alarm() -> None:
    fired: list[int] = []

    def callers_handler(signum: int, frame: object) -> None:
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, callers_handler)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        with (
            pytest.raises(ProbeTimedOut, match=r"^timed out after 0.2 s in the probe$"),
            time_limit(0.2, "the probe") as watchdog,
        ):
            time.sleep(30)
        assert watchdog.fired
        assert watchdog.where is not None
        assert "test_time_limits.py" in watchdog.where
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 4.0 < remaining < 5.0  # the caller's own timer goes on, minus the time spent
        assert signal.getsignal(signal.SIGALRM) is callers_handler
        assert not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _swallows_one_timeout() -> None:
    caught = 0
    with time_limit(0.1, "the probe"):
        while caught < 2:
            try:
                time.sleep(30)
            except BaseException:  # an implementation that swallows everything, once
                caught += 1
                if caught > 1:
                    raise


def test_a_swallowed_timeout_is_raised_again() -> None:
    with pytest.raises(ProbeTimedOut):
        _swallows_one_timeout()

"""Issue 37 §5: a violation found inside a Hypothesis search is shown whole in the report.

A failure that Hypothesis could not make happen again on replay reaches pytest as a
``FlakyFailure`` exception group, whose crash line is ``_WrappedBaseException() [single
exception in FlakyFailure]`` or the group's own sentence; the report showed that and the group's
traceback cut at 4,000 characters, so the implementation's own message and the falsifying input
were lost. The report now shows the failure inside the group whole, then the falsifying input,
then what Hypothesis said.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure

from pytest_polyloop._outcomes import PhaseResult, classify, group_violation
from tests.plugin._sandbox import Project

_MESSAGE = "the sink dropped its connection: " + "details " * 700  # over 4,000 characters

_SINK = f"""\
class DropsItsConnectionOnce:
    \"\"\"Fails one emit late in the search (its 100th), never again: Hypothesis cannot make
    the failure happen again on replay and reports it as flaky.\"\"\"

    def __init__(self):
        self.calls = 0

    async def emit(self, event):
        self.calls += 1
        if self.calls == 100:
            raise RuntimeError({_MESSAGE!r})


@pytest_polyloop.seam("event_sink")
@pytest.fixture
def once_sink():
    return DropsItsConnectionOnce()
"""


def test_a_flaky_violation_is_reported_whole_with_its_falsifying_input(project: Project) -> None:
    project.conftest("tests", _SINK)
    run = project.run("-k", "accepts_every_event_kind")
    promise = run.promise("once_sink", "event_sink.accepts_every_event_kind")
    assert promise["outcome"] == "violated", run.output
    detail = promise["detail"]
    assert detail.startswith(f"RuntimeError: {_MESSAGE.strip()}"), detail[:500]
    assert "Failing test case: test_accepts_every_event_kind(" in detail, detail[-2000:]
    assert "(Hypothesis, FlakyFailure: the test produces unreliable results" in detail
    assert "_WrappedBaseException" not in detail


def _flaky(message: str) -> FlakyFailure:
    calls = itertools.count()

    @settings(max_examples=20, database=None, phases=[Phase.generate], derandomize=True)
    @given(st.integers())
    def prop(x: int) -> None:
        if next(calls) == 3:
            pytest.fail(message, pytrace=False)

    with pytest.raises(FlakyFailure) as raised:
        prop()
    return raised.value


def test_the_failure_inside_the_group_comes_first_and_whole() -> None:
    said = group_violation(_flaky(_MESSAGE))
    assert said is not None
    assert said.startswith(f"Failed: {_MESSAGE}\nFailing test case: prop(")
    assert (
        said.endswith(
            "produces unreliable results: Failed on the first call but did not on "
            "a subsequent one (1 sub-exception))"
        )
        or "FlakyFailure" in said
    )
    assert group_violation(AssertionError("plain")) is None
    phases = [
        PhaseResult(when="setup", outcome="passed", duration=0.1),
        PhaseResult(
            when="call",
            outcome="failed",
            duration=0.1,
            crash="_WrappedBaseException() [single exception in FlakyFailure]",
            text="  + Exception Group Traceback (most recent call last):\n" * 400,
            violation=said,
        ),
        PhaseResult(when="teardown", outcome="passed", duration=0.1),
    ]
    judged = classify(phases)
    assert judged is not None
    assert judged.detail == said

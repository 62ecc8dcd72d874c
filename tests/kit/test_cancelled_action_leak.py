"""``action_executor.cancelled_action_does_not_leak`` (issue 30): a thread-based executor let a
cancelled action's code run on, and its output appeared in the next action's observation. The
kit had no promise for it — every promise of such an executor held. Now the breaker is caught
and its correct twin (the same threads, each action's output its own) keeps the promise."""

from __future__ import annotations

import pytest

from polyloop import Action
from polyloop.testing import ActionExecutorContract, ActionSamples
from tests.kit._sandbox import run_sandbox, subclass_source

_PROMISE = "test_cancelled_action_does_not_leak"


def _body(*impls: str, samples: str = "broken_executors.THREADED_SAMPLES") -> str:
    return "from tests.kit import broken_executors\n\n" + "\n\n".join(
        subclass_source(
            f"Test{impl}",
            ActionExecutorContract.__name__,
            "action_executor",
            f"broken_executors.{impl}()",
            ("action_samples", samples),
        )
        for impl in impls
    )


def test_a_cancelled_threads_output_in_the_next_observation_is_caught_and_the_twin_is_clean(
    pytester: pytest.Pytester,
) -> None:
    body = _body("SharedOutputThreadedExecutor", "ThreadedPythonExecutor")
    outcomes = run_sandbox(pytester, body)
    broken = outcomes[("TestSharedOutputThreadedExecutor", _PROMISE)]
    assert broken.outcome == "failed", broken.longrepr
    assert "the output of a cancelled action leaked: the marker 'polyloop-leak-" in broken.longrepr
    failed = {
        test
        for (cls, test), got in outcomes.items()
        if got.outcome == "failed" and cls == "TestSharedOutputThreadedExecutor"
    }
    assert failed == {_PROMISE}, failed  # one bug, one violation
    twin = {
        test: got for (cls, test), got in outcomes.items() if cls == "TestThreadedPythonExecutor"
    }
    assert twin[_PROMISE].outcome == "passed", twin[_PROMISE].longrepr
    assert not [test for test, got in twin.items() if got.outcome == "failed"]


def test_without_keeps_printing_the_promise_says_which_sample_turns_it_on(
    pytester: pytest.Pytester,
) -> None:
    samples = "dataclasses.replace(broken_executors.THREADED_SAMPLES, keeps_printing=None)"
    body = "import dataclasses\n" + _body("SharedOutputThreadedExecutor", samples=samples)
    got = run_sandbox(pytester, body, "-k", "does_not_leak")[
        ("TestSharedOutputThreadedExecutor", _PROMISE)
    ]
    assert got.outcome == "skipped"
    assert "cannot be checked here" in got.longrepr
    assert "keeps_printing=" in got.longrepr


def test_an_action_that_ends_before_the_cancel_is_not_applicable(
    pytester: pytest.Pytester,
) -> None:
    samples = (
        "dataclasses.replace(broken_executors.THREADED_SAMPLES, "
        "keeps_printing=lambda marker: broken_executors.Action(text='print(1)'))"
    )
    body = "import dataclasses\n" + _body("ThreadedPythonExecutor", samples=samples)
    got = run_sandbox(pytester, body, "-k", "does_not_leak")[
        ("TestThreadedPythonExecutor", _PROMISE)
    ]
    assert got.outcome == "skipped"
    assert "not applicable" in got.longrepr
    assert "before it could be cancelled" in got.longrepr


def test_keeps_printing_must_be_a_function() -> None:
    with pytest.raises(TypeError, match="keeps_printing must be a function"):
        ActionSamples(
            executes_cleanly=Action(text="x"),
            executes_but_errors=Action(text="y"),
            keeps_printing="print",  # type: ignore[arg-type]
        )

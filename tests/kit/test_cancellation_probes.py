"""The cancellation probes: no false alarm on slow or shared implementations, a precise verdict.

The matrix (``test_matrix.py``) proves each probe catches its broken implementation; this file
proves the other half of a gate worth trusting — correct implementations that are slow (200 ms
per call) or whose fixture lives for the whole module (state and a lock kept across calls,
a real child process) are never reported, and a violation names the sample and the depth.
"""

from __future__ import annotations

import pytest

from tests.kit._sandbox import run_sandbox

CANCELLATION = {
    "action_executor": "test_cancellation_propagates_and_is_not_swallowed",
    "model_client": "test_cancellation_propagates",
    "event_sink": "test_cancellation_propagates",
}

SLOW_AND_SHARED = """
import pytest_asyncio

from polyloop import Action
from polyloop.executors import PythonExecutor

PYTHON_SAMPLES = testing.ActionSamples(
    executes_cleanly=Action(text="total = sum(range(10))\\nprint(total)"),
    executes_but_errors=Action(text="1 / 0"),
)


class TestSlowExecutor(testing.ActionExecutorContract):
    @pytest.fixture
    def action_executor(self):
        return broken.SlowExecutor()

    @pytest.fixture
    def action_samples(self):
        return broken.ACTION_SAMPLES


class TestSharedSlowExecutor(testing.ActionExecutorContract):
    loop_scope = "module"

    @pytest.fixture(scope="module")
    def action_executor(self):
        return broken.SlowExecutor()

    @pytest.fixture
    def action_samples(self):
        return broken.ACTION_SAMPLES


class TestSharedPythonExecutor(testing.ActionExecutorContract):
    loop_scope = "module"

    @pytest_asyncio.fixture(scope="module", loop_scope="module")
    async def action_executor(self):
        async with PythonExecutor(timeout_s=10) as executor:
            yield executor

    @pytest.fixture
    def action_samples(self):
        return PYTHON_SAMPLES


class TestSlowModel(testing.ModelClientContract):
    @pytest.fixture
    def model_client(self):
        return broken.SlowModel()

    @pytest.fixture
    def model_samples(self):
        return broken.MODEL_SAMPLES


class TestSharedSlowSink(testing.EventSinkContract):
    loop_scope = "module"

    @pytest.fixture(scope="module")
    def event_sink(self):
        return broken.SlowSink()
"""


def test_slow_and_module_scoped_correct_implementations_hold_every_cancellation_promise(
    pytester: pytest.Pytester,
) -> None:
    outcomes = run_sandbox(pytester, SLOW_AND_SHARED, "-k", "cancellation")
    assert {cls for cls, _ in outcomes} == {
        "TestSlowExecutor",
        "TestSharedSlowExecutor",
        "TestSharedPythonExecutor",
        "TestSlowModel",
        "TestSharedSlowSink",
    }
    not_held = {key: o for key, o in outcomes.items() if o.outcome != "passed"}
    assert not not_held, "\n\n".join(f"{k}: {o.outcome}\n{o.longrepr}" for k, o in not_held.items())


def test_a_violation_names_the_sample_and_the_depth_that_caught_it(
    pytester: pytest.Pytester,
) -> None:
    body = "\n\n".join(
        f"class Test{impl}(testing.ActionExecutorContract):\n"
        "    @pytest.fixture\n"
        "    def action_executor(self):\n"
        f"        return broken.{impl}()\n"
        "    @pytest.fixture\n"
        "    def action_samples(self):\n"
        "        return broken.ACTION_SAMPLES\n"
        for impl in (
            "SwallowsCancellationOnlyWhenTheActionFails",
            "SwallowsCancellationAfterConnecting",
        )
    )
    outcomes = run_sandbox(pytester, body, "-k", "cancellation")
    failing = outcomes[
        ("TestSwallowsCancellationOnlyWhenTheActionFails", CANCELLATION["action_executor"])
    ]
    assert failing.outcome == "failed"
    assert "execute(action_samples.executes_but_errors), cancelled at await point 1 of 2" in (
        failing.longrepr
    )
    assert "the CancelledError was swallowed" in failing.longrepr
    deeper = outcomes[("TestSwallowsCancellationAfterConnecting", CANCELLATION["action_executor"])]
    assert deeper.outcome == "failed"
    assert "execute(action_samples.executes_cleanly), cancelled at await point 2 of" in (
        deeper.longrepr
    )


def test_an_implementation_without_an_await_point_is_not_applicable_every_time(
    pytester: pytest.Pytester,
) -> None:
    body = "\n\n".join(
        f"class TestFast{n}(testing.ActionExecutorContract):\n"
        "    @pytest.fixture\n"
        "    def action_executor(self):\n"
        "        return broken.FastExecutor()\n"
        "    @pytest.fixture\n"
        "    def action_samples(self):\n"
        "        return broken.ACTION_SAMPLES\n"
        for n in range(5)
    )
    outcomes = run_sandbox(pytester, body, "-k", "cancellation")
    assert len(outcomes) == 5
    for outcome in outcomes.values():
        assert outcome.outcome == "skipped"
        assert "not applicable to this implementation" in outcome.longrepr
        assert "finished without ever suspending" in outcome.longrepr

"""A cancellation verdict does not depend on the machine's speed (weakness class 13, issue 21).

Against the kit before counted await points, the two slow-start implementations of
``broken_timing`` were reported ``held`` on every run (5 of 5); their twins stay clean. And one
implementation run at different speeds gets the same verdict every time.
"""

from __future__ import annotations

import asyncio
from functools import partial

import pytest

from polyloop import Action
from polyloop.testing._shared._cancel import assert_cancellation_propagates
from polyloop.testing._shared._skips import ContractSkip
from tests.kit._sandbox import run_sandbox

CANCEL_EXECUTOR = "test_cancellation_propagates_and_is_not_swallowed"
CANCEL_MODEL = "test_cancellation_propagates"

BODY = """
from tests.kit import broken_timing


class TestHandshake(testing.ActionExecutorContract):
    @pytest.fixture
    def action_executor(self):
        return broken_timing.HandshakeExecutor()

    @pytest.fixture
    def action_samples(self):
        return broken.ACTION_SAMPLES


class TestSwallowsAfterTheHandshake(TestHandshake):
    @pytest.fixture
    def action_executor(self):
        return broken_timing.SwallowsAfterTheHandshake()


class TestSlowStart(TestHandshake):
    @pytest.fixture
    def action_executor(self):
        return broken_timing.SlowStartExecutor()


class TestSwallowsAfterASlowStart(TestHandshake):
    @pytest.fixture
    def action_executor(self):
        return broken_timing.SwallowsAfterASlowStart()


class TestWarmUp(testing.ModelClientContract):
    @pytest.fixture
    def model_client(self):
        return broken_timing.WarmUpModel()

    @pytest.fixture
    def model_samples(self):
        return broken.MODEL_SAMPLES


class TestSwallowsAfterWarmingUp(TestWarmUp):
    @pytest.fixture
    def model_client(self):
        return broken_timing.SwallowsAfterWarmingUp()
"""


def test_a_swallow_past_the_first_ticks_or_after_a_slow_start_is_caught_and_the_twins_hold(
    pytester: pytest.Pytester,
) -> None:
    outcomes = run_sandbox(pytester, BODY, "-k", "cancellation")
    for twin in ("TestHandshake", "TestSlowStart"):
        assert outcomes[(twin, CANCEL_EXECUTOR)].outcome == "passed", outcomes[
            (twin, CANCEL_EXECUTOR)
        ]
    assert outcomes[("TestWarmUp", CANCEL_MODEL)].outcome == "passed"
    for broken, test, point in (
        ("TestSwallowsAfterTheHandshake", CANCEL_EXECUTOR, "await point 5 of 5"),
        ("TestSwallowsAfterASlowStart", CANCEL_EXECUTOR, "await point 2 of 2"),
        ("TestSwallowsAfterWarmingUp", CANCEL_MODEL, "await point 2 of 2"),
    ):
        found = outcomes[(broken, test)]
        assert found.outcome == "failed", (broken, found)
        assert point in found.longrepr
        assert "the CancelledError was swallowed" in found.longrepr


class _Paced:
    """An executor whose every await takes ``pause`` seconds: a fast or a slow machine."""

    def __init__(self, pause: float, *, swallows: bool, awaits: int = 3) -> None:
        self.pause, self.swallows, self.awaits = pause, swallows, awaits

    async def execute(self, action: Action) -> object:
        if not self.awaits:
            return "done"
        for _ in range(self.awaits - 1):
            await asyncio.sleep(self.pause)
        try:
            await asyncio.sleep(self.pause)
        except asyncio.CancelledError:
            if not self.swallows:
                raise
            return "interrupted"
        return "done"


async def _verdict(executor: object) -> str:
    call = partial(executor.execute, Action(text="x"))  # type: ignore[attr-defined]
    try:
        await assert_cancellation_propagates({"execute()": call}, promise="p", what="execute()")
    except ContractSkip:
        return "not_applicable"
    except pytest.fail.Exception as failure:
        return f"violated: {str(failure).split(',')[1].strip()}"
    return "held"


@pytest.mark.asyncio
@pytest.mark.parametrize("swallows", [False, True])
async def test_the_verdict_is_the_same_on_a_fast_and_a_slow_machine(swallows: bool) -> None:
    verdicts = {
        pause: await _verdict(_Paced(pause, swallows=swallows)) for pause in (0, 0.001, 0.03)
    }
    assert len(set(verdicts.values())) == 1, verdicts
    expected = "violated: cancelled at await point 3 of 3" if swallows else "held"
    assert set(verdicts.values()) == {expected}


@pytest.mark.asyncio
async def test_a_call_that_never_suspends_is_not_applicable_every_time() -> None:
    verdicts = [await _verdict(_Paced(0, swallows=True, awaits=0)) for _ in range(3)]
    assert verdicts == ["not_applicable"] * 3

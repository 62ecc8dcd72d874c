"""Executors broken on the size or sequence axis, caught by
``action_executor.truncated_chars_counts_what_was_cut`` now that it echoes every boundary size
and then the shorter texts again, and by ``action_executor.repeated_execution_keeps_status``
now that it repeats each sample back to back and draws its orders; their correct twins keep
every promise.

Each breaker of :mod:`tests.kit.broken_executor_axes` kept every promise of the kit as it was
(echoes of 0, 1, 200 and 4 099 characters, rising; one fixed order of the samples, in rounds).
"""

from __future__ import annotations

import re

import pytest

from polyloop.testing import BUILTIN_SUITES
from tests.kit import _sandbox

PROMISE = "truncated_chars_counts_what_was_cut"
_SUBSTITUTION = "observation_substitution_happens_in_the_library"  # unverifiable by design

# (breaker, the text its failure shows, its correct twin), by axis.
PAIRS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "size": (
        ("MarksAtTheCap", r"<4096 non-ASCII characters>.*reports 0 characters", "MarksPastTheCap"),
        (
            "ReadsOnePipeBuffer",
            r"<(2\d{4}|[3-6]\d{4}) non-ASCII characters>.*reports 0 characters",
            "ReadsThePipeToTheEnd",
        ),
    ),
    "sequence": (
        (
            "ReusesItsOutputBuffer",
            r"reports 0 characters truncated, but the observation is not the text",
            "ReusesItsBufferUpToTheLength",
        ),
    ),
}


def _source(impl: str, samples: str = "AXES_SAMPLES") -> str:
    return (
        f"class Test{impl}(testing.ActionExecutorContract):\n"
        "    @pytest.fixture\n"
        "    def action_executor(self):\n"
        f"        return broken_executor_axes.{impl}()\n"
        "    @pytest.fixture\n"
        "    def action_samples(self):\n"
        f"        return broken_executor_axes.{samples}\n"
    )


@pytest.mark.parametrize("axis", sorted(PAIRS))
def test_each_breaker_fails_the_count_promise_and_its_twin_keeps_every_promise(
    pytester: pytest.Pytester, axis: str
) -> None:
    impls = [name for broken_one, _, twin in PAIRS[axis] for name in (broken_one, twin)]
    body = "from tests.kit import broken_executor_axes\n\n" + "\n\n".join(map(_source, impls))
    outcomes = _sandbox.run_sandbox(pytester, body)
    breaks = {broken_one: text for broken_one, text, _ in PAIRS[axis]}
    problems = []
    for impl in impls:
        for spec in BUILTIN_SUITES["action_executor"].promises():
            got = outcomes.get((f"Test{impl}", spec.test_name))
            if got is None:
                problems.append(f"{impl}: {spec.name} did not run")
                continue
            want = "passed"
            # polyloop keeps the substitution; the axes' samples give no keeps_printing action
            if spec.name in (_SUBSTITUTION, "cancelled_action_does_not_leak"):
                want = "skipped"
            elif spec.name == PROMISE and impl in breaks:
                want = "failed"
            if got.outcome != want:
                problems.append(f"{impl} {spec.name}: {got.outcome}, not {want}\n{got.longrepr}")
            elif want == "failed" and not re.search(breaks[impl], got.longrepr, re.S):
                problems.append(f"{impl} {spec.name} failed for another reason:\n{got.longrepr}")
    assert not problems, "\n\n".join(problems)


_STATUS = "repeated_execution_keeps_status"
# What the parity samples can check (no break, echo or keeps_printing opt-in): the rest is skipped.
_PARITY_CHECKED = {
    "returns_all_five_fields",
    "completion_signal_is_a_plain_boolean",
    "action_error_is_a_normal_observation_not_an_env_error",
    _STATUS,
    "truncated_chars_is_non_negative",
    "cancellation_propagates_and_is_not_swallowed",
    "status_trigger_conditions",
}


def test_a_status_that_flips_every_second_call_is_caught_and_its_twin_keeps_every_promise(
    pytester: pytest.Pytester,
) -> None:
    # Issue 37: a round of the fixed order sent two actions to the round-robin sandboxes, so
    # each sample always met the same sandbox and kept "its" status; the lost sandbox passed.
    impls = ("RoundRobinOverALostSandbox", "RoundRobinSandboxes")
    body = "from tests.kit import broken_executor_axes\n\n" + "\n\n".join(
        _source(impl, "PARITY_SAMPLES") for impl in impls
    )
    outcomes = _sandbox.run_sandbox(pytester, body)
    problems = []
    for impl in impls:
        for spec in BUILTIN_SUITES["action_executor"].promises():
            got = outcomes.get((f"Test{impl}", spec.test_name))
            assert got is not None, f"{impl}: {spec.name} did not run"
            want = "passed" if spec.name in _PARITY_CHECKED else "skipped"
            if spec.name == _STATUS and impl == "RoundRobinOverALostSandbox":
                want = "failed"
            if got.outcome != want:
                problems.append(f"{impl} {spec.name}: {got.outcome}, not {want}\n{got.longrepr}")
    assert not problems, "\n\n".join(problems)
    failure = outcomes[("TestRoundRobinOverALostSandbox", f"test_{_STATUS}")].longrepr
    # the two calls back to back that disagree are named, with the whole history
    assert re.search(
        r"call 2 on one executor, execute\(action_samples\.\w+\) came back "
        r"env_error, but executed the first time",
        failure,
    ), failure

"""Model clients broken on the failure-parameter axis, caught by
``model_client.failure_is_an_exception`` now that it sweeps its failures' parameters (how many
good replies the client served first, what ``Retry-After`` asks, which status, where a body is
cut); their correct twins keep the promise.

Each breaker of :mod:`tests.kit.broken_model_axes` kept the promise with the kit as it was.
"""

from __future__ import annotations

import re

import pytest

from tests.kit import _sandbox

PROMISE = "test_failure_is_an_exception"
# (breaker, the text its failure shows, its correct twin)
PAIRS: tuple[tuple[str, str, str], ...] = (
    (
        "ServesTheLastReplyOnError",
        r"\(after-\d+-http-500\): complete\(\) returned",
        "KeepsTheLastReplyForLogs",
    ),
    (
        "WaitsAsTheServerSays",
        r"\(retry-after-120\): complete\(\) was still running",
        "WaitsWithinItsDeadline",
    ),
    (
        "TakesGatewayTimeoutAsSilence",
        r"\(http-504\): complete\(\) returned",
        "RaisesOnGatewayTimeout",
    ),
    ("TakesAnEmptyBodyAsSilence", r"\(cut-at-0\): complete\(\) returned", "ReadsTheBodyToItsEnd"),
)


def _source(impl: str) -> str:
    return (
        f"class Test{impl}(testing.ModelClientContract):\n"
        "    @pytest.fixture\n"
        "    def model_client(self):\n"
        "        return broken.ReferenceModel()\n"
        "    @pytest.fixture\n"
        "    def model_samples(self):\n"
        f"        return broken.opt_in_model_samples(broken_model_axes.{impl})\n"
    )


def test_each_breaker_fails_the_failure_promise_and_its_twin_keeps_it(
    pytester: pytest.Pytester,
) -> None:
    impls = [name for broken_one, _, twin in PAIRS for name in (broken_one, twin)]
    body = "from tests.kit import broken_model_axes\n\n" + "\n\n".join(map(_source, impls))
    outcomes = _sandbox.run_sandbox(pytester, body, "-k", "failure_is_an_exception")
    problems = []
    for broken_one, text, twin in PAIRS:
        got = outcomes[(f"Test{broken_one}", PROMISE)]
        if got.outcome != "failed" or not re.search(text, got.longrepr, re.S):
            problems.append(f"{broken_one}: {got.outcome}\n{got.longrepr}")
        clean = outcomes[(f"Test{twin}", PROMISE)]
        if clean.outcome != "passed":
            problems.append(f"{twin}: {clean.outcome}\n{clean.longrepr}")
    assert not problems, "\n\n".join(problems)


SIZE_PAIRS: tuple[tuple[str, str], ...] = (
    ("TrimsTheHistoryInPlace", "TrimsACopyOfTheHistory"),
    ("SummarisesLongMessagesInPlace", "SummarisesACopy"),
)


def test_each_size_breaker_fails_the_mutation_promise_and_its_twin_keeps_every_promise(
    pytester: pytest.Pytester,
) -> None:
    body = "from tests.kit import broken_model_axes\n\n" + "\n\n".join(
        f"class Test{impl}(testing.ModelClientContract):\n"
        "    @pytest.fixture\n"
        "    def model_client(self):\n"
        f"        return broken_model_axes.{impl}()\n"
        "    @pytest.fixture\n"
        "    def model_samples(self):\n"
        "        return broken.MODEL_SAMPLES\n"
        for pair in SIZE_PAIRS
        for impl in pair
    )
    outcomes = _sandbox.run_sandbox(pytester, body)
    problems = []
    for broken_one, twin in SIZE_PAIRS:
        for (cls, test), got in outcomes.items():
            if cls not in (f"Test{broken_one}", f"Test{twin}"):
                continue
            want = "passed"
            if test in (
                "test_failure_is_an_exception",
                "test_reads_golden_responses",
                "test_sends_golden_requests",
                "test_cancellation_propagates",
            ):
                # no failing-client factory or golden requests; no await point to cancel at
                want = "skipped"
            elif cls == f"Test{broken_one}" and test == "test_does_not_mutate_messages":
                want = "failed"
            if got.outcome != want:
                problems.append(f"{cls} {test}: {got.outcome}, not {want}\n{got.longrepr}")
            elif want == "failed" and "given to call 4 (during that call)" not in got.longrepr:
                problems.append(f"{cls} {test} failed for another reason:\n{got.longrepr}")
    assert not problems, "\n\n".join(problems)

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

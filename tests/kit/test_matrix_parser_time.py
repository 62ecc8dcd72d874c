"""``decision_parser.parse_time_is_linear`` (issue 37): a ReAct parser whose regular expression
is quadratic on a reply with no complete call is caught under that promise — its other promises
point at it instead of timing out on the kit's long replies — and its linear twin keeps every
promise.

Before the promise, nothing bounded parse time: the regex parser took longer on the kit's own
100 000-character reply than ``never_raises``'s time limit, and the slowness was reported as
that promise's time-out.
"""

from __future__ import annotations

import re
import time

import pytest

from polyloop.testing import BUILTIN_SUITES
from tests.kit import _sandbox

_PROMISE = "parse_time_is_linear"
_SAME_CAUSE = "same cause as decision_parser.parse_time_is_linear: "
#: Without a factory or golden samples these two are unverifiable, for both parsers.
_UNVERIFIABLE = {"is_deterministic_across_processes", "parses_golden_samples"}


def _source(impl: str) -> str:
    return (
        f"class Test{impl}(testing.DecisionParserContract):\n"
        "    @pytest.fixture\n"
        "    def decision_parser(self):\n"
        f"        return broken_parser_time.{impl}()\n"
        "    @pytest.fixture\n"
        "    def parser_samples(self):\n"
        "        return broken_parser_time.SAMPLES\n"
    )


def test_a_quadratic_parser_is_caught_under_its_own_promise_and_its_twin_keeps_every_promise(
    pytester: pytest.Pytester,
) -> None:
    catalogue = {spec.name for spec in BUILTIN_SUITES["decision_parser"].promises()}
    assert _PROMISE in catalogue, "no promise bounds the time parse() blocks the event loop"
    impls = ("ReActRegexParser", "ReActScanParser")
    body = "from tests.kit import broken_parser_time\n\n" + "\n\n".join(map(_source, impls))
    started = time.monotonic()
    outcomes = _sandbox.run_sandbox(pytester, body)
    took = time.monotonic() - started
    problems = []
    for spec in BUILTIN_SUITES["decision_parser"].promises():
        twin = outcomes[("TestReActScanParser", spec.test_name)]
        want = "skipped" if spec.name in _UNVERIFIABLE else "passed"
        if twin.outcome != want:
            problems.append(f"twin {spec.name}: {twin.outcome}, not {want}\n{twin.longrepr}")
        got = outcomes[("TestReActRegexParser", spec.test_name)]
        if "timed out" in got.longrepr:
            problems.append(f"breaker {spec.name} timed out:\n{got.longrepr}")
        elif spec.name == _PROMISE:
            shown = r"parse\(\) of a reply .* took \d+ ms of CPU time at [\d,]+ characters"
            if got.outcome != "failed" or not re.search(shown, got.longrepr):
                problems.append(f"breaker {spec.name}: {got.outcome}\n{got.longrepr}")
        elif got.outcome == "failed" and _SAME_CAUSE not in got.longrepr:
            problems.append(f"breaker {spec.name} failed for another reason:\n{got.longrepr}")
    assert not problems, "\n\n".join(problems)
    # the slow parses are paid once, not by every promise: seconds, not minutes
    assert took < 60, f"the two parsers took {took:.0f} s"

"""Parsers broken on one axis — sequence, composition, size — caught by
``decision_parser.parses_golden_samples``; their correct twins keep every promise.

Each breaker of :mod:`tests.kit.broken_parser_axes` kept every promise before golden samples
existed: without ``golden`` (the kit as it was) it is reported conformant here too, which this
matrix checks on every run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from polyloop.testing import BUILTIN_SUITES
from tests.kit import _sandbox

GOLDEN = "parses_golden_samples"
ACROSS = "is_deterministic_across_processes"


@dataclass(frozen=True)
class Twin:
    impl: str  # a class of broken_parser_axes
    breaks: str | None = None  # the text parses_golden_samples fails with, or None if clean


_FIRST = "must give the first .* or an InvalidDecision; "
_SECOND = _FIRST + "it is the second decision: its (text and )?tool_args (is|are) the second's"
PAIRS: dict[str, tuple[tuple[Twin, Twin], ...]] = {
    "sequence": (
        (
            Twin("MemoisesByLength", r"not Action.*call \d+ on one parser object"),
            Twin("MemoisesByText"),
        ),
        (
            Twin("CarriesArgumentsOver", r"golden\[1\] parsed to Action.*'text'"),
            Twin("RemembersArgumentsForFeedback"),
        ),
    ),
    "composition": (
        (Twin("TakesTheLastCall", _SECOND), Twin("TakesTheFirstCall")),
        (Twin("MergesEveryCall", _SECOND), Twin("RefusesSeveralCalls")),
    ),
    "size": (
        (
            Twin("CapsArgumentsAt4096", r"argument '(text|tag)' 4097 characters"),
            Twin("RefusesArgumentsOver1MiB"),
        ),
        (
            Twin("ScansTheFirst16KiB", r"golden\[0\] with 1638[345] characters of prose before"),
            Twin("ScansTheWholeReply"),
        ),
    ),
}

_SAMPLES = """testing.ParserSamples(
    action_reply=ModelReply(text=broken_parser_axes.GOLDEN[0][0]),
    invalid_reply=ModelReply(text="no call here"),
    final_reply=ModelReply(text='{"final": "done"}'),
    golden=broken_parser_axes.GOLDEN if golden else (),
    golden_variations=(
        {"whitespace", "prose_before", "prose_after", "argument_text"} if golden else ()
    ),
)"""


def _source(impl: str, golden: bool) -> str:
    name = f"Test{impl}{'' if golden else 'WithoutGolden'}"
    return (
        f"class {name}(testing.DecisionParserContract):\n"
        "    @pytest.fixture\n"
        "    def decision_parser(self):\n"
        f"        return broken_parser_axes.{impl}()\n"
        "    @pytest.fixture\n"
        "    def parser_samples(self):\n"
        f"        golden = {golden}\n"
        f"        return {_SAMPLES.replace(chr(10), chr(10) + '        ')}\n"
    )


def _problems(
    twin: Twin, golden: bool, outcomes: dict[tuple[str, str], _sandbox.TestOutcome]
) -> list[str]:
    name = f"Test{twin.impl}{'' if golden else 'WithoutGolden'}"
    problems = []
    for spec in BUILTIN_SUITES["decision_parser"].promises():
        got = outcomes.get((name, spec.test_name))
        if got is None:
            problems.append(f"{name}: {spec.name} did not run")
            continue
        if spec.name == ACROSS or (spec.name == GOLDEN and not golden):
            want = "skipped"
        elif spec.name == GOLDEN and twin.breaks is not None:
            want = "failed"
        else:
            want = "passed"
        if got.outcome != want:
            problems.append(f"{name} {spec.name}: {got.outcome}, not {want}\n{got.longrepr}")
        elif want == "failed" and not re.search(twin.breaks or "", got.longrepr, re.S):
            problems.append(f"{name} {spec.name} failed for another reason:\n{got.longrepr}")
    return problems


@pytest.mark.slow  # the kit's mutant matrix: CI's slow step (README)
@pytest.mark.parametrize("axis", sorted(PAIRS))
def test_each_breaker_is_caught_only_with_golden_samples_and_its_twin_stays_clean(
    pytester: pytest.Pytester, axis: str
) -> None:
    twins = [twin for pair in PAIRS[axis] for twin in pair]
    for broken_one, correct in PAIRS[axis]:
        assert broken_one.breaks is not None
        assert correct.breaks is None
    runs = [(twin, golden) for twin in twins for golden in (True, False)]
    body = (
        "from polyloop import ModelReply\nfrom tests.kit import broken_parser_axes\n\n"
        + "\n\n".join(_source(twin.impl, golden) for twin, golden in runs)
    )
    outcomes = _sandbox.run_sandbox(pytester, body)
    problems = [p for twin, golden in runs for p in _problems(twin, golden, outcomes)]
    assert not problems, "\n\n".join(problems)

"""Decision-parser probes look where real bugs live: each broken parser of
:mod:`tests.kit.broken_parsers` beside its correct twin, through the whole parser suite.

* Inputs: parsers that break on several calls in one reply, on replies well past 64 KiB, on
  non-ASCII text or on a lone surrogate in any field — the kit used to report every promise of
  them held, because it fed short, mostly-ASCII, one-call replies. Each must now fail the
  promises it breaks (every run: the hard inputs are fixed, not left to a random search), and
  its twin must keep every promise.
* Processes: parsers whose decision follows a set's iteration order are deterministic inside
  one process. Without a factory they keep every promise (``is_deterministic_across_processes``
  is ``unverifiable``); with one, that promise — and only that one — fails, and the twins keep
  it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import pytest

from polyloop.testing import BUILTIN_SUITES
from tests.kit import _sandbox
from tests.kit.test_matrix_opt_ins import OPT_IN

ACROSS = "is_deterministic_across_processes"
GOLDEN = "parses_golden_samples"  # its breakers and twins: test_matrix_parser_axes.py
# Raising breaks every promise that parses the fixed hard inputs.
_RAISES = ("never_raises", "returns_one_of_three_branches", "is_deterministic")


@dataclass(frozen=True)
class Twin:
    label: str
    impl: str  # an expression over the module ``broken_parsers``
    breaks: dict[str, str] = field(default_factory=dict)  # promise → text its failure shows
    factory: str | None = None  # a class of broken_parsers the children build


def _raising(label: str, impl: str, error: str) -> Twin:
    # One cause, one violation (issue 30): never_raises names the reply; the others point at it.
    same = "same cause as decision_parser.never_raises: parse\\(\\) raised"
    breaks = {name: f"{same} {error}.* on ModelReply" for name in _RAISES[1:]}
    breaks["action_is_serialisable"] = f"{same} {error}.* on ModelReply"
    return Twin(
        label, impl, {"never_raises": f"parse\\(\\) raised {error}.* on ModelReply"} | breaks
    )


INPUTS: tuple[tuple[Twin, Twin], ...] = (
    (
        _raising("RecursesPerLine", "RecursesPerLine()", "RecursionError"),
        Twin("LoopsPerLine", "LoopsPerLine()"),
    ),
    (
        _raising("CapsBytesStrictly", "CapsBytesStrictly()", "UnicodeDecodeError"),
        Twin("CapsBytesLeniently", "CapsBytesLeniently()"),
    ),
    (
        _raising("HashesText", "HashesFieldStrictly('text')", "UnicodeEncodeError"),
        Twin("HashesTextWithSurrogates", "HashesFieldWithSurrogates('text')"),
    ),
    (
        _raising("HashesReasoning", "HashesFieldStrictly('reasoning')", "UnicodeEncodeError"),
        Twin("HashesReasoningWithSurrogates", "HashesFieldWithSurrogates('reasoning')"),
    ),
    (
        _raising("HashesCallId", "HashesFieldStrictly('call_id')", "UnicodeEncodeError"),
        Twin("HashesCallIdWithSurrogates", "HashesFieldWithSurrogates('call_id')"),
    ),
    (
        _raising("OneCallOnly", "OneCallOnly()", "ValueError"),
        Twin("RefusesSecondCall", "RefusesSecondCall()"),
    ),
    (
        # argparse is also quadratic in the words of a reply holding many calls (issue 37)
        dataclasses.replace(
            _raising("ReadsOptionsWithArgparse", "ReadsOptionsWithArgparse()", "SystemExit: 2"),
            breaks={
                **_raising("", "", "SystemExit: 2").breaks,
                "parse_time_is_linear": (
                    r"parse\(\) of a reply of parser_samples\.action_reply repeated took"
                ),
            },
        ),
        Twin("ReadsOptionsWithArgparseSafely", "ReadsOptionsWithArgparseSafely()"),
    ),
    (
        Twin(
            "BytesArgumentForNonAscii",
            "BytesArgumentForNonAscii()",
            {"action_is_serialisable": "cannot be written to the log.*bytes"},
        ),
        Twin("HexArgumentForNonAscii", "HexArgumentForNonAscii()"),
    ),
)

_DIFFERS = "parsed to different decisions in processes with different hash seeds"
PROCESSES: tuple[tuple[Twin, Twin], ...] = (
    (
        Twin("PicksAnyOfASet", "PicksAnyOfASet()", {ACROSS: _DIFFERS}, "PicksAnyOfASet"),
        Twin("PicksTheFirstDistinct", "PicksTheFirstDistinct()", {}, "PicksTheFirstDistinct"),
    ),
    (
        Twin(
            "ArgumentsFromADictOfSets",
            "ArgumentsFromADictOfSets()",
            {ACROSS: _DIFFERS},
            "ArgumentsFromADictOfSets",
        ),
        Twin("ArgumentsFromSortedSets", "ArgumentsFromSortedSets()", {}, "ArgumentsFromSortedSets"),
    ),
)


def _without_factory(twin: Twin) -> Twin:
    return Twin(twin.label + "WithoutFactory", twin.impl)


def _source(twin: Twin) -> str:
    samples = "broken.PARSER_SAMPLES"
    if twin.factory is not None:
        factory = f"tests.kit.broken_parsers:{twin.factory}"
        samples = f"dataclasses.replace(broken.PARSER_SAMPLES, factory={factory!r})"
    return (
        f"class Test{twin.label}(testing.DecisionParserContract):\n"
        "    @pytest.fixture\n"
        "    def decision_parser(self):\n"
        f"        return broken_parsers.{twin.impl}\n"
        "    @pytest.fixture\n"
        "    def parser_samples(self):\n"
        f"        return {samples}\n"
    )


def _problems(twin: Twin, outcomes: dict[tuple[str, str], _sandbox.TestOutcome]) -> list[str]:
    catalogue = BUILTIN_SUITES["decision_parser"].promises()
    missing = set(twin.breaks) - {spec.name for spec in catalogue}
    problems = [f"{twin.label}: the suite has no promise {sorted(missing)}"] if missing else []
    for spec in catalogue:
        got = outcomes.get((f"Test{twin.label}", spec.test_name))
        if got is None:
            problems.append(f"{twin.label}: {spec.name} did not run")
            continue
        if spec.name in twin.breaks:
            want = "failed"
        elif (spec.name == ACROSS and twin.factory is None) or spec.name == GOLDEN:
            want = "skipped"  # unverifiable without a factory, or without golden samples
        else:
            want = "passed"
        if got.outcome != want:
            problems.append(f"{twin.label} {spec.name}: {got.outcome}, not {want}\n{got.longrepr}")
        elif want == "failed" and not re.search(twin.breaks[spec.name], got.longrepr, re.S):
            problems.append(f"{twin.label} {spec.name} failed for another reason:\n{got.longrepr}")
    return problems


@pytest.mark.slow  # the kit's mutant matrix: CI's slow step (README)
@pytest.mark.parametrize("cls", ["inputs", "processes"])
def test_each_broken_parser_fails_its_promises_and_its_correct_twin_keeps_all(
    pytester: pytest.Pytester, cls: str
) -> None:
    assert OPT_IN["decision_parser"] == {ACROSS, GOLDEN}
    pairs = INPUTS if cls == "inputs" else PROCESSES
    twins = [twin for pair in pairs for twin in pair]
    if cls == "processes":  # without a factory the old verdict stands: every promise held
        twins += [_without_factory(pair[0]) for pair in pairs]
        twins.append(Twin("PrintsWhileParsing", "PrintsWhileParsing()", {}, "PrintsWhileParsing"))
    for broken_one, correct in pairs:
        assert broken_one.breaks
        assert not correct.breaks
    body = "import dataclasses\nfrom tests.kit import broken_parsers\n\n" + "\n\n".join(
        _source(twin) for twin in twins
    )
    outcomes = _sandbox.run_sandbox(pytester, body)
    problems = [problem for twin in twins for problem in _problems(twin, outcomes)]
    assert not problems, "\n\n".join(problems)


def test_parser_samples_factory_must_name_a_callable_as_module_colon_name() -> None:
    import dataclasses

    from tests.kit.broken import PARSER_SAMPLES

    assert PARSER_SAMPLES.factory is None
    named = dataclasses.replace(PARSER_SAMPLES, factory="tests.kit.broken_parsers:PicksAnyOfASet")
    assert named.factory == "tests.kit.broken_parsers:PicksAnyOfASet"
    wrong_ones: tuple[object, ...] = ("tests.kit.broken_parsers", "not a factory:x", ":x", 42)
    for wrong in wrong_ones:
        with pytest.raises(ValueError, match=re.escape("'package.module:callable'")):
            dataclasses.replace(PARSER_SAMPLES, factory=wrong)  # type: ignore[arg-type]

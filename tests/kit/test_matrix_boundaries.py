"""The boundary catalogue (issue 37 §1) reaches the implementations: each breaker of
:mod:`tests.kit.broken_boundaries` breaks only on a catalogue value — an integer of more digits
than ``int`` converts to ``str``, ``NaN``/``Infinity`` or nesting between 101 and the recursion
limit, prose with ``ß``/``ﬁ``/``İ`` before the call, a store holding more than a page of runs, a
batch past 4 KiB — and is caught; its correct twin keeps every promise.

Each breaker was reported conformant by the kit before its probes swept the catalogue (this
matrix, run on the kit as it was, found every promise held for every one of them).
"""

from __future__ import annotations

import re
import textwrap

import pytest

from polyloop.testing import BUILTIN_SUITES
from tests.kit import _sandbox
from tests.kit.test_matrix_store_depth import _judge, _s

ACROSS = "is_deterministic_across_processes"
_RAISED = "parse\\(\\) raised {}.* on ModelReply"

#: parser -> {promise: the text its failure shows}; a twin breaks nothing.
PARSERS: tuple[tuple[str, dict[str, str]], ...] = (
    ("CatchesOnlyDecodeErrors", {"never_raises": _RAISED.format("ValueError: Exceeds the limit")}),
    ("CatchesEveryValueError", {}),
    (
        "RefusesConstantsAndDepthLoudly",
        {
            "never_raises": _RAISED.format(
                "StrictJsonError: (NaN|-?Infinity) is not JSON|arguments nest"
            )
        },
    ),
    ("RefusesConstantsAndDepthQuietly", {}),
    (
        "LimitsDepthLoudly",
        {"never_raises": _RAISED.format("StrictJsonError: arguments nest deeper than 100")},
    ),
    ("LimitsDepthQuietly", {}),
    (
        "FindsTheCallOnFoldedText",
        {"parses_golden_samples": "characters of prose before"},
    ),
    ("FindsTheCallOnOriginalText", {}),
)

_SAMPLES = """testing.ParserSamples(
    action_reply=ModelReply(text=broken_parser_axes.GOLDEN[0][0]),
    invalid_reply=ModelReply(text="no call here"),
    final_reply=ModelReply(text='{"final": "done"}'),
    golden=broken_parser_axes.GOLDEN,
    golden_variations={"whitespace", "prose_before", "prose_after", "argument_text"},
)"""


def _parser_source(impl: str) -> str:
    return (
        f"class Test{impl}(testing.DecisionParserContract):\n"
        "    @pytest.fixture\n"
        "    def decision_parser(self):\n"
        f"        return broken_boundaries.{impl}()\n"
        "    @pytest.fixture\n"
        "    def parser_samples(self):\n"
        f"        return {_SAMPLES.replace(chr(10), chr(10) + '        ')}\n"
    )


def _parser_problems(
    impl: str, breaks: dict[str, str], outcomes: dict[tuple[str, str], _sandbox.TestOutcome]
) -> list[str]:
    problems = []
    for spec in BUILTIN_SUITES["decision_parser"].promises():
        got = outcomes.get((f"Test{impl}", spec.test_name))
        if got is None:
            problems.append(f"{impl}: {spec.name} did not run")
            continue
        want = "failed" if spec.name in breaks else "skipped" if spec.name == ACROSS else "passed"
        if got.outcome != want:
            problems.append(f"{impl} {spec.name}: {got.outcome}, not {want}\n{got.longrepr}")
        elif want == "failed" and not re.search(breaks[spec.name], got.longrepr, re.S):
            problems.append(f"{impl} {spec.name} failed for another reason:\n{got.longrepr}")
    return problems


@pytest.mark.slow  # the kit's mutant matrix: CI's slow step (README)
def test_each_boundary_parser_is_caught_and_its_twin_is_clean(pytester: pytest.Pytester) -> None:
    body = (
        "from polyloop import ModelReply\n"
        "from tests.kit import broken_boundaries, broken_parser_axes\n\n"
        + "\n\n".join(_parser_source(impl) for impl, _ in PARSERS)
    )
    outcomes = _sandbox.run_sandbox(pytester, body)
    problems = [p for impl, breaks in PARSERS for p in _parser_problems(impl, breaks, outcomes)]
    assert not problems, "\n\n".join(problems)


_BACKWARDS = "read at once after commit_now|committed through commit_now"
STORES = (
    _s("ListsOnePage", False, {"lists_its_runs": "holding 101 started runs.*a first page"}),
    _s("ListsEveryRun", False, {}),
    _s(
        "BatchesOver4KiBBackwards",
        False,
        {
            "inline_commit_is_atomic_fenced_and_durable": _BACKWARDS,
            "inline_commit_matches_append_many": _BACKWARDS,
        },
    ),
    _s("DeclinesBatchesOver4KiB", False, {}),
    _s(
        "DropsARecordPast4KiB",
        False,
        {"batches_and_single_appends_interleave_in_order": "calls of \\[1, 3, 3"},
    ),
    _s("WritesBigBatchesInOne", False, {}),
)

#: The promises whose probes hold many runs or send large batches, and the other batch
#: promises (which must stay untouched by them).
_PROBED = (
    "lists_its_runs",
    "batch_is_atomic",
    "batch_is_fenced",
    "batches_and_single_appends_interleave_in_order",
    "inline_commit_declines_without_effect",
    "inline_commit_is_atomic_fenced_and_durable",
    "inline_commit_matches_append_many",
)


def _store_source(impl: str) -> str:
    return textwrap.dedent(f"""
        class Test{impl}(testing.RunStoreContract):
            @pytest.fixture
            def run_store(self):
                return broken_boundaries.{impl}()
        """)


@pytest.mark.slow  # the kit's mutant matrix: CI's slow step (README)
def test_each_boundary_store_is_caught_and_its_twin_is_clean(pytester: pytest.Pytester) -> None:
    body = "from tests.kit import broken_boundaries\n" + "\n".join(
        _store_source(store.impl) for store in STORES
    )
    outcomes = _sandbox.run_sandbox(pytester, body, "-k", " or ".join(_PROBED))
    problems = _judge(outcomes, STORES, set(_PROBED))  # type: ignore[arg-type]
    assert not problems, "\n\n".join(problems)

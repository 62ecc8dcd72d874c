"""The opt-in promises can fail too: their own broken-implementation matrix.

Five promises are checked only when the implementer hands over one more sample (a store
factory, a failing-client factory, an action to refuse, a hook that breaks the environment);
without it they skip as ``unverifiable`` (``test_matrix.py`` checks that). Here every opt-in
promise runs with its sample: the correct implementations keep them all, each broken one fails
exactly the promises it is written to break, for the reason it is written to break them.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import pytest

from polyloop.testing import BUILTIN_SUITES
from tests.kit._sandbox import run_sandbox

OPT_IN: dict[str, frozenset[str]] = {
    # Its breakers and their twins: test_matrix_parsers.py.
    "decision_parser": frozenset({"is_deterministic_across_processes"}),
    "run_store": frozenset({"atomic_append", "prefix_durability"}),
    "model_client": frozenset({"failure_is_an_exception"}),
    "action_executor": frozenset({"status_trigger_conditions", "failure_is_a_return_value"}),
}


@dataclass(frozen=True)
class Case:
    impl: str
    samples: str
    breaks: dict[str, str] = field(default_factory=dict)  # promise → text its failure shows
    not_applicable: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SeamCases:
    suite: str
    seam_expr: str
    samples_fixture: str
    cases: tuple[Case, ...]


def _store(impl: str) -> str:
    return f'testing.StoreSamples(factory="tests.kit.broken_stores:{impl}")'


_TORN = "is not a prefix of what was appended|raised ValueError"
CASES: dict[str, SeamCases] = {
    "run_store": SeamCases(
        "RunStoreContract",
        "broken.MemoryStore()",
        "store_samples",
        (
            Case("LineFileStore", _store("LineFileStore")),
            Case("SqliteLogStore", _store("SqliteLogStore")),
            Case(
                "ForgetsToCommit",
                _store("ForgetsToCommit"),
                {"prefix_durability": "reopened through the factory while the first is open"},
            ),
            Case(
                "NonAtomicAppend",
                _store("NonAtomicAppend"),
                {"atomic_append": _TORN, "prefix_durability": "raised ValueError"},
            ),
            Case(
                "NotDurable",
                _store("NotDurable"),
                {"prefix_durability": "reopened through the factory"},
            ),
            Case(
                "InMemory",
                "testing.StoreSamples(in_memory=True)",
                not_applicable=OPT_IN["run_store"],
            ),
        ),
    ),
    "model_client": SeamCases(
        "ModelClientContract",
        "broken.ReferenceModel()",
        "model_samples",
        (
            Case("HttpModel", "broken.opt_in_model_samples(broken.HttpModel)"),
            Case(
                "ErrorTextOn500",
                "broken.opt_in_model_samples(broken.ErrorTextOn500)",
                {"failure_is_an_exception": "HTTP 500 .*returned ModelReply"},
            ),
            Case(
                "HangsPastItsBound",
                "broken.opt_in_model_samples(broken.HangsPastItsBound)",
                {"failure_is_an_exception": "never-replies.*still running after failure_bound_s"},
            ),
        ),
    ),
    "action_executor": SeamCases(
        "ActionExecutorContract",
        "",
        "action_samples",
        (
            Case("SessionExecutor", "broken.OPT_IN_ACTION_SAMPLES"),
            Case(
                "RaisesWhenSessionGone",
                "broken.OPT_IN_ACTION_SAMPLES",
                {"failure_is_a_return_value": "execute\\(\\) raised ConnectionError"},
            ),
            Case(
                "RunsRefusedActions",
                "broken.OPT_IN_ACTION_SAMPLES",
                {"status_trigger_conditions": "returned status executed, not not_executed"},
            ),
            Case(
                "NeverRefuses",
                "dataclasses.replace(broken.OPT_IN_ACTION_SAMPLES, refused=None, "
                "never_refuses=True)",
                not_applicable=frozenset({"status_trigger_conditions"}),
            ),
        ),
    ),
}


def _source(seam: str, cases: SeamCases, case: Case) -> str:
    impl = cases.seam_expr or f"broken.{case.impl}()"
    if case.impl == "NeverRefuses":
        impl = "broken.SessionExecutor()"
    return textwrap.dedent(f"""
        class Test{case.impl}(testing.{cases.suite}):
            @pytest.fixture
            def {seam}(self):
                return {impl}

            @pytest.fixture
            def {cases.samples_fixture}(self):
                return {case.samples}
        """)


@pytest.mark.parametrize("seam", sorted(CASES))
def test_each_opt_in_promise_is_kept_by_the_correct_and_broken_by_the_broken(
    pytester: pytest.Pytester, seam: str
) -> None:
    import re

    cases = CASES[seam]
    broken_somewhere = set().union(*(case.breaks for case in cases.cases))
    assert broken_somewhere == OPT_IN[seam], "every opt-in promise needs a breaker"
    assert {spec.name for spec in BUILTIN_SUITES[seam].promises()} >= OPT_IN[seam]
    body = "import dataclasses\n" + "\n".join(_source(seam, cases, c) for c in cases.cases)
    outcomes = run_sandbox(pytester, body, "-k", " or ".join(sorted(OPT_IN[seam])))

    problems: list[str] = []
    for case in cases.cases:
        ran = {test for (cls, test) in outcomes if cls == f"Test{case.impl}"}
        if ran != {f"test_{name}" for name in OPT_IN[seam]}:
            problems.append(f"{case.impl}: ran {sorted(ran)}")
        for name in sorted(OPT_IN[seam]):
            got = outcomes[(f"Test{case.impl}", f"test_{name}")]
            if name in case.not_applicable:
                want = "skipped"
            else:
                want = "failed" if name in case.breaks else "passed"
            if got.outcome != want:
                problems.append(f"{case.impl} {name}: {got.outcome}, not {want}\n{got.longrepr}")
            elif name in case.breaks and not re.search(case.breaks[name], got.longrepr):
                problems.append(f"{case.impl} {name} failed for another reason:\n{got.longrepr}")
            elif want == "skipped" and "not applicable" not in got.longrepr:
                problems.append(f"{case.impl} {name} skipped, not as not_applicable")
    assert not problems, "\n\n".join(problems)

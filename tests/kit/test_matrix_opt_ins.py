"""The opt-in promises can fail too: their own broken-implementation matrix.

Some promises are checked only when the implementer hands over one more sample (a store
factory, a failing-client factory, an action to refuse, a hook that breaks the environment, a
sink's delivery read back);
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
    "decision_parser": frozenset({"is_deterministic_across_processes", "parses_golden_samples"}),
    "run_store": frozenset({"atomic_append", "prefix_durability", "survives_power_loss"}),
    "model_client": frozenset(
        {"failure_is_an_exception", "reads_golden_responses", "sends_golden_requests"}
    ),
    "action_executor": frozenset(
        {
            "status_trigger_conditions",
            "failure_is_a_return_value",
            "environment_recovers_when_restored",
            "every_call_returns_env_error_while_broken",
            "truncated_chars_counts_what_was_cut",
            "cancelled_action_does_not_leak",
        }
    ),
    "event_sink": frozenset({"delivers_each_event_exactly_once"}),
}
#: Opt-ins whose breakers and twins are in another matrix: the power-loss probe's in
#: test_matrix_store_depth.py (its breakers need a store that syncs some things and not others).
ELSEWHERE: dict[str, frozenset[str]] = {"run_store": frozenset({"survives_power_loss"})}


@dataclass(frozen=True)
class Case:
    impl: str
    samples: str
    breaks: dict[str, str] = field(default_factory=dict)  # promise → text its failure shows
    not_applicable: frozenset[str] = frozenset()
    impl_expr: str = ""  # the implementation, when not `broken.<impl>()`
    without: frozenset[str] = frozenset()  # opt-ins whose sample it does not give: unverifiable


@dataclass(frozen=True)
class SeamCases:
    suite: str
    seam_expr: str
    samples_fixture: str
    cases: tuple[Case, ...]


def _store(impl: str) -> str:
    return f'testing.StoreSamples(factory="tests.kit.broken_stores:{impl}")'


# The executor cases of issue #10 give neither restore_environment nor echo.
_NEW_EXECUTOR_OPT_INS = frozenset(
    {
        "environment_recovers_when_restored",
        "every_call_returns_env_error_while_broken",
        "truncated_chars_counts_what_was_cut",
        "cancelled_action_does_not_leak",
    }
)
_NO_LEAK_SAMPLE = frozenset({"cancelled_action_does_not_leak"})
# The threaded executors give keeps_printing only.
_NO_BREAK_SAMPLES = (_NEW_EXECUTOR_OPT_INS - _NO_LEAK_SAMPLE) | {"failure_is_a_return_value"}
# Cases that give no golden responses or requests; those that give golden requests only.
_NO_GOLDEN = frozenset({"reads_golden_responses", "sends_golden_requests"})
_NO_REQUESTS = frozenset({"sends_golden_requests"})
_REQUESTS_ONLY = frozenset({"failure_is_an_exception", "reads_golden_responses"})
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
            Case(
                "HttpModel",
                "broken_model_axes.golden_samples(broken.HttpModel)",
                without=_NO_REQUESTS,
            ),
            Case(
                "ErrorTextOn500",
                "broken.opt_in_model_samples(broken.ErrorTextOn500)",
                {"failure_is_an_exception": "HTTP 500 .*returned ModelReply"},
                without=_NO_GOLDEN,
            ),
            Case(
                "HangsPastItsBound",
                "broken.opt_in_model_samples(broken.HangsPastItsBound)",
                {"failure_is_an_exception": "never-replies.*still running after failure_bound_s"},
                without=_NO_GOLDEN,
            ),
            Case(
                "ReadsTheLastChoice",
                "broken_model_axes.golden_samples(broken_model_axes.ReadsTheLastChoice)",
                {"reads_golden_responses": r"golden_responses\[1\].*'the chosen one'"},
                impl_expr="broken.ReferenceModel()",
                without=_NO_REQUESTS,
            ),
            Case(
                "SendsTheRequest",
                "broken_requests.request_samples(broken_requests.SendsTheRequest)",
                impl_expr="broken.ReferenceModel()",
                without=_REQUESTS_ONLY,
            ),
            Case(
                "DropsTemperature",
                "broken_requests.request_samples(broken_requests.DropsTemperature)",
                {"sends_golden_requests": r"body\.temperature: missing"},
                impl_expr="broken.ReferenceModel()",
                without=_REQUESTS_ONLY,
            ),
        ),
    ),
    "action_executor": SeamCases(
        "ActionExecutorContract",
        "",
        "action_samples",
        (
            Case("SessionExecutor", "broken.OPT_IN_ACTION_SAMPLES", without=_NEW_EXECUTOR_OPT_INS),
            Case(
                "RaisesWhenSessionGone",
                "broken.OPT_IN_ACTION_SAMPLES",
                {"failure_is_a_return_value": r"executes_cleanly\) raised ConnectionError"},
                without=_NEW_EXECUTOR_OPT_INS,
            ),
            Case(
                "RunsRefusedActions",
                "broken.OPT_IN_ACTION_SAMPLES",
                {"status_trigger_conditions": "returned status executed, not not_executed"},
                without=_NEW_EXECUTOR_OPT_INS,
            ),
            Case(
                "NeverRefuses",
                "dataclasses.replace(broken.OPT_IN_ACTION_SAMPLES, refused=None, "
                "never_refuses=True)",
                not_applicable=frozenset({"status_trigger_conditions"}),
                without=_NEW_EXECUTOR_OPT_INS,
            ),
            # Issue 21: recovery and truthful counts (tests/kit/test_executor_sequences.py runs
            # every executor of broken_executors through the whole suite).
            Case(
                "ToolboxExecutor",
                "broken_executors.SAMPLES",
                impl_expr="broken_executors.ToolboxExecutor()",
                without=_NO_LEAK_SAMPLE,
            ),
            Case(
                "NeverRecoversAfterRestore",
                "broken_executors.SAMPLES",
                {"environment_recovers_when_restored": "does not recover with its environment"},
                impl_expr="broken_executors.NeverRecoversAfterRestore()",
                without=_NO_LEAK_SAMPLE,
            ),
            Case(
                "AnswersFromStaleReplica",
                # break_lasts without a restore hook: only the lasting-break promise applies
                "dataclasses.replace(broken_executors.SAMPLES, restore_environment=None, "
                "break_lasts=True)",
                {"every_call_returns_env_error_while_broken": "came back executed, not env_error"},
                impl_expr="broken_executors.AnswersFromStaleReplica()",
                without=frozenset({"environment_recovers_when_restored"}) | _NO_LEAK_SAMPLE,
            ),
            # Issue 30: a cancelled action's output in the next observation.
            Case(
                "ThreadedPythonExecutor",
                "broken_executors.THREADED_SAMPLES",
                not_applicable=frozenset({"status_trigger_conditions"}),
                impl_expr="broken_executors.ThreadedPythonExecutor()",
                without=_NO_BREAK_SAMPLES,
            ),
            Case(
                "SharedOutputThreadedExecutor",
                "broken_executors.THREADED_SAMPLES",
                {"cancelled_action_does_not_leak": "the output of a cancelled action leaked"},
                not_applicable=frozenset({"status_trigger_conditions"}),
                impl_expr="broken_executors.SharedOutputThreadedExecutor()",
                without=_NO_BREAK_SAMPLES,
            ),
            Case(
                "CountsCutBytes",
                "broken_executors.SAMPLES",
                {"truncated_chars_counts_what_was_cut": "characters truncated"},
                impl_expr="broken_executors.CountsCutBytes()",
                without=_NO_LEAK_SAMPLE,
            ),
        ),
    ),
}


_SHIPPED = "testing.EventSinkSamples(read_back=broken.read_shipped)"
_DELIVERY = "delivers_each_event_exactly_once"
CASES["event_sink"] = SeamCases(
    "EventSinkContract",
    "",
    "sink_samples",
    (
        Case("BatchingShipper", _SHIPPED),
        Case("SwapsBufferAfterSend", _SHIPPED, {_DELIVERY: "events were never delivered"}),
        Case("ResendsLastBatchOnFlush", _SHIPPED, {_DELIVERY: "delivered more than once"}),
        Case("CapsLongFields", _SHIPPED, {_DELIVERY: "delivered changed"}),
        Case("ReplacesUnencodableChars", _SHIPPED, {_DELIVERY: "delivered changed"}),
        Case("ReordersIntColumns", _SHIPPED, {_DELIVERY: "delivered changed"}),
        Case(
            "DropsEverything",
            "testing.EventSinkSamples(delivers_nothing=True)",
            not_applicable=frozenset({_DELIVERY}),
        ),
    ),
)


def _source(seam: str, cases: SeamCases, case: Case) -> str:
    impl = case.impl_expr or cases.seam_expr or f"broken.{case.impl}()"
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


@pytest.mark.slow  # the kit's mutant matrix: CI's slow step (README)
@pytest.mark.parametrize("seam", sorted(CASES))
def test_each_opt_in_promise_is_kept_by_the_correct_and_broken_by_the_broken(
    pytester: pytest.Pytester, seam: str
) -> None:
    import re

    cases = CASES[seam]
    here = OPT_IN[seam] - ELSEWHERE.get(seam, frozenset())
    broken_somewhere = set().union(*(case.breaks for case in cases.cases))
    assert broken_somewhere == here, "every opt-in promise needs a breaker"
    assert {spec.name for spec in BUILTIN_SUITES[seam].promises()} >= OPT_IN[seam]
    body = (
        "import dataclasses\n"
        "from tests.kit import broken_executors, broken_model_axes, broken_requests\n"
        + "\n".join(_source(seam, cases, c) for c in cases.cases)
    )
    outcomes = run_sandbox(pytester, body, "-k", " or ".join(sorted(here)))

    problems: list[str] = []
    for case in cases.cases:
        ran = {test for (cls, test) in outcomes if cls == f"Test{case.impl}"}
        if ran != {f"test_{name}" for name in here}:
            problems.append(f"{case.impl}: ran {sorted(ran)}")
        for name in sorted(here):
            got = outcomes[(f"Test{case.impl}", f"test_{name}")]
            if name in case.not_applicable or name in case.without:
                want = "skipped"
            else:
                want = "failed" if name in case.breaks else "passed"
            if got.outcome != want:
                problems.append(f"{case.impl} {name}: {got.outcome}, not {want}\n{got.longrepr}")
            elif name in case.breaks and not re.search(case.breaks[name], got.longrepr):
                problems.append(f"{case.impl} {name} failed for another reason:\n{got.longrepr}")
            elif name in case.without and "cannot be checked here" not in got.longrepr:
                problems.append(f"{case.impl} {name} skipped, not as unverifiable")
            elif name in case.not_applicable and "not applicable" not in got.longrepr:
                problems.append(f"{case.impl} {name} skipped, not as not_applicable")
    assert not problems, "\n\n".join(problems)

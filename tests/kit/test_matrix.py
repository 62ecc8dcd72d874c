"""Every checked promise can fail: the broken-implementation matrix.

For each seam, one pytester sandbox runs the reference implementation and every broken one
through the suite. The reference must keep every promise; each broken implementation must fail
exactly the promises it is written to break (``may_break`` lists promises whose Hypothesis
search may or may not hit its defect on a given seed); and every checked promise of the
catalogue must be broken by at least one implementation — a new promise without a breaker
fails this test.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from polyloop.testing import BUILTIN_SUITES
from tests.kit._sandbox import run_sandbox, subclass_source
from tests.kit.test_matrix_opt_ins import OPT_IN


@dataclass(frozen=True)
class Breaker:
    impl: str
    breaks: frozenset[str]
    may_break: frozenset[str] = field(default_factory=frozenset)


def _b(impl: str, breaks: str, may_break: str = "") -> Breaker:
    return Breaker(impl, frozenset(breaks.split()), frozenset(may_break.split()))


@dataclass(frozen=True)
class SeamMatrix:
    reference: str
    samples: tuple[str, str] | None
    breakers: tuple[Breaker, ...]
    # Promises that may fail for any breaker of the seam (a comparison with the reference).
    may_break_all: frozenset[str] = frozenset()


_SHAPES_EXECUTOR = (
    "returns_all_five_fields completion_signal_is_a_plain_boolean "
    "action_error_is_a_normal_observation_not_an_env_error repeated_execution_keeps_status "
    "truncated_chars_is_non_negative"
)

_READS_BACK = (
    "unknown_run_reads_as_empty_log round_trips_every_record_kind preserves_append_order "
    "runs_are_isolated concurrent_appends_to_distinct_runs start_is_exclusive "
    "finished_run_rejects_records rejects_out_of_order_sequence"
)

_BATCHES = "batch_is_atomic batch_is_fenced batches_and_single_appends_interleave_in_order"

MATRIX: dict[str, SeamMatrix] = {
    "action_executor": SeamMatrix(
        reference="ReferenceExecutor",
        samples=("action_samples", "broken.ACTION_SAMPLES"),
        breakers=(
            _b("EnvErrorForActionError", "action_error_is_a_normal_observation_not_an_env_error"),
            _b(
                "EmptyObservationForActionError",
                "action_error_is_a_normal_observation_not_an_env_error",
            ),
            _b("DuckTypedOutcome", _SHAPES_EXECUTOR),
            _b("StatusAsPlainString", _SHAPES_EXECUTOR),
            _b("CompletionSignalIsNone", _SHAPES_EXECUTOR),
            _b("NegativeTruncation", "truncated_chars_is_non_negative"),
            _b("StatusDriftsOnRepeat", "repeated_execution_keeps_status"),
            _b("SwallowsCancellation", "cancellation_propagates_and_is_not_swallowed"),
            _b("CancellationBecomesRuntimeError", "cancellation_propagates_and_is_not_swallowed"),
        ),
    ),
    "decision_parser": SeamMatrix(
        reference="ReferenceParser",
        samples=("parser_samples", "broken.PARSER_SAMPLES"),
        breakers=(
            _b(
                "RaisesOnControlCharacters",
                "never_raises returns_one_of_three_branches is_deterministic "
                "action_is_serialisable",
            ),
            _b("NondeterministicFeedback", "is_deterministic"),
            # quadratic: the promises that parse the kit's long replies point at the time promise
            _b(
                "ReadsTheThoughtWithARegex",
                "parse_time_is_linear never_raises returns_one_of_three_branches "
                "is_deterministic action_is_serialisable",
            ),
            _b(
                "DuckTypedAction",
                "recognises_its_action_sample returns_one_of_three_branches action_is_serialisable",
                "never_raises is_deterministic",
            ),
            _b("BlankFeedback", "invalid_reply_gets_feedback"),
            _b(
                "FeedbackPatchedToNone",
                "invalid_reply_gets_feedback returns_one_of_three_branches never_raises "
                "is_deterministic action_is_serialisable",
            ),
            _b(
                "RecognisesNothing",
                "recognises_its_action_sample action_is_serialisable "
                "recognises_its_final_answer_sample",
            ),
            _b("MissesFinalAnswers", "recognises_its_final_answer_sample"),
            _b("UnserialisableToolArgs", "action_is_serialisable"),
        ),
    ),
    "model_client": SeamMatrix(
        reference="ReferenceModel",
        samples=("model_samples", "broken.MODEL_SAMPLES"),
        breakers=(
            _b("AppendsItsReply", "does_not_mutate_messages"),
            _b("DropsTheSystemMessage", "does_not_mutate_messages"),
            # Each promise checks its own field: one wrong field is not three violations.
            _b("EmptyCallId", "call_id_is_never_empty_string returns_a_model_reply"),
            _b("ReturnsRawText", "returns_a_model_reply"),
            _b("UsageNotFinite", "returns_a_model_reply"),
            _b("ModelSwallowsCancellation", "cancellation_propagates"),
        ),
    ),
    "event_sink": SeamMatrix(
        reference="ReferenceSink",
        samples=None,
        breakers=(
            _b("ChokesOnMissingToolArgs", "accepts_every_event_kind"),
            _b("AsciiOnlySink", "accepts_every_event_kind"),
            _b("NotReentrantSink", "concurrent_emits_are_safe"),
            _b("ReturnsAcknowledgement", "accepts_every_event_kind concurrent_emits_are_safe"),
            _b("SinkSwallowsCancellation", "cancellation_propagates"),
        ),
    ),
    "run_store": SeamMatrix(
        reference="MemoryStore",
        samples=None,
        breakers=(
            _b(
                "ZeroBecomesNone",
                "round_trips_every_record_kind preserves_append_order runs_are_isolated "
                "concurrent_appends_to_distinct_runs finished_run_rejects_records "
                "rejects_out_of_order_sequence batch_is_fenced "
                "batches_and_single_appends_interleave_in_order",
            ),
            _b(
                "EmptyStringBecomesNone",
                "round_trips_every_record_kind preserves_append_order",
                "batches_and_single_appends_interleave_in_order",  # when a reply is drawn
            ),
            _b(
                "StopReasonAsPlainString",
                "finished_run_rejects_records batches_and_single_appends_interleave_in_order",
                "round_trips_every_record_kind",
            ),
            _b("UnknownRunRaises", "unknown_run_reads_as_empty_log"),
            _b(
                "SortsByStepIndex",
                "preserves_append_order batches_and_single_appends_interleave_in_order",
                "round_trips_every_record_kind",
            ),
            _b(
                "IgnoresRunId",
                "runs_are_isolated concurrent_appends_to_distinct_runs lists_its_runs "
                "round_trips_every_record_kind start_is_exclusive preserves_append_order "
                + _BATCHES,
            ),
            _b("LosesConcurrentAppends", "concurrent_appends_to_distinct_runs"),
            _b("IgnoresSequence", "rejects_out_of_order_sequence"),
            _b("SecondStartReplacesLog", "start_is_exclusive rejects_out_of_order_sequence"),
            _b("AppendsAfterFinish", "finished_run_rejects_records"),
            _b("ConflictBeforeOtherErrors", "start_is_exclusive finished_run_rejects_records"),
            # runs_are_isolated lists the runs whose ids look like numbers, too (issue 30).
            _b("ListsNoRuns", "lists_its_runs runs_are_isolated"),
            _b("RunIdsAsTuple", "lists_its_runs runs_are_isolated"),
            _b("ReturnsRecordTuple", _READS_BACK + " " + _BATCHES),
            _b("BatchWritesUntilTheBadRecord", "batch_is_atomic"),
            _b("BatchFencesOnlyItsLastRecord", "batch_is_fenced batch_is_atomic"),
            _b(
                "BatchWrittenBackwards",
                "batches_and_single_appends_interleave_in_order batch_is_fenced "
                "preserves_append_order",  # its size probe writes in batches (issue 30)
            ),
        ),
    ),
}


# --------------------------------------------------------------------------- issue #9
# Deeper probes: cancellation swallowed after a first quick await or only on the erroring
# sample, and the two run-store fences the suite used to miss.


def _extend(seam: str, *breakers: Breaker) -> None:
    MATRIX[seam] = dataclasses.replace(MATRIX[seam], breakers=(*MATRIX[seam].breakers, *breakers))


_EXECUTOR_CANCELLATION = "cancellation_propagates_and_is_not_swallowed"
_extend(
    "action_executor",
    _b("SwallowsCancellationAfterConnecting", _EXECUTOR_CANCELLATION),
    _b("SwallowsCancellationAfterSlowStart", _EXECUTOR_CANCELLATION),
    _b("SwallowsCancellationOnlyWhenTheActionFails", _EXECUTOR_CANCELLATION),
)
_extend("model_client", _b("ModelSwallowsCancellationAfterConnecting", "cancellation_propagates"))
_extend("event_sink", _b("SinkSwallowsCancellationAfterConnecting", "cancellation_propagates"))
_STATEFUL = "behaves_like_the_reference_store"
_extend(
    "run_store",
    _b("FinishedBeforeExists", f"start_is_exclusive {_STATEFUL}"),
    _b("FirstAppendUnfenced", f"rejects_out_of_order_sequence {_STATEFUL}"),
    # It fences append() only; its inherited append_many() leaves that fence behind, so mixing
    # the two (the loop does) is caught too.
    # Issue 21: the run ids of one promise now share all but their last characters, so its
    # shared fence shows in every promise with two runs.
    _b(
        "FenceKeyedByTruncatedRunId",
        f"{_STATEFUL} concurrent_appends_to_distinct_runs runs_are_isolated start_is_exclusive",
        "batches_and_single_appends_interleave_in_order round_trips_every_record_kind",
    ),
    _b("ForgetsAFinishAfterAnotherRunsAppend", _STATEFUL),
    _b("ListsOnlyUnfinishedRuns", _STATEFUL),
)
# The state machine compares everything with the reference store, so it may also catch any
# older store breaker (LosesConcurrentAppends is the exception it cannot see: its calls are
# sequential); test_stateful.py shows which ones it does catch.
MATRIX["run_store"] = dataclasses.replace(MATRIX["run_store"], may_break_all=frozenset({_STATEFUL}))


# --------------------------------------------------------------------------- issue #21, 4 and 7
# Class 4: text the strategies never drew (lone surrogates, events over 64 KiB); each breaker
# kept every promise before and sits beside a twin that stays clean (tests/kit/broken_delivery).
# Class 7: the batching shippers keep every promise checked here — the old kit's verdict — and
# only delivers_each_event_exactly_once, with a read-back, catches them (test_matrix_opt_ins).
_ROUND_TRIP = "round_trips_every_record_kind"
_extend(
    "event_sink",
    _b("EscapingLineShipper", ""),
    _b("StrictUtf8Shipper", "accepts_every_event_kind"),
    _b("DatagramShipper", "accepts_every_event_kind"),
    _b("BatchingShipper", ""),
    _b("SwapsBufferAfterSend", ""),
    _b("ResendsLastBatchOnFlush", ""),
    _b("CapsLongFields", ""),
    _b("ReplacesUnencodableChars", ""),
    _b("ReordersIntColumns", ""),
)
_extend(
    "run_store",
    _b("KeepsRecordText", ""),
    _b("ReplacesUnencodableText", f"{_ROUND_TRIP} {_STATEFUL}"),
    _b("SurrogateEscapeBytes", _ROUND_TRIP),
)


# --------------------------------------------------------------------------- issue #24
# The inline commit (InlineCommitRunStore.commit_now): each breaker keeps append_many correct
# and breaks commit_now only; DeclinesEveryOtherCommit is the correct twin (tests/kit/
# broken_inline). Both comparing promises compare with a twin run, so a reordered batch shows
# in both.
_INLINE_DECLINES = "inline_commit_declines_without_effect"
_INLINE_ATOMIC = "inline_commit_is_atomic_fenced_and_durable"
_INLINE_MATCHES = "inline_commit_matches_append_many"
_extend(
    "run_store",
    _b("DeclinesEveryOtherCommit", ""),
    _b("DeclinesAfterWriting", f"{_INLINE_DECLINES} {_INLINE_ATOMIC} {_INLINE_MATCHES}"),
    _b("InlineCommitUntilTheBadRecord", _INLINE_ATOMIC),
    _b("InlineCommitUnfenced", _INLINE_ATOMIC),
    # Its next call writes what it held, and the awaited twin's commit is such a call.
    _b("CommitsNowButWritesLater", _INLINE_ATOMIC),
    _b("InlineCommitBackwards", f"{_INLINE_ATOMIC} {_INLINE_MATCHES}"),
)


# --------------------------------------------------------------------------- issue #22
# The run index (IndexedRunStore): every breaker here subclasses MemoryStore, which keeps the
# index, so a breaker whose log reads back wrong shows a row that disagrees with it. The
# breakers of the index itself, beside their clean twin, are in test_matrix_store_depth.py.
_INDEX = "index_agrees_with_log"
# An empty label value read back as None; a stop reason read back as a plain str.
_INDEX_CAUGHT = frozenset({"EmptyStringBecomesNone", "StopReasonAsPlainString"})
MATRIX["run_store"] = dataclasses.replace(
    MATRIX["run_store"],
    breakers=tuple(
        dataclasses.replace(
            b,
            breaks=b.breaks | {_INDEX} if b.impl in _INDEX_CAUGHT else b.breaks,
            may_break=b.may_break | {_INDEX},
        )
        for b in MATRIX["run_store"].breakers
    ),
)


def _impl_expr(seam: str, impl: str) -> str:
    return "broken.MemoryStore()" if impl == "MemoryStore" else f"broken.{impl}()"


@pytest.mark.slow  # the kit's mutant matrix: CI's slow step (README)
@pytest.mark.parametrize("seam", sorted(MATRIX))
def test_each_broken_implementation_fails_its_promise_and_the_reference_keeps_all(
    pytester: pytest.Pytester, seam: str
) -> None:
    suite = BUILTIN_SUITES[seam]
    matrix = MATRIX[seam]
    catalogue = suite.promises()
    # Opt-in promises have their own matrix (test_matrix_opt_ins); without their sample they
    # must skip here as unverifiable.
    opt_in = OPT_IN.get(seam, frozenset())
    checked = {spec.name for spec in catalogue if spec.kind == "checked"} - opt_in
    unverifiable = {spec.name for spec in catalogue if spec.kind == "unverifiable"} | opt_in

    broken_somewhere = set().union(*(b.breaks for b in matrix.breakers))
    assert checked - broken_somewhere == set(), (
        f"checked promises of {seam} with no broken implementation that catches them: "
        f"{sorted(checked - broken_somewhere)}"
    )
    unknown = broken_somewhere - checked
    assert not unknown, f"breakers name promises that are not checked promises: {unknown}"

    impls = [matrix.reference, *(b.impl for b in matrix.breakers)]
    body = "\n\n".join(
        subclass_source(f"Test{impl}", suite.__name__, seam, _impl_expr(seam, impl), matrix.samples)
        for impl in impls
    )
    outcomes = run_sandbox(pytester, body)

    problems: list[str] = []
    for impl in impls:
        ran = {test for (cls, test) in outcomes if cls == f"Test{impl}"}
        if ran != {spec.test_name for spec in catalogue}:
            problems.append(f"{impl}: ran {sorted(ran)}, not the whole catalogue")
    reference = {test: o for (cls, test), o in outcomes.items() if cls == f"Test{matrix.reference}"}
    for spec in catalogue:
        got = reference[spec.test_name]
        want = "skipped" if spec.name in unverifiable else "passed"
        if got.outcome != want and not (
            got.outcome == "skipped" and "not applicable" in got.longrepr
        ):
            problems.append(
                f"reference {matrix.reference}: {spec.id} {got.outcome}\n{got.longrepr}"
            )
    for breaker in matrix.breakers:
        failed = {
            test.removeprefix("test_")
            for (cls, test), o in outcomes.items()
            if cls == f"Test{breaker.impl}" and o.outcome == "failed"
        }
        if not breaker.breaks <= failed:
            problems.append(f"{breaker.impl} was not caught by {sorted(breaker.breaks - failed)}")
        extra = failed - breaker.breaks - breaker.may_break - matrix.may_break_all
        if extra:
            details = "\n".join(
                outcomes[(f"Test{breaker.impl}", f"test_{name}")].longrepr[-600:]
                for name in sorted(extra)
            )
            problems.append(f"{breaker.impl} also failed {sorted(extra)}:\n{details}")
        if failed & unverifiable:
            problems.append(
                f"{breaker.impl} failed an unverifiable promise: {failed & unverifiable}"
            )
    assert not problems, "\n\n".join(problems)

"""The interface the plugin and downstream projects build on: catalogue, hashes, class set-up."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from collections.abc import Mapping
from typing import ClassVar

import pytest

import polyloop
from polyloop import testing
from polyloop.testing import (
    BUILTIN_SUITES,
    KIT_VERSION,
    ActionExecutorContract,
    ActionSamples,
    ContractBase,
    ContractSkip,
    EventSinkContract,
    ModelSamples,
    ParserSamples,
    PromiseSpec,
    RunStoreContract,
    SubclassMisuse,
    parse_skip_reason,
    suite_hash,
)
from polyloop.types import Action, Message, ModelReply, canonical_json

SPEC_CATALOGUE = {
    "action_executor.returns_all_five_fields": "checked",
    "action_executor.completion_signal_is_a_plain_boolean": "checked",
    "action_executor.action_error_is_a_normal_observation_not_an_env_error": "checked",
    "action_executor.repeated_execution_keeps_status": "checked",
    "action_executor.truncated_chars_is_non_negative": "checked",
    "action_executor.cancellation_propagates_and_is_not_swallowed": "checked",
    "action_executor.status_trigger_conditions": "checked",  # with its opt-in sample
    "action_executor.failure_is_a_return_value": "checked",  # with its opt-in sample
    "action_executor.environment_recovers_when_restored": "checked",  # with its opt-in sample
    "action_executor.every_call_returns_env_error_while_broken": "checked",  # opt-in sample
    "action_executor.truncated_chars_counts_what_was_cut": "checked",  # with its opt-in sample
    "action_executor.cancelled_action_does_not_leak": "checked",  # with its opt-in sample
    "action_executor.observation_substitution_happens_in_the_library": "unverifiable",
    "decision_parser.never_raises": "checked",
    "decision_parser.returns_one_of_three_branches": "checked",
    "decision_parser.is_deterministic": "checked",
    "decision_parser.recognises_its_action_sample": "checked",
    "decision_parser.invalid_reply_gets_feedback": "checked",
    "decision_parser.recognises_its_final_answer_sample": "checked",
    "decision_parser.action_is_serialisable": "checked",
    "decision_parser.is_deterministic_across_processes": "checked",  # with its opt-in sample
    "decision_parser.parses_golden_samples": "checked",  # with its opt-in sample
    "decision_parser.parse_time_is_linear": "checked",
    "model_client.returns_a_model_reply": "checked",
    "model_client.call_id_is_never_empty_string": "checked",
    "model_client.does_not_mutate_messages": "checked",
    "model_client.cancellation_propagates": "checked",
    "model_client.failure_is_an_exception": "checked",  # with its opt-in sample
    "model_client.reads_golden_responses": "checked",  # with its opt-in sample
    "model_client.sends_golden_requests": "checked",  # with its opt-in sample
    "event_sink.accepts_every_event_kind": "checked",
    "event_sink.concurrent_emits_are_safe": "checked",
    "event_sink.cancellation_propagates": "checked",
    "event_sink.delivery_failure_is_isolated_by_the_library": "unverifiable",
    "run_store.unknown_run_reads_as_empty_log": "checked",
    "run_store.round_trips_every_record_kind": "checked",
    "run_store.preserves_append_order": "checked",
    "run_store.runs_are_isolated": "checked",
    "run_store.concurrent_appends_to_distinct_runs": "checked",
    "run_store.start_is_exclusive": "checked",
    "run_store.finished_run_rejects_records": "checked",
    "run_store.rejects_out_of_order_sequence": "checked",
    "run_store.lists_its_runs": "checked",
    "run_store.index_agrees_with_log": "checked",
    "run_store.atomic_append": "checked",  # with its opt-in sample
    "run_store.prefix_durability": "checked",  # with its opt-in sample
    "run_store.survives_power_loss": "checked",  # with its opt-in sample, on Linux with strace
}


def _all_promises() -> list[PromiseSpec]:
    return [spec for suite in BUILTIN_SUITES.values() for spec in suite.promises()]


def test_the_catalogue_holds_every_promise_of_the_spec_with_its_kind() -> None:
    kinds = {spec.id: spec.kind for spec in _all_promises()}
    missing = {pid for pid in SPEC_CATALOGUE if pid not in kinds}
    assert not missing
    assert {pid: kinds[pid] for pid in SPEC_CATALOGUE} == SPEC_CATALOGUE


def test_builtin_suites_are_keyed_by_their_seam_and_cover_the_five_seams() -> None:
    assert set(BUILTIN_SUITES) == set(polyloop.ports.SEAM_NAMES)
    for seam, suite in BUILTIN_SUITES.items():
        assert suite.seam == seam
        assert issubclass(suite, ContractBase)
        assert suite.loop_scope == "function"
        assert suite.waive == {}
    samples = {seam: suite.samples_fixture for seam, suite in BUILTIN_SUITES.items()}
    assert samples == {
        "action_executor": "action_samples",
        "decision_parser": "parser_samples",
        "model_client": "model_samples",
        "event_sink": None,
        "run_store": None,
    }
    assert polyloop.__version__ == KIT_VERSION


@pytest.mark.parametrize("seam", sorted(BUILTIN_SUITES))
def test_each_promise_spec_names_its_suites_own_function_and_docstring(seam: str) -> None:
    suite = BUILTIN_SUITES[seam]
    specs = suite.promises()
    assert list(specs) == sorted(specs, key=lambda s: s.id)
    # The suite's own body and its promise families (plain bases it lists: a long suite split).
    test_methods = {name for name in dir(suite) if name.startswith("test_")}
    assert {spec.test_name for spec in specs} == test_methods
    for spec in specs:
        assert spec.id == f"{seam}.{spec.name}"
        assert spec.test_name == f"test_{spec.name}"
        assert spec.function is getattr(suite, spec.test_name)
        assert spec.doc == inspect.cleandoc(spec.function.__doc__ or "")
        assert len(spec.doc.splitlines()) >= 3, f"{spec.id}: state the promise and why"
        assert "fixture" not in spec.doc.split("\n", 1)[0].lower()
        assert seam in inspect.signature(spec.function).parameters, (
            f"{spec.id} does not request the `{seam}` fixture"
        )


def test_suite_hash_is_sha256_of_the_canonical_sorted_id_docstring_pairs() -> None:
    specs = RunStoreContract.promises()
    pairs = sorted([s.id, inspect.cleandoc(s.function.__doc__ or "")] for s in specs)
    expected = "sha256:" + hashlib.sha256(canonical_json(pairs).encode()).hexdigest()
    assert suite_hash(specs) == expected
    assert suite_hash(list(reversed(specs))) == expected
    reworded = (dataclasses.replace(specs[0], doc=specs[0].doc + "!"), *specs[1:])
    assert suite_hash(reworded) != expected


def test_a_subclass_override_is_detectable_and_does_not_change_the_catalogue() -> None:
    class TestOverriding(ActionExecutorContract):
        async def test_returns_all_five_fields(self, action_executor):  # type: ignore[override]
            """Replaced."""

    spec = next(s for s in TestOverriding.promises() if s.name == "returns_all_five_fields")
    assert getattr(TestOverriding, spec.test_name) is not spec.function
    assert TestOverriding.promises() == ActionExecutorContract.promises()
    others = [s for s in TestOverriding.promises() if s is not spec]
    assert all(getattr(TestOverriding, s.test_name) is s.function for s in others)


def test_the_asyncio_mark_goes_on_the_concrete_class_own_pytestmark_only() -> None:
    class TestSessionScoped(RunStoreContract):
        loop_scope = "session"

    for suite in (*BUILTIN_SUITES.values(), ContractBase):
        assert "pytestmark" not in vars(suite)
    marks = vars(TestSessionScoped)["pytestmark"]
    asyncio_marks = [m for m in marks if m.name == "asyncio"]
    assert [m.kwargs for m in asyncio_marks] == [{"loop_scope": "session"}]
    assert vars(TestSessionScoped)["__test__"] is True
    assert vars(RunStoreContract)["__test__"] is False


def test_bad_class_settings_are_refused_at_class_creation_naming_class_and_id() -> None:
    with pytest.raises(
        SubclassMisuse,
        match=r"test_interface\.py:\d+: \S*TestTypo: waive names unknown promise 'run_store\.nope'",
    ):

        class TestTypo(RunStoreContract):
            waive: ClassVar[Mapping[str, str]] = {"run_store.nope": "because"}

    with pytest.raises(
        SubclassMisuse,
        match=r"TestUnverifiable: waive names 'event_sink\.delivery_failure_is_.*unverifiable",
    ):

        class TestUnverifiable(EventSinkContract):
            waive: ClassVar[Mapping[str, str]] = {
                "event_sink.delivery_failure_is_isolated_by_the_library": "cannot"
            }

    with pytest.raises(
        SubclassMisuse,
        match=r"TestNoReason: waive\['run_store\.lists_its_runs'\]: a waiver needs a reason",
    ):

        class TestNoReason(RunStoreContract):
            waive: ClassVar[Mapping[str, str]] = {"run_store.lists_its_runs": " "}

    with pytest.raises(
        SubclassMisuse, match=r"test_interface\.py:\d+: \S*TestScope: loop_scope must be one of"
    ):

        class TestScope(RunStoreContract):
            loop_scope = "forever"

    with pytest.raises(TypeError, match=r"TestDirect inherits ContractBase directly"):

        class TestDirect(ContractBase):
            pass


def test_a_bad_waiver_on_a_class_without_source_names_its_module() -> None:
    source = "class TestMade(RunStoreContract):\n    waive = {'run_store.lists_its_runs': ''}\n"
    namespace = {"__name__": "made_by_exec", "RunStoreContract": RunStoreContract}
    with pytest.raises(SubclassMisuse) as raised:
        exec(compile(source, "<made>", "exec"), namespace)
    assert str(raised.value).startswith(
        "made_by_exec: TestMade: waive['run_store.lists_its_runs']: a waiver needs a reason"
    )
    assert (raised.value.path, raised.value.line) == ("made_by_exec", 0)


def test_a_promise_without_a_docstring_is_refused_when_a_suite_is_defined() -> None:
    with pytest.raises(TypeError, match=r"ToolSuite\.test_x has no docstring"):

        class ToolSuite(ContractBase):
            seam = "tool"

            async def test_x(self, tool):
                pass


def test_a_sixth_seam_suite_gets_its_own_catalogue() -> None:
    class CacheContract(ContractBase):
        seam = "cache"

        async def test_get_after_set(self, cache):
            """A value set can be read back.

            Why: a cache that forgets is a slow database.
            """

        @testing.unverifiable_promise
        async def test_survives_restart(self, cache):
            """Values survive a restart.

            Why: cannot be checked in one process.
            """

    ids = [(s.id, s.kind) for s in CacheContract.promises()]
    assert ids == [("cache.get_after_set", "checked"), ("cache.survives_restart", "unverifiable")]
    assert vars(CacheContract)["__test__"] is False


def test_contract_skip_carries_its_parts_and_its_message_parses_back() -> None:
    skip = ContractSkip(
        outcome="not_applicable", promise="P holds", why="no await point", verify_yourself="do X"
    )
    assert isinstance(skip, pytest.skip.Exception)
    assert (skip.outcome, skip.promise, skip.why, skip.verify_yourself) == (
        "not_applicable",
        "P holds",
        "no await point",
        "do X",
    )
    assert skip.msg == (
        "P holds — not applicable to this implementation: no await point — verify it yourself: do X"
    )
    for text in (skip.msg, f"Skipped: {skip.msg}", f"SKIPPED [1] tests/x.py:12: {skip.msg}"):
        assert parse_skip_reason(text) == skip.as_dict()
    assert parse_skip_reason("Skipped: no database") is None
    assert parse_skip_reason(None) is None


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"outcome": "maybe"}, "outcome must be"),
        ({"why": ""}, "why must be a non-empty str"),
        ({"promise": "a — verify it yourself: b"}, "must not contain"),
    ],
)
def test_contract_skip_refuses_parts_it_could_not_render_readably(
    kwargs: dict[str, str], problem: str
) -> None:
    parts = {"outcome": "unverifiable", "promise": "p", "why": "w", "verify_yourself": "v"}
    with pytest.raises(ValueError, match=problem):
        ContractSkip(**{**parts, **kwargs})  # type: ignore[arg-type]


def test_samples_refuse_values_of_the_wrong_type_naming_the_field() -> None:
    action = Action(text="x")
    with pytest.raises(TypeError, match=r"ActionSamples\.executes_but_errors must be a polyloop"):
        ActionSamples(executes_cleanly=action, executes_but_errors="rm -rf /")  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"ParserSamples\.final_reply must be a polyloop ModelReply"
    ):
        ParserSamples(
            action_reply=ModelReply(text="a"),
            invalid_reply=ModelReply(text="b"),
            final_reply="FINAL",  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match="at least one Message"):
        ModelSamples(messages=[])
    with pytest.raises(TypeError, match=r"messages\[1\] must be a polyloop Message"):
        ModelSamples(messages=[Message(role="user", content="hi"), "hello"])  # type: ignore[list-item]
    samples = ModelSamples(messages=[Message(role="user", content="hi")])
    assert isinstance(samples.messages, tuple)


def test_the_records_fixture_type_exposes_the_library_types() -> None:
    records = testing.RecordTypes()
    assert records.action_status.EXECUTED is polyloop.ActionStatus.EXECUTED
    assert records.stop_reason.CANCELLED is polyloop.StopReason.CANCELLED
    assert records.types is polyloop.types
    assert records.ActionOutcome is polyloop.ActionOutcome
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = records.Nope


def test_the_runtime_core_does_not_import_the_kit() -> None:
    import subprocess
    import sys

    code = (
        "import sys, polyloop, polyloop.stores, polyloop.events, polyloop.models; "
        "bad = [m for m in ('polyloop.testing', 'pytest', 'hypothesis') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_reference_page_lists_every_promise_with_its_kind() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs/reference/contract-kit.md").read_text()
    for spec in _all_promises():
        assert f"| `{spec.id}` | {spec.kind} |" in page, f"{spec.id} missing from contract-kit.md"


@pytest.mark.parametrize(
    ("expected", "actual", "found"),
    [
        (polyloop.StopReason.CANCELLED, "cancelled", "expected StopReason"),
        (True, 1, "expected bool True, got int 1"),
        (0, None, "expected int 0, got NoneType None"),
        ({"a": [1, 2]}, {"a": [1, 2.0]}, "['a'][1]: expected int"),
        ((1, 2), (1, 2, 3), "expected 2 items, got 3"),
    ],
)
def test_mismatch_sees_type_differences_that_equality_hides(
    expected: object, actual: object, found: str
) -> None:
    from polyloop.testing._shared._shapes import mismatch

    message = mismatch(expected, actual, "value")
    assert message is not None
    assert found in message
    assert mismatch(expected, expected, "value") is None
    assert mismatch(float("nan"), float("nan"), "value") is None

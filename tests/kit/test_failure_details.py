"""What a violation says (issue 30): the sample that broke a promise is named, also when the
implementation raised a ``BaseException``; one input that breaks several promises is shown as
one cause — the first promise names it, the others point at that one."""

from __future__ import annotations

import pytest

from tests.kit._sandbox import run_sandbox, subclass_source

_SAME = "same cause as decision_parser.never_raises: parse() raised SystemExit: 2 on ModelReply("


def test_a_system_exit_out_of_execute_names_the_sample_that_raised_it(
    pytester: pytest.Pytester,
) -> None:
    body = "from tests.kit import broken_executors\n\n" + subclass_source(
        "TestExits",
        "ActionExecutorContract",
        "action_executor",
        "broken_executors.ExitsOnUnknownKey()",
        ("action_samples", "broken_executors.SAMPLES"),
    )
    outcomes = run_sandbox(pytester, body, "-k", "returns_all_five_fields or while_broken")
    five = outcomes[("TestExits", "test_returns_all_five_fields")]
    assert five.outcome == "failed"
    assert "execute(action_samples.executes_but_errors) raised SystemExit: 2" in five.longrepr
    lasting = outcomes[("TestExits", "test_every_call_returns_env_error_while_broken")]
    assert lasting.outcome == "failed"
    assert (
        "(before the break), execute(action_samples.executes_but_errors) raised SystemExit: 2"
        in (lasting.longrepr)
    )


def test_one_input_that_makes_a_parser_exit_is_one_cause_named_once(
    pytester: pytest.Pytester,
) -> None:
    body = "from tests.kit import broken_parsers\n\n" + subclass_source(
        "TestArgparse",
        "DecisionParserContract",
        "decision_parser",
        "broken_parsers.ReadsOptionsWithArgparse()",
        ("parser_samples", "broken.PARSER_SAMPLES"),
    )
    outcomes = run_sandbox(pytester, body, "-k", "not across_processes")
    first = outcomes[("TestArgparse", "test_never_raises")]
    assert first.outcome == "failed"
    assert "parse() raised SystemExit: 2 on ModelReply(text='ACT ls -la\\nACT ls -la'" in (
        first.longrepr
    )
    assert "same cause" not in first.longrepr
    for name in ("returns_one_of_three_branches", "is_deterministic", "action_is_serialisable"):
        got = outcomes[("TestArgparse", f"test_{name}")]
        assert got.outcome == "failed", name
        assert _SAME in got.longrepr, got.longrepr
        assert "could not be judged here" in got.longrepr
    for name in ("recognises_its_action_sample", "invalid_reply_gets_feedback"):
        assert outcomes[("TestArgparse", f"test_{name}")].outcome == "passed", name


_EXITING = """
class ExitingModel(broken.ReferenceModel):
    async def complete(self, messages):
        raise SystemExit(2)


class ExitingSink(broken.ReferenceSink):
    async def emit(self, event):
        raise SystemExit(2)


class TestModel(testing.ModelClientContract):
    @pytest.fixture
    def model_client(self):
        return ExitingModel()

    @pytest.fixture
    def model_samples(self):
        return broken.MODEL_SAMPLES


class TestSink(testing.EventSinkContract):
    @pytest.fixture
    def event_sink(self):
        return ExitingSink()
"""


def test_a_system_exit_out_of_a_model_client_or_a_sink_names_the_call(
    pytester: pytest.Pytester,
) -> None:
    outcomes = run_sandbox(
        pytester, _EXITING, "-k", "returns_a_model_reply or accepts_every_event_kind"
    )
    model = [o for (cls, _), o in outcomes.items() if cls == "TestModel"]
    sink = [o for (cls, _), o in outcomes.items() if cls == "TestSink"]
    assert model, sorted(outcomes)
    assert sink, sorted(outcomes)
    for got in model:
        assert got.outcome == "failed"
        assert "complete([Message(role=" in got.longrepr
        assert "raised SystemExit: 2" in got.longrepr
    for got in sink:
        assert got.outcome == "failed"
        assert "emit() of the event of run" in got.longrepr, got.longrepr
        assert "raised SystemExit: 2" in got.longrepr

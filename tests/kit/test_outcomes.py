"""How promises come out of a real pytest run: waivers, runtime not_applicable, skip reasons.

Each test runs hand-written subclasses in a pytester sandbox with no configuration at all.
"""

from __future__ import annotations

import pytest

from polyloop.testing import BUILTIN_SUITES, parse_skip_reason
from tests.kit._sandbox import BARE_SANDBOX_ARGS, HEADER, SANDBOX_ARGS, run_sandbox, subclass_source

EXECUTOR_SAMPLES = ("action_samples", "broken.ACTION_SAMPLES")
CANCEL = "test_cancellation_propagates_and_is_not_swallowed"


def _executor(class_name: str, impl: str, extra: str = "") -> str:
    source = subclass_source(
        class_name, "ActionExecutorContract", "action_executor", impl, EXECUTOR_SAMPLES
    )
    return source + "".join(f"    {line}\n" for line in extra.splitlines())


def test_not_applicable_is_decided_at_runtime_by_whether_the_call_ever_suspends(
    pytester: pytest.Pytester,
) -> None:
    body = "\n".join(
        [
            _executor("TestFast", "broken.FastExecutor()"),
            _executor("TestAwaits", "broken.ReferenceExecutor()"),
            _executor("TestSwallows", "broken.SwallowsCancellation()"),
            subclass_source(
                "TestFastModel",
                "ModelClientContract",
                "model_client",
                "FastModel()",
                ("model_samples", "broken.MODEL_SAMPLES"),
            ),
        ]
    )
    body = (
        "class FastModel(broken.ReferenceModel):\n"
        "    async def complete(self, messages):\n"
        "        return testing.strategies.ModelReply(text='hi')\n\n" + body
    )
    outcomes = run_sandbox(pytester, body)
    fast = outcomes[("TestFast", CANCEL)]
    assert fast.outcome == "skipped"
    parsed = parse_skip_reason(fast.longrepr)
    assert parsed is not None
    assert parsed["outcome"] == "not_applicable"
    assert "without ever suspending" in parsed["why"]
    assert outcomes[("TestAwaits", CANCEL)].outcome == "passed"
    swallowed = outcomes[("TestSwallows", CANCEL)]
    assert swallowed.outcome == "failed"
    assert "the CancelledError was swallowed" in swallowed.longrepr
    fast_model = outcomes[("TestFastModel", "test_cancellation_propagates")]
    assert fast_model.outcome == "skipped"
    assert "not applicable to this implementation" in fast_model.longrepr


def test_a_waived_failing_promise_is_xfailed_and_a_waived_passing_one_fails_as_stale(
    pytester: pytest.Pytester,
) -> None:
    waive = (
        "waive = {\n"
        "    'action_executor.truncated_chars_is_non_negative': 'legacy counter, ticket 12',\n"
        "    'action_executor.repeated_execution_keeps_status': 'was flaky once',\n"
        "}"
    )
    body = _executor("TestWaived", "broken.NegativeTruncation()", waive)
    outcomes = run_sandbox(pytester, body, "-rxX")
    waived = outcomes[("TestWaived", "test_truncated_chars_is_non_negative")]
    assert waived.outcome == "xfailed"
    assert waived.longrepr == "waived: legacy counter, ticket 12"
    stale = outcomes[("TestWaived", "test_repeated_execution_keeps_status")]
    assert stale.outcome == "xpassed"
    assert "[XPASS(strict)] waived: was flaky once" in stale.longrepr
    assert outcomes[("TestWaived", "test_returns_all_five_fields")].outcome == "passed"


def test_a_plain_run_shows_each_unverifiable_promise_as_a_three_part_skip_reason(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_downstream=HEADER
        + subclass_source(
            "TestMyStore", "RunStoreContract", "run_store", "broken.MemoryStore()", None
        )
    )
    result = pytester.runpytest_inprocess(*SANDBOX_ARGS, "-rs")
    # The two crash promises (no factory) and power-loss durability (never checkable here);
    # MemoryStore offers commit_now, so the three inline-commit promises are checked, and the
    # run index, so its promise is too.
    result.assert_outcomes(passed=17, skipped=3)
    skip_lines = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert len(skip_lines) == 3
    for line in skip_lines:
        # where the promise is written: its family of the run-store suite
        assert "polyloop/testing/_run_store/_crash_promises.py" in line
        parts = parse_skip_reason(line)
        assert parts is not None, line
        assert parts["outcome"] == "unverifiable"
        assert " — cannot be checked here: " in line
        assert " — verify it yourself: " in line
        assert "ContractSkip" not in line
    joined = "\n".join(skip_lines)
    assert "a crash during append() leaves the record wholly present or wholly absent" in joined
    assert "once append() returns, the record survives a crash" in joined
    assert "survives a power loss" in joined


def test_unoverridden_fixtures_say_what_to_override_and_what_to_return(
    pytester: pytest.Pytester,
) -> None:
    body = (
        "class TestNothing(testing.ActionExecutorContract):\n    pass\n\n"
        "class TestNoSamples(testing.DecisionParserContract):\n"
        "    @pytest.fixture\n"
        "    def decision_parser(self):\n"
        "        return broken.ReferenceParser()\n"
    )
    pytester.makepyfile(test_missing=HEADER + body)
    result = pytester.runpytest_inprocess(*SANDBOX_ARGS)
    text = result.stdout.str()
    assert "ActionExecutorContract needs the `action_executor` fixture: override it" in text
    assert "DecisionParserContract needs the `parser_samples` fixture" in text
    assert "polyloop.testing.ParserSamples(action_reply=ModelReply(text=...)" in text
    outcomes = result.parseoutcomes()
    executor, parser = (
        len(BUILTIN_SUITES[seam].promises()) for seam in ("action_executor", "decision_parser")
    )
    assert outcomes.get("errors", 0) == executor + parser
    assert "passed" not in outcomes


def test_wrong_samples_and_wrong_seam_objects_get_a_clear_failure(
    pytester: pytest.Pytester,
) -> None:
    body = subclass_source(
        "TestWrong",
        "ActionExecutorContract",
        "action_executor",
        "object()",
        ("action_samples", "{}"),
    )
    outcomes = run_sandbox(pytester, body)
    first = outcomes[("TestWrong", "test_returns_all_five_fields")]
    assert first.outcome == "failed"
    assert "has no `async execute(action) -> ActionOutcome` method" in first.longrepr
    body = subclass_source(
        "TestWrong",
        "ActionExecutorContract",
        "action_executor",
        "broken.ReferenceExecutor()",
        ("action_samples", "{'executes_cleanly': 1}"),
    )
    outcomes = run_sandbox(pytester, body)
    assert (
        "must return a polyloop.testing.ActionSamples, got dict"
        in outcomes[("TestWrong", "test_returns_all_five_fields")].longrepr
    )


def test_suites_run_in_strict_mode_with_no_configuration_and_honour_loop_scope(
    pytester: pytest.Pytester,
) -> None:
    body = (
        "import pytest_asyncio\n"
        "from polyloop.stores import MemoryStore\n\n"
        "class TestClassScopedStore(testing.RunStoreContract):\n"
        "    loop_scope = 'class'\n\n"
        "    @pytest_asyncio.fixture(scope='class', loop_scope='class')\n"
        "    async def run_store(self):\n"
        "        async with MemoryStore() as store:\n"
        "            yield store\n\n"
        + subclass_source(
            "TestParser",
            "DecisionParserContract",
            "decision_parser",
            "broken.ReferenceParser()",
            ("parser_samples", "broken.PARSER_SAMPLES"),
        )
    )
    pytester.makepyfile(test_strict=HEADER + body)
    # No `-o asyncio_default_fixture_loop_scope` here: exactly what a user without config has
    # (only pytest-asyncio's notice about that unset option is silenced).
    result = pytester.runpytest_inprocess(
        *BARE_SANDBOX_ARGS, "-W", "ignore:The configuration option:DeprecationWarning"
    )
    # Skipped: the store's three crash and power-loss promises (no StoreSamples), the parser's
    # cross-process promise (no factory in its samples) and its golden one (no golden samples).
    result.assert_outcomes(passed=17 + 8, skipped=3 + 2)
    text = result.stdout.str()
    assert "not an async function" not in text
    assert "not natively supported" not in text


def test_a_violated_hypothesis_promise_shows_its_falsifying_example(
    pytester: pytest.Pytester,
) -> None:
    body = subclass_source(
        "TestLossy", "RunStoreContract", "run_store", "broken.EmptyStringBecomesNone()", None
    )
    # Only this promise: another Hypothesis promise run before it (behaves_like_the_reference_
    # store) changes which example is found, and some are printed as the builds() call.
    outcomes = run_sandbox(pytester, body, "-k", "round_trips")
    failure = outcomes[("TestLossy", "test_round_trips_every_record_kind")]
    assert failure.outcome == "failed"
    assert "Draw 1 (records): (RunStarted(" in failure.longrepr
    assert "expected str '', got NoneType None" in failure.longrepr

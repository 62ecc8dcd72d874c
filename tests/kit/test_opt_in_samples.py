"""The opt-in samples refuse bad input, and the opt-ins work where a user would put them.

Covers the samples' validation (malformed factory strings, a bound that is not a bound,
contradicting declarations), the factory loader's errors, the "kept by polyloop" skip data, the
crash probe with a factory defined in a user's conftest, and the reference page's complete
example.
"""

from __future__ import annotations

import asyncio
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from polyloop import Action, Message, ModelReply
from polyloop.cli._import_path import BadImportPath, load
from polyloop.models import ScriptedModel
from polyloop.testing import (
    ActionSamples,
    ContractSkip,
    GoldenRequest,
    ModelClientContract,
    ModelSamples,
    StoreSamples,
    kept_by_polyloop,
    parse_skip_reason,
)
from polyloop.testing._run_store._crash_writer import FactoryError, load_factory
from tests.conftest import require_extra
from tests.kit._sandbox import SANDBOX_ARGS, run_sandbox

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = [Message(role="user", content="hi")]
CLEAN = Action(text="ok")


@pytest.mark.parametrize(
    "factory",
    ["", "module", "module:", ":callable", "a b:c", "pkg.mod:call able", "pkg..mod:f", "m:f:g"],
)
def test_a_store_factory_that_is_not_module_colon_callable_is_refused(factory: str) -> None:
    with pytest.raises(ValueError, match=re.escape("'package.module:callable'")):
        StoreSamples(factory=factory)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, "needs factory="),
        ({"factory": "m:f", "in_memory": True}, "not both"),
        ({"in_memory": "yes"}, "in_memory must be a bool"),
        ({"factory": 42}, "'package.module:callable'"),
    ],
)
def test_store_samples_need_exactly_one_of_factory_and_in_memory(
    kwargs: dict[str, Any], error: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        StoreSamples(**kwargs)


def test_a_well_formed_factory_and_a_dotted_attribute_are_accepted() -> None:
    assert StoreSamples(factory="tests.kit.broken_stores:LineFileStore").factory is not None
    assert load_factory("os.path:join") is __import__("os").path.join


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("tests.kit.no_such_module:f", "no module named 'tests.kit.no_such_module'"),
        ("tests.kit.broken_stores:NoSuchStore", "has no attribute 'NoSuchStore'"),
        ("tests.kit.broken_stores", "expected MODULE:ATTR"),
        ("tests.kit.broken_stores:__doc__", "is a str, not callable"),
    ],
)
def test_a_factory_that_does_not_load_names_what_is_wrong(spec: str, error: str) -> None:
    with pytest.raises(FactoryError, match=re.escape(error)):
        load_factory(spec)


@pytest.mark.parametrize(
    "spec",
    ["tests.kit.no_such_module:f", "tests.kit.broken_stores:NoSuchStore", "os.path", ":f", "x:"],
)
def test_a_factory_path_is_read_by_the_same_rule_as_the_command_lines(spec: str) -> None:
    with pytest.raises(BadImportPath) as command_line:
        load("store factory", spec)
    with pytest.raises(FactoryError) as kit:
        load_factory(spec)
    assert str(kit.value) == str(command_line.value)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"failure_bound_s": 5.0}, "failing_client_factory must be a callable"),
        ({"failing_client_factory": "not callable", "failure_bound_s": 1}, "must be a callable"),
        ({"failing_client_factory": print}, "failure_bound_s must be"),
        ({"failing_client_factory": print, "failure_bound_s": 0}, "failure_bound_s must be"),
        ({"failing_client_factory": print, "failure_bound_s": -1.0}, "failure_bound_s must be"),
        ({"failing_client_factory": print, "failure_bound_s": float("nan")}, "must be"),
        ({"failing_client_factory": print, "failure_bound_s": float("inf")}, "must be"),
        ({"failing_client_factory": print, "failure_bound_s": 61}, "failure_bound_s must be"),
        ({"failing_client_factory": print, "failure_bound_s": True}, "failure_bound_s must be"),
    ],
)
def test_a_failing_client_factory_comes_with_a_finite_bound(
    kwargs: dict[str, Any], error: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        ModelSamples(messages=MESSAGES, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"no_wire_format": 1}, "no_wire_format must be a bool"),
        (
            {
                "no_wire_format": True,
                "failing_client_factory": print,
                "failure_bound_s": 1.0,
                "golden_responses": [({"id": "x"}, ModelReply(text="x"))],
            },
            "not both",
        ),
        (
            {
                "no_wire_format": True,
                "golden_requests": [
                    GoldenRequest(messages=MESSAGES, body={"model": "m"}, client_factory=print)
                ],
            },
            "golden_requests .*not both",
        ),
    ],
)
def test_no_wire_format_is_a_bool_and_excludes_golden_responses(
    kwargs: dict[str, Any], error: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        ModelSamples(messages=MESSAGES, **kwargs)


def test_scripted_model_declares_no_wire_format_and_golden_responses_do_not_apply() -> None:
    # Issue 37: ScriptedModel reads no response body at all, yet reads_golden_responses was
    # unverifiable for it, asking for golden bodies it could never read.
    from tests.contract.test_scripted_model_contract import SCRIPTED_SAMPLES

    promise = ModelClientContract.test_reads_golden_responses
    client = ScriptedModel(["ACT ls"])
    with pytest.raises(ContractSkip) as skip:
        asyncio.run(promise(ModelClientContract(), client, SCRIPTED_SAMPLES))
    assert skip.value.outcome == "not_applicable", str(skip.value)
    assert "ModelSamples(no_wire_format=True)" in skip.value.why, skip.value.why


def test_a_client_with_no_wire_format_sends_no_golden_requests_either() -> None:
    from tests.contract.test_scripted_model_contract import SCRIPTED_SAMPLES

    promise = ModelClientContract.test_sends_golden_requests
    with pytest.raises(ContractSkip) as skip:
        asyncio.run(promise(ModelClientContract(), ScriptedModel(["ACT ls"]), SCRIPTED_SAMPLES))
    assert skip.value.outcome == "not_applicable", str(skip.value)
    assert "sends no request" in skip.value.why, skip.value.why


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"refused": "unknown tool"}, "refused must be a polyloop Action or None"),
        ({"refused": CLEAN, "never_refuses": True}, "not both"),
        ({"never_refuses": 1}, "never_refuses must be a bool"),
        ({"break_environment": "kill it"}, "break_environment must be an async function"),
    ],
)
def test_action_samples_refuse_contradicting_or_mistyped_opt_ins(
    kwargs: dict[str, Any], error: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        ActionSamples(executes_cleanly=CLEAN, executes_but_errors=CLEAN, **kwargs)


def test_a_promise_kept_by_polyloop_carries_its_guarding_tests_through_pickle_and_text() -> None:
    guards = (
        "docs/reference/runtime.md#events",
        "event_sink.delivery_failure_is_isolated_by_the_library",
    )
    with pytest.raises(ContractSkip) as raised:
        kept_by_polyloop(promise="p", why="w", guarded_by=guards)
    skip = raised.value
    assert skip.outcome == "unverifiable"
    assert skip.kept_by == guards
    assert skip.as_dict()["kept_by"] == ", ".join(guards)
    assert pickle.loads(pickle.dumps(skip)).kept_by == guards
    parts = parse_skip_reason(str(skip.msg))
    assert parts is not None
    assert parts["kept_by"] == ", ".join(guards)


@pytest.mark.parametrize(
    "kept_by",
    [("no reference",), ["docs/a.md"], ("docs/a.md, docs/b.md",), (1,), ("tests/unit/t.py::t",)],
)
def test_kept_by_must_be_a_tuple_of_references(kept_by: Any) -> None:
    with pytest.raises(ValueError, match="kept_by must be a tuple of references a user can"):
        ContractSkip(
            outcome="unverifiable", promise="p", why="w", verify_yourself="v", kept_by=kept_by
        )


def test_an_ordinary_skip_has_no_kept_by() -> None:
    skip = ContractSkip(outcome="unverifiable", promise="p", why="w", verify_yourself="v")
    assert skip.kept_by == ()
    assert "kept_by" not in skip.as_dict()
    assert "kept_by" not in (parse_skip_reason(str(skip.msg)) or {})


def test_the_crash_probe_imports_a_factory_defined_in_the_users_conftest(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        "from tests.kit.broken_stores import LineFileStore\n\n"
        "def open_my_store(directory):\n"
        "    return LineFileStore(directory)\n"
    )
    body = (
        "class TestMine(testing.RunStoreContract):\n"
        "    @pytest.fixture\n"
        "    def run_store(self, tmp_path):\n"
        "        return broken.MemoryStore()\n"
        "    @pytest.fixture\n"
        "    def store_samples(self):\n"
        "        return testing.StoreSamples(factory='conftest:open_my_store')\n"
    )
    outcomes = run_sandbox(pytester, body, "-k", "atomic_append or prefix_durability")
    assert {test: o.outcome for (_, test), o in outcomes.items()} == {
        "test_atomic_append": "passed",
        "test_prefix_durability": "passed",
    }


def test_a_factory_that_does_not_import_fails_both_crash_promises_naming_it(
    pytester: pytest.Pytester,
) -> None:
    body = (
        "class TestMine(testing.RunStoreContract):\n"
        "    @pytest.fixture\n"
        "    def run_store(self):\n"
        "        return broken.MemoryStore()\n"
        "    @pytest.fixture\n"
        "    def store_samples(self):\n"
        "        return testing.StoreSamples(factory='my_missing_module:open_store')\n"
    )
    outcomes = run_sandbox(pytester, body, "-k", "atomic_append or prefix_durability")
    assert {o.outcome for o in outcomes.values()} == {"failed"}
    assert all("no module named 'my_missing_module'" in o.longrepr for o in outcomes.values())


@pytest.mark.slow  # the whole guide example through the kit: CI's slow step (README)
def test_the_reference_pages_complete_opt_in_example_checks_every_opt_in(
    pytester: pytest.Pytester,
) -> None:
    require_extra("openai")  # the example's failing client is OpenAIChatModel
    page = (ROOT / "docs" / "reference" / "contract-kit.md").read_text("utf-8")
    example = re.search(
        r"A complete example.*?```python\n(.*?)```\n\n<!-- opt-in example end -->", page, re.S
    )
    assert example is not None
    pytester.makepyfile(test_opt_ins=example[1])
    result = pytester.runpytest_inprocess(*SANDBOX_ARGS, "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert outcomes.get("errors", 0) == 0, result.stdout.str()
    passed = {r.nodeid.rsplit("::", 1)[-1] for r in result.reprec.getreports() if r.passed}  # type: ignore[attr-defined]
    assert {
        "test_atomic_append",
        "test_prefix_durability",
        "test_failure_is_an_exception",
        "test_status_trigger_conditions",
        "test_failure_is_a_return_value",
        "test_delivers_each_event_exactly_once",
        "test_environment_recovers_when_restored",
        "test_every_call_returns_env_error_while_broken",
        "test_truncated_chars_counts_what_was_cut",
        "test_is_deterministic_across_processes",
        "test_parses_golden_samples",
    } <= passed


def test_without_store_samples_the_crash_promises_say_which_fixture_turns_them_on(
    pytester: pytest.Pytester,
) -> None:
    from polyloop.testing import RunStoreContract

    assert RunStoreContract.optional_samples_fixture == "store_samples"
    body = (
        "class TestMine(testing.RunStoreContract):\n"
        "    @pytest.fixture\n"
        "    def run_store(self):\n"
        "        return broken.MemoryStore()\n"
    )
    outcomes = run_sandbox(pytester, body, "-k", "atomic_append or prefix_durability")
    assert len(outcomes) == 2
    for outcome in outcomes.values():
        parts = parse_skip_reason(outcome.longrepr) or {}
        assert parts.get("outcome") == "unverifiable", outcome.longrepr
        assert "from a fixture named `store_samples`" in parts["verify_yourself"]
        assert "StoreSamples(factory='package.module:callable')" in parts["verify_yourself"]

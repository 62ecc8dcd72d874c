"""RunStoreStateMachine, used directly: the reference and SQLite hold, broken stores are caught."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from polyloop.ports import RunStore
from polyloop.stores import MemoryStore, SQLiteStore
from polyloop.testing import RunStoreStateMachine
from tests.kit import broken

# Derandomized: whether a broken store is caught must not depend on the seed of this run.
SEARCH = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.generate],
)


def _drive(make_store: Callable[[], RunStore]) -> None:
    # Hypothesis types the factory as the class, though its docs pass any callable.
    factory: Any = lambda: RunStoreStateMachine(make_store())  # noqa: E731
    run_state_machine_as_test(factory, settings=SEARCH)


def test_the_reference_store_and_sqlite_behave_like_the_reference(tmp_path: Path) -> None:
    _drive(MemoryStore)
    store = SQLiteStore(tmp_path / "runs.db")
    _drive(lambda: store)  # one store across the machine's successive event loops (SPEC §5)
    asyncio.run(store.aclose())


@pytest.mark.parametrize(
    "store",
    [
        "IgnoresSequence",  # RunConflict
        "SecondStartReplacesLog",  # RunAlreadyExists
        "AppendsAfterFinish",  # RunAlreadyFinished
        "ConflictBeforeOtherErrors",  # the precedence
        "FinishedBeforeExists",
        "FirstAppendUnfenced",
        "UnknownRunRaises",
        "IgnoresRunId",  # isolation
        "ListsNoRuns",
        "RunIdsAsTuple",
        "StopReasonAsPlainString",  # a read of another type
        "FenceKeyedByTruncatedRunId",
        "ForgetsAFinishAfterAnotherRunsAppend",
        "ListsOnlyUnfinishedRuns",
    ],
)
def test_a_store_that_breaks_a_rule_is_caught(store: str) -> None:
    with pytest.raises(AssertionError, match=r"reference store|run_ids\(\)|read_log"):
        _drive(getattr(broken, store))


def test_a_failure_names_the_call_and_both_answers() -> None:
    with pytest.raises(AssertionError) as caught:
        _drive(broken.FinishedBeforeExists)
    message = str(caught.value)
    assert "append(run " in message
    assert "run_started" in message
    assert "the reference store raised RunAlreadyExists" in message
    assert "yours raised RunAlreadyFinished" in message


def test_the_reference_shares_no_rules_with_the_bundled_stores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug in the bundled stores' shared append rules (``polyloop.stores._rules``) is caught:
    the comparison's reference is the kit's own model, not ``MemoryStore`` (which would carry
    the same bug and agree with it). Here the rules check the sequence before the finish."""
    from polyloop.errors import RunConflict
    from polyloop.stores import _rules
    from polyloop.testing._run_store._stateful import StoreComparison

    original = _rules.check_append

    def conflict_first(
        run_id: str, record: Any, *, sequence: int, length: int, finished: bool
    ) -> None:
        if sequence != length:
            raise RunConflict(f"run {run_id!r}: sequence {sequence}, length {length}")
        original(run_id, record, sequence=sequence, length=length, finished=finished)

    monkeypatch.setattr(_rules, "check_append", conflict_first)

    async def drive() -> None:
        comparison = StoreComparison(MemoryStore())
        await comparison.append(0, "run_started", "right")
        await comparison.append(0, "run_finished", "right")
        await comparison.append(0, "action_intent", "ahead")

    with pytest.raises(AssertionError, match="raised RunAlreadyFinished, yours raised RunConflict"):
        asyncio.run(drive())

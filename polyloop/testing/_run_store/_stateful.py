"""``RunStoreStateMachine``: any ``RunStore`` driven side by side with the reference store.

The example-based store promises each check one rule on one or two runs. Bugs that need an
interleaving — a finish forgotten after another run's append, two runs sharing one fence, a
listing that drops finished runs — pass them all. Here three runs receive starts, appends at
the right and wrong sequences, finishes and late writes in any interleaving, and every answer —
accepted or the exception type, each log, ``run_ids()`` — is compared with the kit's own
model of the append rules (``_store_model``), which shares no code with any bundled store.

Two drivers share :class:`StoreComparison`:

* :class:`RunStoreStateMachine`, a Hypothesis ``RuleBasedStateMachine`` for your own tests (a
  wide random search). Rules are synchronous, so it awaits each store call on an event loop of
  its own, one per example: the store must be usable from successive loops (SPEC §5).
* the ``run_store.behaves_like_the_reference_store`` promise, an ``async`` test that awaits the
  calls on the suite's loop, where the store (an async fixture's pool) lives. It replays
  *lifecycles* instead of single rules: every run is started, extended, finished, written to
  late and started again, in a drawn interleaving with drawn wrong sequences — so each bounded
  example reaches the states where interleaving bugs live.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from polyloop._base._exception_text import exception_text
from polyloop.ports import RunStore
from polyloop.testing._run_store._run_ids import fresh_run_ids
from polyloop.testing._run_store._store_model import StoreModel
from polyloop.testing._shared._draw_texts import record_texts
from polyloop.testing._shared._sample_records import finished, started
from polyloop.testing._shared._shapes import SHORT, mismatch, run_log_problems, short
from polyloop.types import (
    Action,
    ActionIntent,
    ModelCallIntent,
    Record,
    RunLog,
    RunStarted,
)

__all__ = ["RunStoreStateMachine", "StoreComparison", "lifecycle_programs"]

_T = TypeVar("_T")

#: How many runs one example interleaves.
RUNS = 3
_RUN = st.integers(min_value=0, max_value=RUNS - 1)
#: Which sequence an append uses: the log's length, one behind (a stale writer), one ahead.
_SEQUENCE = st.sampled_from(("right", "right", "right", "behind", "ahead"))
_KIND = st.sampled_from(("model_call_intent", "action_intent", "run_finished"))
#: The texts an appended record carries: lone surrogates, non-ASCII and control characters too.
_TEXTS = record_texts()
#: One run's life in the promise's programs: start, work, finish, late writes, a restart.
_LIFECYCLE = (
    "run_started",
    "model_call_intent",
    "action_intent",
    "run_finished",
    "action_intent",
    "run_started",
    "run_finished",
)

Step = tuple[int, str, str]  # (run, record kind, sequence choice)

#: The text the records of a program carry unless a drawn one is given: a lone surrogate, CJK,
#: a combining mark, an astral character and a control character, as a run can record them.
TEXT = "\udcff \u4e2d\u6587 e\u0301 \U0001f600 \x1b"


def _record(run: int, run_id: str, kind: str, step: int, text: str = TEXT) -> Record:
    if kind == "run_started":
        return started(
            run_id, f"goal of run {run} {text}", parameters={"system_prompt": "state machine"}
        )
    if kind == "model_call_intent":
        return ModelCallIntent(step_index=step, prompt_chars=100 + step)
    if kind == "action_intent":
        return ActionIntent(
            step_index=step,
            action=Action(text=f"act {step} {text}", tool_name=text, tool_args={text: [text]}),
        )
    return finished(f"answer of run {run} {text}", executed_actions=step)


def _describe(answer: object) -> str:
    if isinstance(answer, BaseException):
        return f"raised {exception_text(answer, limit=SHORT)}"
    return "accepted it"


def _expected(refusal: type[Exception] | None) -> str:
    return "accepted it" if refusal is None else f"raised {refusal.__name__}"


def _program(schedule: list[int], choices: list[str]) -> list[Step]:
    done = [0] * RUNS
    steps: list[Step] = []
    for run, choice in zip(schedule, choices, strict=True):
        steps.append((run, _LIFECYCLE[done[run]], choice))
        done[run] += 1
    return steps


def lifecycle_programs() -> st.SearchStrategy[list[Step]]:
    """Programs of ``(run, record kind, sequence choice)`` steps: each of the three runs goes
    through its whole lifecycle, the runs interleaved in a drawn order."""
    slots = [run for run in range(RUNS) for _ in _LIFECYCLE]
    return st.builds(
        _program,
        st.permutations(slots),
        st.lists(_SEQUENCE, min_size=len(slots), max_size=len(slots)),
    )


class StoreComparison:
    """A store and the kit's own model of the append rules (``StoreModel``, independent of
    every bundled store) driven with the same calls; every answer compared.

    Three fresh run ids per instance (128 characters that differ only in the case of their
    last two, see ``_run_ids``): the store may hold other runs.
    Each method fails with an ``AssertionError`` that names the call and both answers.
    """

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.reference = StoreModel()
        self.run_ids: tuple[str, ...] = tuple(fresh_run_ids(RUNS))

    async def append(
        self, run: int, kind: str, choice: str, step: int = 1, text: str = TEXT
    ) -> None:
        """Append a ``kind`` record to ``run`` at the ``choice`` sequence, to both stores; its
        texts hold ``text``."""
        run_id = self.run_ids[run]
        record = _record(run, run_id, kind, step, text)
        length = len(self.reference.read_log(run_id))
        wrong = length - 1 if length else 2  # a stale writer; on an empty log, one far ahead
        sequence = {"right": length, "behind": wrong, "ahead": length + 1}[choice]
        if length == 0 and sequence == 0 and not isinstance(record, RunStarted):
            # SPEC §3 does not say what a store does with a log that would not start with
            # RunStarted (MemoryStore refuses it, a store may accept it): not compared.
            return
        expected = self.reference.append(run_id, record, sequence)
        got = await _answer(self.store, run_id, record, sequence)
        same = got is None if expected is None else isinstance(got, expected)
        assert same, (
            f"append(run {run}, {kind}, sequence={sequence}) on a log of {length} records: "
            f"the reference store {_expected(expected)}, yours {_describe(got)}"
        )

    async def check_log(self, run: int) -> None:
        """``read_log`` of ``run`` equals the reference's, record for record, type for type."""
        run_id = self.run_ids[run]
        expected: RunLog = self.reference.read_log(run_id)
        try:
            got: Any = await self.store.read_log(run_id)
        except Exception as error:
            raise AssertionError(
                f"read_log(run {run}) {_describe(error)}; the reference store returned "
                f"{len(expected)} records"
            ) from error
        problems = run_log_problems(got, f"read_log(run {run})")
        assert not problems, "\n".join(problems)
        found = mismatch(expected.records, got.records, f"read_log(run {run}).records")
        assert found is None, f"{found} (the reference store's log: {short(expected.records)})"

    async def check_listing(self) -> None:
        """``run_ids()`` lists exactly the reference's runs among this instance's, once each."""
        expected = [run_id for run_id in self.reference.run_ids() if run_id in self.run_ids]
        got: Any = await self.store.run_ids()
        assert isinstance(got, list), f"run_ids() must return a list, got {type(got).__name__}"
        mine = sorted(r for r in got if isinstance(r, str) and r in self.run_ids)
        assert mine == expected, (
            f"run_ids() lists these runs of this example: {mine}; the reference store lists "
            f"{expected} (a run is listed once, from its start on)"
        )

    async def check_all(self) -> None:
        for run in range(RUNS):
            await self.check_log(run)
        await self.check_listing()


async def _answer(store: RunStore, run_id: str, record: Record, sequence: int) -> object:
    """``None`` if the append was accepted, else the exception it raised."""
    try:
        await store.append(run_id, record, sequence=sequence)
    except Exception as error:  # any exception is an answer, compared with the reference's
        return error
    return None


async def _awaited(call: Awaitable[_T]) -> _T:
    return await call


class RunStoreStateMachine(RuleBasedStateMachine):
    """Drive ``store`` and the kit's model of the append rules with the same calls; every
    answer must agree.

    Use it in your own tests with Hypothesis' ``run_state_machine_as_test``::

        def test_my_store_behaves_like_the_reference_store(tmp_path):
            store = MyStore(tmp_path / "runs.db")
            run_state_machine_as_test(lambda: RunStoreStateMachine(store))

    Rules: ``start`` and ``append`` (an intent or a finish, its texts drawn by
    :func:`~polyloop.testing.strategies.record_texts`: lone surrogates, non-ASCII, control
    characters) at the right or a wrong sequence, on one of three runs; after every step the
    invariant compares all three logs and ``run_ids()``. Each example awaits the store on a new
    event loop of its own (closed at teardown), so the store must be usable from successive
    event loops.
    """

    def __init__(self, store: RunStore) -> None:
        super().__init__()
        self.comparison = StoreComparison(store)
        self._loop = asyncio.new_event_loop()

    @initialize(runs=st.sets(_RUN, max_size=RUNS - 1))
    def start_some_runs(self, runs: set[int]) -> None:
        for run in sorted(runs):  # at least one run stays unstarted: its first append is fenced
            self.start(run, "right")

    @rule(run=_RUN, sequence=_SEQUENCE)
    def start(self, run: int, sequence: str) -> None:
        self._await(self.comparison.append(run, "run_started", sequence))

    @rule(run=_RUN, sequence=_SEQUENCE, kind=_KIND, step=st.integers(1, 9), text=_TEXTS)
    def append(self, run: int, sequence: str, kind: str, step: int, text: str) -> None:
        self._await(self.comparison.append(run, kind, sequence, step, text))

    @invariant()
    def logs_and_listing_agree(self) -> None:
        self._await(self.comparison.check_all())

    def teardown(self) -> None:
        self._loop.run_until_complete(self._loop.shutdown_default_executor())
        self._loop.close()

    def _await(self, call: Awaitable[_T]) -> _T:
        return self._loop.run_until_complete(_awaited(call))

"""The run-store suite.

The store is the intent log a crashed run is resumed from, so everything it hands back must be
exactly what was appended — value and type — and its fences (exclusive start, nothing after the
finish, ``sequence``) are what keep a second process from repeating an action. Every promise
uses fresh ``uuid4`` run ids and checks "absent before, present after": the store may already
hold other runs (a shared database).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.ports import BatchRunStore, RunStore
from polyloop.testing import strategies as pst
from polyloop.testing._base import (
    ContractBase,
    bounded_settings,
    missing_fixture,
    require_seam,
    unverifiable_promise,
)
from polyloop.testing._shapes import mismatch, run_log_problems, short
from polyloop.testing._skips import not_applicable, unverifiable
from polyloop.types import (
    Action,
    ActionIntent,
    ModelCallIntent,
    Record,
    RunFinished,
    RunLog,
    RunStarted,
    StopReason,
)

__all__ = ["RunStoreContract"]

# Built once: constructing a strategy per example costs more than running the example.
_LOGS = pst.run_logs()
_CONCURRENT_RUNS = 8
_RECORDS_PER_CONCURRENT_RUN = 6


def _fresh_run_id() -> str:
    return uuid.uuid4().hex


def _started(run_id: str, goal: str = "contract goal") -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal=goal,
        parameters={"system_prompt": "contract"},
        parameters_hash="sha256:" + "0" * 64,
        started_at="2026-01-01T00:00:00.000Z",
    )


def _finished() -> RunFinished:
    return RunFinished(
        stop_reason=StopReason.AGENT_FINISHED,
        final_answer="done",
        executed_actions=0,
        finished_at="2026-01-01T00:00:01.000Z",
    )


def _check_store(store: object) -> None:
    for method, signature in (
        ("append", "async append(run_id, record, *, sequence)"),
        ("read_log", "async read_log(run_id) -> RunLog"),
        ("run_ids", "async run_ids() -> list[str]"),
    ):
        require_seam(store, "run_store", method, signature)


async def _read(store: RunStore, run_id: str) -> RunLog:
    log = await store.read_log(run_id)
    problems = run_log_problems(log, f"read_log({run_id!r})")
    assert not problems, "\n".join(problems)
    return log


async def _append_all(store: RunStore, run_id: str, records: Sequence[Record]) -> None:
    for sequence, record in enumerate(records):
        await store.append(run_id, record, sequence=sequence)


def _require_batches(store: RunStore) -> BatchRunStore:
    _check_store(store)
    if not isinstance(store, BatchRunStore):
        not_applicable(
            promise="append_many(run_id, records, *, sequence) is atomic, fenced and ordered",
            why=(
                "this store has no append_many; the loop then appends the records of a batch "
                "one by one (one durable commit each)"
            ),
            verify_yourself=(
                "add async append_many(run_id, records, *, sequence) that writes all records "
                "in one transaction, applying the append rules to each in order"
            ),
        )
    return store


def _assert_log_is(log: RunLog, expected: Sequence[Record], what: str) -> None:
    found = mismatch(tuple(expected), log.records, "records")
    assert found is None, f"{what}: {found}"


class RunStoreContract(ContractBase):
    """Inherit this and override ``run_store`` (return a fresh, open store).

    No samples: records are the library's own. The store may be shared with other runs (a real
    database); every promise works on fresh ``uuid4`` run ids.
    """

    seam = "run_store"
    samples_fixture = None

    @pytest.fixture
    def run_store(self) -> RunStore:
        """A fresh store. Override this fixture (an async one may open and close it)."""
        missing_fixture(
            "RunStoreContract",
            "run_store",
            "a fresh, open instance of your store (any object with async append(run_id, "
            "record, *, sequence), read_log(run_id) and run_ids()); use a "
            "@pytest_asyncio.fixture that yields it if it must be opened or closed",
        )

    async def test_unknown_run_reads_as_empty_log(self, run_store: RunStore) -> None:
        """``read_log`` of a run id that was never written returns an empty ``RunLog``.

        ``run()`` asks the store whether a run id is taken before starting. If an unknown run
        raised instead, that check would have to catch exceptions — and would then read "store
        unreachable" as "new run" and start over on top of an existing log.
        """
        _check_store(run_store)
        run_id = _fresh_run_id()
        log = await _read(run_store, run_id)
        assert log.records == (), (
            f"read_log of a never-written run returned {len(log.records)} records: "
            f"{short(log.records)}"
        )

    @bounded_settings(max_examples=25)
    @given(data=st.data())
    async def test_round_trips_every_record_kind(
        self, run_store: RunStore, data: st.DataObject
    ) -> None:
        """Every record reads back equal to what was appended, every field of the same type.

        A resume rebuilds the run from these records. A store that turns ``0`` or ``""`` into
        ``None`` on the way to disk, a ``StopReason`` into a plain string, ``True`` into ``1``,
        or a 64-bit count into a float hands the resume a different run than the one that
        happened — and ``==`` alone would not notice (``StopReason.X == "x"``, ``True == 1``).
        Logs cover all six kinds, nasty text and large integers.
        """
        _check_store(run_store)
        run_id = _fresh_run_id()
        drawn = data.draw(_LOGS, label="records")
        start = drawn[0]
        assert isinstance(start, RunStarted)
        records = (dataclasses.replace(start, run_id=run_id), *drawn[1:])
        await _append_all(run_store, run_id, records)
        log = await _read(run_store, run_id)
        _assert_log_is(
            log, records, f"run {run_id} (drawn log with this run id) did not round-trip"
        )

    async def test_preserves_append_order(self, run_store: RunStore) -> None:
        """``read_log`` returns records in append order: a record's index is its sequence.

        The loop replays the log in order to rebuild the history, and ``sequence`` fencing
        relies on index = position. A store that orders by anything else (kind, step index, a
        hash, an unordered query) rebuilds a different conversation.
        """
        _check_store(run_store)
        run_id = _fresh_run_id()
        records: list[Record] = [_started(run_id)]
        for step in (5, 3, 9, 0, 7, 3):
            records.append(ModelCallIntent(step_index=step, prompt_chars=100 - step))
        await _append_all(run_store, run_id, records)
        _assert_log_is(await _read(run_store, run_id), records, "the log came back reordered")

    async def test_runs_are_isolated(self, run_store: RunStore) -> None:
        """Records appended to one run never show up in another's log.

        Two runs' records mixed into one log rebuild a conversation nobody had; a store that
        ignores or truncates the run id also refuses the second run's start as "already
        exists".
        """
        _check_store(run_store)
        first, second = _fresh_run_id(), _fresh_run_id()
        first_records: list[Record] = [
            _started(first, "first"),
            ModelCallIntent(step_index=0, prompt_chars=11),
        ]
        second_records: list[Record] = [_started(second, "second")]
        await _append_all(run_store, first, first_records)
        await _append_all(run_store, second, second_records)
        await run_store.append(first, ModelCallIntent(step_index=1, prompt_chars=12), sequence=2)
        first_records.append(ModelCallIntent(step_index=1, prompt_chars=12))
        _assert_log_is(await _read(run_store, first), first_records, f"run {first}")
        _assert_log_is(await _read(run_store, second), second_records, f"run {second}")

    async def test_concurrent_appends_to_distinct_runs(self, run_store: RunStore) -> None:
        """Appends to different runs may interleave freely; none is lost or misplaced.

        A harness drives many runs at once against one store. A store that reads, modifies and
        writes a shared structure around an await (or takes no lock on a shared file) loses
        another run's append — and a lost intent record is exactly what makes a resume repeat an
        action.
        """
        _check_store(run_store)
        run_ids = [_fresh_run_id() for _ in range(_CONCURRENT_RUNS)]
        logs: dict[str, list[Record]] = {}
        for n, run_id in enumerate(run_ids):
            logs[run_id] = [_started(run_id, f"concurrent {n}")]
            logs[run_id].extend(
                ModelCallIntent(step_index=step, prompt_chars=n * 100 + step)
                for step in range(_RECORDS_PER_CONCURRENT_RUN - 1)
            )
        await asyncio.gather(*(_append_all(run_store, run_id, logs[run_id]) for run_id in run_ids))
        for run_id in run_ids:
            _assert_log_is(
                await _read(run_store, run_id),
                logs[run_id],
                f"run {run_id} after concurrent appends",
            )

    async def test_start_is_exclusive(self, run_store: RunStore) -> None:
        """A ``RunStarted`` for a run that has a log raises ``RunAlreadyExists`` and writes nothing.

        Two processes given the same run id must not both believe they started it; the second
        start would overwrite or interleave with the first's log. ``RunAlreadyExists`` takes
        precedence over ``RunConflict`` (a second start at the wrong sequence is still "exists").
        """
        _check_store(run_store)
        run_id = _fresh_run_id()
        original = _started(run_id, "original")
        await run_store.append(run_id, original, sequence=0)
        for sequence in (1, 0):
            with pytest.raises(RunAlreadyExists):
                await run_store.append(
                    run_id, dataclasses.replace(original, goal="intruder"), sequence=sequence
                )
        _assert_log_is(
            await _read(run_store, run_id), [original], "a refused start changed the log"
        )

    async def test_finished_run_rejects_records(self, run_store: RunStore) -> None:
        """After ``RunFinished`` any append raises ``RunAlreadyFinished`` and writes nothing.

        A finished run is final: a late writer (a retried job, a stale worker) must not extend
        it, or the result rebuilt from the log would change after it was reported.
        ``RunAlreadyFinished`` takes precedence over ``RunConflict``.
        """
        _check_store(run_store)
        run_id = _fresh_run_id()
        records: list[Record] = [_started(run_id), _finished()]
        await _append_all(run_store, run_id, records)
        late: list[tuple[Record, int]] = [
            (ModelCallIntent(step_index=1, prompt_chars=1), 2),
            (_finished(), 2),
            (ModelCallIntent(step_index=1, prompt_chars=1), 5),
        ]
        for record, sequence in late:
            with pytest.raises(RunAlreadyFinished):
                await run_store.append(run_id, record, sequence=sequence)
        _assert_log_is(await _read(run_store, run_id), records, "a refused append changed the log")

    async def test_rejects_out_of_order_sequence(self, run_store: RunStore) -> None:
        """``append`` with a ``sequence`` other than the log's length raises ``RunConflict`` and
        writes nothing; the right sequence then succeeds.

        This is the fence between two processes driving one run (a scheduler retried a job whose
        first attempt is still alive): the loser's append fails *before* it executes a
        never-replay action, instead of both executing it.
        """
        _check_store(run_store)
        run_id = _fresh_run_id()
        records: list[Record] = [_started(run_id)]
        await _append_all(run_store, run_id, records)
        stale = ActionIntent(step_index=0, action=Action(text="an action that must not run twice"))
        for sequence in (0, 2, 7):
            with pytest.raises(RunConflict):
                await run_store.append(run_id, stale, sequence=sequence)
        _assert_log_is(await _read(run_store, run_id), records, "a refused append changed the log")
        await run_store.append(run_id, stale, sequence=1)
        _assert_log_is(
            await _read(run_store, run_id),
            [*records, stale],
            "the append at the right sequence after refused ones",
        )

    async def test_lists_its_runs(self, run_store: RunStore) -> None:
        """``run_ids()`` returns a list of str that includes a run once its start was appended.

        ``polyloop runs`` and every analysis that walks a store start here; a run missing from
        the list is invisible. Checked as "absent before, present after", since the store may
        hold other runs.
        """
        _check_store(run_store)
        run_id = _fresh_run_id()
        before = await run_store.run_ids()
        assert isinstance(before, list), (
            f"run_ids() must return a list, got {type(before).__name__}"
        )
        assert run_id not in before
        await run_store.append(run_id, _started(run_id), sequence=0)
        after = await run_store.run_ids()
        assert isinstance(after, list), f"run_ids() must return a list, got {type(after).__name__}"
        bad = [r for r in after if not isinstance(r, str)]
        assert not bad, f"run_ids() must hold str run ids, found {short(bad)}"
        assert after.count(run_id) == 1, (
            f"run_ids() lists the new run {after.count(run_id)} times after its start was appended"
        )

    async def test_batch_is_atomic(self, run_store: RunStore) -> None:
        """``append_many`` writes all of its records or none: a batch whose k-th record breaks
        an append rule raises that rule's error and leaves the log as it was.

        The loop commits a step's reply together with its action intent. A store that writes
        the records before the bad one leaves a log the loop never wrote — a reply without the
        intent it was committed with, or records after a refused finish. Checked when the store
        has ``append_many`` (the optional batch method of the seam).
        """
        batches = _require_batches(run_store)
        run_id = _fresh_run_id()
        records: list[Record] = [_started(run_id)]
        await _append_all(run_store, run_id, records)
        bad: list[tuple[list[Record], type[Exception]]] = [
            ([ModelCallIntent(step_index=0, prompt_chars=1), _started(run_id)], RunAlreadyExists),
            (
                [_finished(), ModelCallIntent(step_index=0, prompt_chars=2)],
                RunAlreadyFinished,
            ),
        ]
        for batch, error in bad:
            with pytest.raises(error):
                await batches.append_many(run_id, batch, sequence=1)
            _assert_log_is(
                await _read(run_store, run_id), records, f"a refused batch ending {error.__name__}"
            )

    async def test_batch_is_fenced(self, run_store: RunStore) -> None:
        """``append_many`` at a ``sequence`` other than the log's length raises ``RunConflict``
        and writes none of the batch; at the right ``sequence`` every record takes the next
        index, in order.

        This is the fence of ``append`` applied to the batch as a whole: the losing process of a
        race must not get half of its batch in — its action intent would then sit in the
        winner's log as if the winner had meant it.
        """
        batches = _require_batches(run_store)
        run_id = _fresh_run_id()
        records: list[Record] = [_started(run_id)]
        await _append_all(run_store, run_id, records)
        batch: list[Record] = [
            ModelCallIntent(step_index=0, prompt_chars=5),
            ActionIntent(step_index=0, action=Action(text="an action that must not run twice")),
        ]
        for sequence in (0, 2, 9):
            with pytest.raises(RunConflict):
                await batches.append_many(run_id, batch, sequence=sequence)
            _assert_log_is(await _read(run_store, run_id), records, "a stale batch changed the log")
        await batches.append_many(run_id, batch, sequence=1)
        with pytest.raises(RunConflict):  # the same batch again: the log has moved on
            await batches.append_many(run_id, batch, sequence=1)
        _assert_log_is(
            await _read(run_store, run_id), [*records, *batch], "the batch at the right sequence"
        )

    async def test_batches_and_single_appends_interleave_in_order(
        self, run_store: RunStore
    ) -> None:
        """Single appends and batches take consecutive sequences in the order they were made,
        and a batch may end the run (a final step with its ``RunFinished``).

        The loop mixes both on one log and resumes from what it reads back; a store that keeps
        a batch apart from single records (or reorders inside a batch) rebuilds another run.
        """
        batches = _require_batches(run_store)
        run_id = _fresh_run_id()
        first: list[Record] = [_started(run_id), ModelCallIntent(step_index=0, prompt_chars=3)]
        await batches.append_many(run_id, first, sequence=0)
        single = ModelCallIntent(step_index=1, prompt_chars=7)
        await run_store.append(run_id, single, sequence=2)
        last: list[Record] = [
            ModelCallIntent(step_index=2, prompt_chars=2),
            ModelCallIntent(step_index=0, prompt_chars=9),
            _finished(),
        ]
        await batches.append_many(run_id, last, sequence=3)
        _assert_log_is(
            await _read(run_store, run_id), [*first, single, *last], "batches and appends mixed"
        )

    @unverifiable_promise
    async def test_atomic_append(self, run_store: RunStore) -> None:
        """A crash during ``append`` leaves the record wholly present or wholly absent.

        A half-written record is unreadable; the resume then cannot tell whether the action
        whose intent it was has run.
        """
        unverifiable(
            promise="a crash during append() leaves the record wholly present or wholly absent",
            why=(
                "checking it needs the process killed in the middle of a write, and the suite "
                "runs inside one process"
            ),
            verify_yourself=(
                "write to one transaction or one atomic rename per record, and test it with a "
                "fault-injection point (kill a child process mid-append, then read the log)"
            ),
        )

    @unverifiable_promise
    async def test_prefix_durability(self, run_store: RunStore) -> None:
        """After a crash the log is a prefix of what was appended: a returned append is durable.

        The loop executes an action only after its intent's append returned; if that record
        can vanish in a crash, the resume repeats an action it was told had an intent.
        """
        unverifiable(
            promise=(
                "once append() returns, the record survives a crash: the log after a crash is a "
                "prefix of what was appended"
            ),
            why="durability shows only after a power loss or a killed process, not inside one run",
            verify_yourself=(
                "commit (fsync, or a synchronous database commit) before append() returns; "
                "review that, and test it by killing a writer process and reading the log back"
            ),
        )

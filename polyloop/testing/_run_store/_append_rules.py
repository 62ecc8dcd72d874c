"""The run store's append rules: what goes in comes back, in order, each run alone, and the
fences (exclusive start, nothing after the finish, ``sequence``) hold."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polyloop._base._exception_text import exception_text
from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.ports import RunStore
from polyloop.testing._run_store._run_ids import (
    fresh_run_id,
    fresh_run_ids,
    numeric_run_ids,
    unique_run_id,
)
from polyloop.testing._run_store._stateful import StoreComparison, lifecycle_programs
from polyloop.testing._run_store._store_calls import (
    append_all,
    assert_log_is,
    check_store,
    read_checked,
)
from polyloop.testing._run_store._store_objects import (
    across_objects,
    across_processes,
    exclusive_start_across_objects,
    fence_across_objects,
    finish_across_objects,
)
from polyloop.testing._shared._base import (
    bounded_settings,
)
from polyloop.testing._shared._clock import CLOCKS, wall_clock
from polyloop.testing._shared._draw_texts import run_ids
from polyloop.testing._shared._draw_values import run_logs
from polyloop.testing._shared._sample_records import finished as _finished
from polyloop.testing._shared._sample_records import started as _started
from polyloop.testing._shared._shapes import short
from polyloop.types import (
    Action,
    ActionIntent,
    ModelCallIntent,
    Record,
    RunLog,
    RunStarted,
)

__all__ = ["AppendRules"]

# Built once: constructing a strategy per example costs more than running the example.
_LOGS = run_logs()


_RUN_IDS = run_ids()


_CONCURRENT_RUNS = 8


_RECORDS_PER_CONCURRENT_RUN = 6


_PROGRAMS = lifecycle_programs()


async def _numeric_ids_are_isolated(store: RunStore) -> None:
    """Run ids that look like numbers and are equal as numbers (``7``, ``07``, ``7.0``) are
    distinct runs, each listed as the str it was given (issue 30 §1, identity)."""
    run_ids = numeric_run_ids()
    for run_id in run_ids:
        try:
            await store.append(run_id, _started(run_id, f"numeric {run_id}"), sequence=0)
        except Exception as error:
            pytest.fail(
                f"the start of run {run_id!r} (a run id that looks like a number) raised "
                f"{exception_text(error)}; the runs {run_ids} were started in that order "
                "and are distinct",
                pytrace=False,
            )
    listed = await store.run_ids()
    for run_id in run_ids:
        log = await read_checked(store, run_id)
        assert_log_is(
            log,
            [_started(run_id, f"numeric {run_id}")],
            f"run {run_id!r} (a run id that looks like a number, beside {run_ids})",
        )
        count = listed.count(run_id) if isinstance(listed, list) else 0
        assert count == 1, (
            f"run_ids() lists run {run_id!r} (a run id that looks like a number) {count} times "
            f"after the runs {run_ids} were started; it lists {short(listed)}"
        )


#: Log lengths around the page and buffer sizes of real code: 1025 is past every page of
#: 50, 64, 100, 128, 256, 1000 and 1024 records by a partial page, 100 and 101 sit at one.
_LOG_SIZES = (100, 101, 1025)


#: Record texts around the line, buffer and column sizes of real code, in characters (the
#: second half in two-byte characters, so the bytes cross the same sizes twice over).
_TEXT_SIZES = (0, 1, 255, 4095, 4096, 4097, 65535, 65536, 65537)


_CHUNK = 64


async def _append_in_chunks(store: RunStore, run_id: str, records: Sequence[Record]) -> None:
    """Appended in batches of 64 when the store has ``append_many``, else one by one."""
    batches = getattr(store, "append_many", None)
    if batches is None:
        await append_all(store, run_id, records)
        return
    for start in range(0, len(records), _CHUNK):
        await batches(run_id, records[start : start + _CHUNK], sequence=start)


async def _read_sized(store: RunStore, run_id: str, what: str) -> RunLog:
    """``read_checked``, with an exception out of ``read_log`` named by what the log holds."""
    try:
        return await read_checked(store, run_id)
    except AssertionError:
        raise
    except Exception as error:
        pytest.fail(
            f"read_log of {what} raised {exception_text(error, limit=300)}",
            pytrace=False,
        )


async def _order_at_every_size(store: RunStore) -> None:
    """Logs longer than any page, and records longer than any buffer, read back whole and in
    order (issue 30 §1, size)."""
    for size in _LOG_SIZES:
        run_id = fresh_run_id()
        records: list[Record] = [_started(run_id, f"a log of {size} records")]
        records += [ModelCallIntent(step_index=n, prompt_chars=n) for n in range(size - 1)]
        await _append_in_chunks(store, run_id, records)
        what = f"a log of {size} records"
        assert_log_is(await _read_sized(store, run_id, what), records, what)
    run_id = fresh_run_id()
    big: list[Record] = [_started(run_id, "records of every size")]
    for letter in ("x", "\u00e9"):
        big += [ActionIntent(step_index=n, action=Action(text=letter * n)) for n in _TEXT_SIZES]
    await _append_in_chunks(store, run_id, big)
    what = f"records whose texts are {_TEXT_SIZES} characters long (one- and two-byte)"
    assert_log_is(await _read_sized(store, run_id, what), big, what)


async def _order_under_other_clocks(store: RunStore) -> None:
    """Appends made under other wall clocks, dates and time zones (a clock stepped back, a
    process in another zone) read back in append order, under yet another clock (issue 30
    §1, time)."""
    run_id = fresh_run_id()
    records: list[Record] = [_started(run_id, "appended under other clocks")]
    await append_all(store, run_id, records)
    for step, (offset, zone, _) in enumerate(CLOCKS):
        record = ModelCallIntent(step_index=step, prompt_chars=step)
        with wall_clock(offset, zone):
            await store.append(run_id, record, sequence=len(records))
        records.append(record)
    clocks = "; ".join(what for _, _, what in CLOCKS)
    for offset, zone, what in (CLOCKS[0], CLOCKS[-1]):
        with wall_clock(offset, zone):
            log = await read_checked(store, run_id)
        assert_log_is(
            log,
            records,
            f"records appended under another wall clock each ({clocks}), read {what}",
        )


async def _start_refused_under_other_clocks(store: RunStore, run_id: str) -> None:
    """A second start is refused however much later, by the wall clock, it comes."""
    for offset, zone, what in CLOCKS:
        with wall_clock(offset, zone):
            try:
                await store.append(run_id, _started(run_id, "late intruder"), sequence=0)
            except RunAlreadyExists:
                continue
            except Exception as error:
                raised = f"raised {exception_text(error)}"
            else:
                raised = "was accepted"
        pytest.fail(
            f"a second start of run {run_id} under another wall clock ({what}) {raised}; "
            "it had to raise RunAlreadyExists (a run is never abandoned by the clock)",
            pytrace=False,
        )


class AppendRules:
    """The append rules: what goes in comes back, in order, each run alone; the fences hold."""

    async def test_unknown_run_reads_as_empty_log(self, run_store: RunStore) -> None:
        """``read_log`` of a run id that was never written returns an empty ``RunLog``.

        ``run()`` asks the store whether a run id is taken before starting. If an unknown run
        raised instead, that check would have to catch exceptions — and would then read "store
        unreachable" as "new run" and start over on top of an existing log.
        """
        check_store(run_store)
        run_id = fresh_run_id()
        log = await read_checked(run_store, run_id)
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
        Logs cover all six kinds, nasty text in every text field (lone surrogates, CJK, emoji,
        combining marks, control characters) and large integers.
        """
        check_store(run_store)
        drawn = data.draw(_LOGS, label="records")
        run_id = unique_run_id(data.draw(_RUN_IDS, label="run id"))
        start = drawn[0]
        assert isinstance(start, RunStarted)
        records = (dataclasses.replace(start, run_id=run_id), *drawn[1:])
        await append_all(run_store, run_id, records)
        log = await read_checked(run_store, run_id)
        assert_log_is(log, records, f"run {run_id} (drawn log with this run id) did not round-trip")

    async def test_preserves_append_order(self, run_store: RunStore) -> None:
        """``read_log`` returns records in append order: a record's index is its sequence.

        The loop replays the log in order to rebuild the history, and ``sequence`` fencing
        relies on index = position. A store that orders by anything else (kind, step index, a
        hash, an unordered query) rebuilds a different conversation.
        """
        check_store(run_store)
        run_id = fresh_run_id()
        records: list[Record] = [_started(run_id)]
        for step in (5, 3, 9, 0, 7, 3):
            records.append(ModelCallIntent(step_index=step, prompt_chars=100 - step))
        await append_all(run_store, run_id, records)
        assert_log_is(await read_checked(run_store, run_id), records, "the log came back reordered")
        await _order_under_other_clocks(run_store)
        await _order_at_every_size(run_store)

    async def test_runs_are_isolated(self, run_store: RunStore) -> None:
        """Records appended to one run never show up in another's log.

        Two runs' records mixed into one log rebuild a conversation nobody had; a store that
        ignores or truncates the run id also refuses the second run's start as "already
        exists".
        """
        check_store(run_store)
        first, second = fresh_run_ids(2)  # the same 128 characters but the last two's case
        first_records: list[Record] = [
            _started(first, "first"),
            ModelCallIntent(step_index=0, prompt_chars=11),
        ]
        second_records: list[Record] = [_started(second, "second")]
        await append_all(run_store, first, first_records)
        await append_all(run_store, second, second_records)
        await run_store.append(first, ModelCallIntent(step_index=1, prompt_chars=12), sequence=2)
        first_records.append(ModelCallIntent(step_index=1, prompt_chars=12))
        assert_log_is(await read_checked(run_store, first), first_records, f"run {first}")
        assert_log_is(await read_checked(run_store, second), second_records, f"run {second}")
        await _numeric_ids_are_isolated(run_store)

    async def test_concurrent_appends_to_distinct_runs(self, run_store: RunStore) -> None:
        """Appends to different runs may interleave freely; none is lost or misplaced.

        A harness drives many runs at once against one store. A store that reads, modifies and
        writes a shared structure around an await (or takes no lock on a shared file) loses
        another run's append — and a lost intent record is exactly what makes a resume repeat an
        action.
        """
        check_store(run_store)
        run_ids = fresh_run_ids(_CONCURRENT_RUNS)
        logs: dict[str, list[Record]] = {}
        for n, run_id in enumerate(run_ids):
            logs[run_id] = [_started(run_id, f"concurrent {n}")]
            logs[run_id].extend(
                ModelCallIntent(step_index=step, prompt_chars=n * 100 + step)
                for step in range(_RECORDS_PER_CONCURRENT_RUN - 1)
            )
        await asyncio.gather(*(append_all(run_store, run_id, logs[run_id]) for run_id in run_ids))
        for run_id in run_ids:
            assert_log_is(
                await read_checked(run_store, run_id),
                logs[run_id],
                f"run {run_id} after concurrent appends",
            )

    @bounded_settings(max_examples=8)
    @given(program=_PROGRAMS)
    async def test_behaves_like_the_reference_store(
        self, run_store: RunStore, program: list[tuple[int, str, str]]
    ) -> None:
        """Under any interleaving of starts, appends (right and wrong ``sequence``), finishes,
        reads and ``run_ids()`` over several runs, every answer matches the reference's.

        The other store promises check one rule at a time on one or two runs; a harness drives
        many runs through one store at once. A store whose fence is shared between runs, that
        forgets a finish after another run's append, or stops listing a run once it finished
        passes each of them and still hands a resume the wrong log or lets a second process
        through. Each example takes three runs through start, work, finish, late writes and a
        second start, interleaved and at drawn wrong sequences, and compares every answer —
        accepted, or the exception type (``RunAlreadyExists`` before ``RunAlreadyFinished``
        before ``RunConflict``) — each log and the run list with the reference: the kit's own
        model of the append rules, which shares no code with the bundled stores (a bug in their
        shared rules would otherwise be in the reference too).
        """
        check_store(run_store)
        comparison = StoreComparison(run_store)
        for run, kind, choice in program:
            await comparison.append(run, kind, choice)
            await comparison.check_log(run)
        await comparison.check_all()

    async def test_start_is_exclusive(self, run_store: RunStore, store_samples: object) -> None:
        """A ``RunStarted`` for a run that has a log raises ``RunAlreadyExists`` and writes nothing.

        Two processes given the same run id must not both believe they started it; the second
        start would overwrite or interleave with the first's log. ``RunAlreadyExists`` takes
        precedence over ``RunConflict`` (a second start at the wrong sequence is still "exists")
        and over ``RunAlreadyFinished`` (a start for a finished run is still "exists": ``run()``
        tells the user to pick another id, not that a run they never started is over). When
        ``store_samples`` names a factory this holds across store objects: three objects opened
        on the same data each check the run is free, one starts it, the others are refused.
        """
        check_store(run_store)
        for finished, run_id in zip((False, True), fresh_run_ids(2), strict=True):
            records: list[Record] = [_started(run_id, "original"), *[_finished()] * finished]
            await append_all(run_store, run_id, records)
            before = await read_checked(run_store, run_id)
            for sequence in (len(records), 0):
                with pytest.raises(RunAlreadyExists):
                    await run_store.append(run_id, _started(run_id, "intruder"), sequence=sequence)
            await _start_refused_under_other_clocks(run_store, run_id)
            what = "finished" if finished else "started"
            # Compared with the log as read before, not as appended: "writes nothing" is the
            # promise here, how faithfully a finish reads back is round_trips_every_record_kind's.
            assert_log_is(
                await read_checked(run_store, run_id),
                before.records,
                f"a refused start changed a {what} log",
            )
        await across_objects(store_samples, exclusive_start_across_objects)

    async def test_finished_run_rejects_records(
        self, run_store: RunStore, store_samples: object
    ) -> None:
        """After ``RunFinished`` any append raises ``RunAlreadyFinished`` and writes nothing.

        A finished run is final: a late writer (a retried job, a stale worker) must not extend
        it, or the result rebuilt from the log would change after it was reported.
        ``RunAlreadyFinished`` takes precedence over ``RunConflict``. When ``store_samples``
        names a factory this holds across store objects: a run finished through one of three
        objects on the same data is final for the two that read it before the finish.
        """
        check_store(run_store)
        run_id = fresh_run_id()
        records: list[Record] = [_started(run_id), _finished()]
        await append_all(run_store, run_id, records)
        late: list[tuple[Record, int]] = [
            (ModelCallIntent(step_index=1, prompt_chars=1), 2),
            (_finished(), 2),
            (ModelCallIntent(step_index=1, prompt_chars=1), 5),
        ]
        for record, sequence in late:
            with pytest.raises(RunAlreadyFinished):
                await run_store.append(run_id, record, sequence=sequence)
        assert_log_is(
            await read_checked(run_store, run_id), records, "a refused append changed the log"
        )
        await across_objects(store_samples, finish_across_objects)

    async def test_rejects_out_of_order_sequence(
        self, run_store: RunStore, store_samples: object
    ) -> None:
        """``append`` with a ``sequence`` other than the log's length raises ``RunConflict`` and
        writes nothing; the right sequence then succeeds.

        This is the fence between two processes driving one run (a scheduler retried a job whose
        first attempt is still alive): the loser's append fails *before* it executes a
        never-replay action, instead of both executing it. The first append is fenced too: a
        start at any sequence but 0 on an empty log is a ``RunConflict`` — a store that fences
        only runs it already holds lets a writer that believes the run is further along create it.
        When ``store_samples`` names a factory the fence holds across store objects: of three
        objects on the same data, each appending at the length it last read after another
        object moved the log on is refused.
        """
        check_store(run_store)
        run_id = fresh_run_id()
        for sequence in (1, 3):
            with pytest.raises(RunConflict):
                await run_store.append(run_id, _started(run_id), sequence=sequence)
        # Had a refused start written anything, this start at 0 would be refused as "exists".
        records: list[Record] = [_started(run_id)]
        await append_all(run_store, run_id, records)
        stale = ActionIntent(step_index=0, action=Action(text="an action that must not run twice"))
        for sequence in (0, 2, 7):
            with pytest.raises(RunConflict):
                await run_store.append(run_id, stale, sequence=sequence)
        assert_log_is(
            await read_checked(run_store, run_id), records, "a refused append changed the log"
        )
        await run_store.append(run_id, stale, sequence=1)
        assert_log_is(
            await read_checked(run_store, run_id),
            [*records, stale],
            "the append at the right sequence after refused ones",
        )
        await across_objects(store_samples, fence_across_objects)
        await across_processes(store_samples)

"""The run store's batches: ``append_many`` and the inline commit are atomic, fenced and ordered
like the single appends they stand for."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.ports import BatchRunStore, RunStore
from polyloop.testing._run_store._inline_commit import (
    calls,
    inline_or_skip,
    read,
    same_log,
    sized_batches,
)
from polyloop.testing._run_store._run_ids import (
    fresh_run_id,
    fresh_run_ids,
)
from polyloop.testing._run_store._store_calls import (
    append_all,
    assert_log_is,
    check_store,
    read_checked,
)
from polyloop.testing._run_store._store_objects import (
    across_objects,
    batch_fence_across_objects,
)
from polyloop.testing._shared._base import (
    bounded_settings,
)
from polyloop.testing._shared._sample_records import finished as _finished
from polyloop.testing._shared._sample_records import started as _started
from polyloop.testing._shared._skips import not_applicable
from polyloop.types import (
    Action,
    ActionIntent,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
)

__all__ = ["BatchPromises"]

#: Records a batch may hold in any order (the append rules fence only starts and finishes):
#: few enough that equal records meet, different enough that any reordering shows.
_MIDDLE = st.sampled_from(
    (
        ModelCallIntent(step_index=0, prompt_chars=5),
        ModelCallIntent(step_index=3, prompt_chars=1),
        ModelReplied(step_index=0, reply=ModelReply(text="a reply")),
        ActionIntent(step_index=2, action=Action(text="b")),
        ActionIntent(step_index=0, action=Action(text="a")),
        ModelCallIntent(step_index=1, prompt_chars=9),
    )
)


def _batch_program(
    middle: list[Record], cut_points: set[int], finish: bool
) -> tuple[list[Record], list[int], bool]:
    total = 1 + len(middle) + finish
    return middle, sorted(cut for cut in cut_points if 0 < cut < total), finish


#: One program always tried first, whatever the seed: one batch holding the start, kinds out of
#: a step's order, a step going back and two equal records, then a batch ending the run.
_ADVERSE_BATCHES: tuple[list[Record], list[int], bool] = (
    [
        ActionIntent(step_index=2, action=Action(text="b")),
        ModelCallIntent(step_index=3, prompt_chars=1),
        ModelCallIntent(step_index=3, prompt_chars=1),
        ModelReplied(step_index=0, reply=ModelReply(text="a reply")),
        ModelCallIntent(step_index=0, prompt_chars=5),
    ],
    [5],
    True,
)


def _sized_program() -> tuple[list[Record], list[int], bool]:
    """The start alone, then one batch of each size just under, at and over 2, 4, 8, 16 and
    64 KiB of JSON (``BOUNDARY_BYTE_SIZES``): a store may take another path past a size."""
    batches = sized_batches(0)
    middle = [record for batch in batches for record in batch]
    cuts = list(itertools.accumulate((len(b) for b in batches[:-1]), initial=1))
    return middle, cuts, False


_SIZED_BATCHES = _sized_program()

#: (records between start and finish, where calls begin, whether the run finishes).
_BATCH_PROGRAMS = st.builds(
    _batch_program,
    st.lists(_MIDDLE, min_size=2, max_size=12),
    st.sets(st.integers(min_value=1, max_value=13), max_size=5),
    st.booleans(),
)


def _require_batches(store: RunStore) -> BatchRunStore:
    check_store(store)
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


class BatchPromises:
    """``append_many`` and the inline commit: atomic, fenced and ordered."""

    async def test_batch_is_atomic(self, run_store: RunStore) -> None:
        """``append_many`` writes all of its records or none: a batch whose k-th record breaks
        an append rule raises that rule's error and leaves the log as it was.

        The loop commits a step's reply together with its action intent. A store that writes
        the records before the bad one leaves a log the loop never wrote — a reply without the
        intent it was committed with, or records after a refused finish. Checked when the store
        has ``append_many`` (the optional batch method of the seam).
        """
        batches = _require_batches(run_store)
        run_id = fresh_run_id()
        records: list[Record] = [_started(run_id)]
        await append_all(run_store, run_id, records)
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
            assert_log_is(
                await read_checked(run_store, run_id),
                records,
                f"a refused batch ending {error.__name__}",
            )

    async def test_batch_is_fenced(self, run_store: RunStore, store_samples: object) -> None:
        """``append_many`` at a ``sequence`` other than the log's length raises ``RunConflict``
        and writes none of the batch; at the right ``sequence`` every record takes the next
        index, in order.

        This is the fence of ``append`` applied to the batch as a whole: the losing process of a
        race must not get half of its batch in — its action intent would then sit in the
        winner's log as if the winner had meant it. When ``store_samples`` names a factory the
        batch fences hold across store objects, as the single appends' do (a batch takes a
        path of its own in a store): of three objects on the same data, a batch at the length
        an object last saw after another moved the log on is a ``RunConflict``, a batch
        starting the run again a ``RunAlreadyExists``, a batch after another object's finish a
        ``RunAlreadyFinished``.
        """
        batches = _require_batches(run_store)
        run_id = fresh_run_id()
        records: list[Record] = [_started(run_id)]
        await append_all(run_store, run_id, records)
        batch: list[Record] = [
            ModelCallIntent(step_index=0, prompt_chars=5),
            ActionIntent(step_index=0, action=Action(text="an action that must not run twice")),
        ]
        for sequence in (0, 2, 9):
            with pytest.raises(RunConflict):
                await batches.append_many(run_id, batch, sequence=sequence)
            assert_log_is(
                await read_checked(run_store, run_id), records, "a stale batch changed the log"
            )
        await batches.append_many(run_id, batch, sequence=1)
        with pytest.raises(RunConflict):  # the same batch again: the log has moved on
            await batches.append_many(run_id, batch, sequence=1)
        assert_log_is(
            await read_checked(run_store, run_id),
            [*records, *batch],
            "the batch at the right sequence",
        )
        await across_objects(store_samples, batch_fence_across_objects)

    @bounded_settings(max_examples=10)
    @given(program=_BATCH_PROGRAMS)
    @example(program=_ADVERSE_BATCHES)
    @example(program=_SIZED_BATCHES)
    async def test_batches_and_single_appends_interleave_in_order(
        self, run_store: RunStore, program: tuple[list[Record], list[int], bool]
    ) -> None:
        """Single appends and batches take consecutive sequences in the order they were made,
        and a batch may end the run (a final step with its ``RunFinished``).

        The loop mixes both on one log and resumes from what it reads back; a store that keeps
        a batch apart from single records, or reorders inside a batch, rebuilds another run.
        Batches hold records in any order the append rules accept — kinds mixed and repeated,
        step indexes going back, equal records side by side (a store that sorts or groups a
        batch by kind or key, writes it through a set, or drops a record equal to one before
        it is caught) — and the log must read back record for record as sent. Every run also
        sends batches of each size just under, at and over 2, 4, 8, 16 and 64 KiB of JSON,
        where real stores switch to chunked or buffered writes.
        """
        batches = _require_batches(run_store)
        middle, cuts, finish = program
        run_id = fresh_run_id()
        records: list[Record] = [_started(run_id), *middle, *[_finished()] * finish]
        calls = [records[start:end] for start, end in itertools.pairwise([0, *cuts, len(records)])]
        sequence = 0
        for call in calls:
            if len(call) == 1:
                await run_store.append(run_id, call[0], sequence=sequence)
            else:
                await batches.append_many(run_id, call, sequence=sequence)
            sequence += len(call)
        sizes = [len(call) for call in calls]
        assert_log_is(
            await read_checked(run_store, run_id),
            records,
            f"calls of {sizes} records (1: append, more: append_many)",
        )

    async def test_inline_commit_declines_without_effect(self, run_store: RunStore) -> None:
        """A ``commit_now`` that returns ``False`` has done nothing: the log is as it was, and
        ``append_many`` of the same batch at the same ``sequence`` then commits it.

        The loop awaits ``append_many`` whenever ``commit_now`` declines. A store that wrote
        some or all of the batch before declining makes that commit a ``RunConflict`` — or, for
        a record the fence does not catch, a log holding it twice. Checked when the store offers
        ``commit_now`` (``polyloop.ports.InlineCommitRunStore``), on the batches of a run as the
        loop commits them, each preceded and followed by a read of the log; a store that never
        declines on them keeps this promise on them.
        """
        commit_now, batches = inline_or_skip(run_store)
        for finish in (False, True):
            run_id = fresh_run_id()
            sequence = 0
            for batch in calls(run_id, finish=finish):
                before = await read(run_store, run_id, sequence=sequence)
                if not commit_now(run_id, batch, sequence=sequence):
                    same_log(
                        await read(run_store, run_id),
                        before,
                        f"commit_now declined the batch at sequence {sequence} (returned False) "
                        "but the log changed",
                    )
                    await batches.append_many(run_id, batch, sequence=sequence)
                sequence += len(batch)

    async def test_inline_commit_is_atomic_fenced_and_durable(self, run_store: RunStore) -> None:
        """``commit_now`` is ``append_many`` without the await: a batch that breaks an append
        rule raises that rule's error (or is declined) with nothing written, a stale
        ``sequence`` raises ``RunConflict`` (or is declined) with nothing written, and a batch
        it commits (``True``) is in the log when it returns.

        The loop calls it in the run's own task and runs the action as soon as it returned
        ``True``: half a batch, a batch past the fence, or a commit that lands only later (a
        write scheduled for after the return) is a log the loop never wrote, or an action run
        with no durable intent. Checked when the store offers ``commit_now``: each committed
        batch is compared, read back at once, with the same batch awaited through
        ``append_many`` on a twin run.
        """
        commit_now, batches = inline_or_skip(run_store)
        run_id, twin = fresh_run_ids(2)
        sequence = 0
        for batch, twin_batch in zip(
            calls(run_id, finish=False), calls(twin, finish=False), strict=True
        ):
            await batches.append_many(twin, twin_batch, sequence=sequence)
            if commit_now(run_id, batch, sequence=sequence):
                same_log(
                    await read(run_store, run_id),
                    await read(run_store, twin),
                    f"read at once after commit_now(sequence={sequence}) returned True",
                )
            else:
                await batches.append_many(run_id, batch, sequence=sequence)
            sequence += len(batch)
        written = await read(run_store, run_id)
        refused: list[tuple[tuple[Record, ...], int, type[Exception]]] = [
            (
                (ModelCallIntent(step_index=2, prompt_chars=1), _started(run_id)),
                sequence,
                RunAlreadyExists,
            ),
            (
                (_finished(), ModelCallIntent(step_index=2, prompt_chars=2)),
                sequence,
                RunAlreadyFinished,
            ),
            ((ModelCallIntent(step_index=2, prompt_chars=3),), sequence - 1, RunConflict),
            ((ModelCallIntent(step_index=2, prompt_chars=4),), sequence + 3, RunConflict),
        ]
        for batch, at, error in refused:
            try:
                declined = not commit_now(run_id, batch, sequence=at)
            except error:
                declined = False
            else:
                assert declined, (
                    f"commit_now of a batch breaking {error.__name__} (sequence {at}) returned True"
                )
            same_log(
                await read(run_store, run_id),
                written,
                f"commit_now of a batch breaking {error.__name__} (sequence {at}) "
                + ("declined" if declined else "raised"),
            )

    async def test_inline_commit_matches_append_many(self, run_store: RunStore) -> None:
        """Runs committed through ``commit_now`` (awaiting ``append_many`` when it declines, as
        the loop does) and through ``append_many`` alone read back as the same log after every
        commit.

        The loop takes either path for any commit — ``commit_now`` declines when it would have
        to wait — so a resumed run must not depend on which one a commit took: a path that
        reorders, drops, re-encodes or delays records rebuilds another run. Checked when the
        store offers ``commit_now``, on runs that finish and runs that do not.
        """
        commit_now, batches = inline_or_skip(run_store)
        for finish in (False, True):
            inline, awaited = fresh_run_ids(2)
            sequence = 0
            for batch, same in zip(
                calls(inline, finish=finish), calls(awaited, finish=finish), strict=True
            ):
                if not commit_now(inline, batch, sequence=sequence):
                    await batches.append_many(inline, batch, sequence=sequence)
                await batches.append_many(awaited, same, sequence=sequence)
                sequence += len(batch)
                same_log(
                    await read(run_store, inline),
                    await read(run_store, awaited),
                    f"after the commit ending at sequence {sequence - 1}, the run committed "
                    "through commit_now against the run committed through append_many",
                )

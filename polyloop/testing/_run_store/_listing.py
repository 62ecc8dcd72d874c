"""The run store's listing and index: every run is listed, and the index agrees with the log."""

from __future__ import annotations

from collections import Counter

import pytest

from polyloop._base._run_index import RunQuery
from polyloop.errors import RunConflict
from polyloop.ports import RunStore
from polyloop.testing._run_store._index_probe import (
    append_call,
    index_or_skip,
    probe_calls,
    row_problems,
    the_row,
)
from polyloop.testing._run_store._run_ids import (
    fresh_run_id,
    unique_run_id,
)
from polyloop.testing._run_store._store_calls import (
    check_store,
    read_checked,
)
from polyloop.testing._run_store._store_objects import (
    across_objects,
    listing_across_objects,
)
from polyloop.testing._shared._sample_records import started as _started
from polyloop.testing._shared._shapes import mismatch, short
from polyloop.types import (
    RunStarted,
)

__all__ = ["IndexAndListing"]

#: How many runs the store holds when it is listed again: just past the pages of 100 and 128
#: and the 256 of real listings (boundary catalogue, ``BOUNDARY_COUNTS``), cheaply.
_LISTED_AT = (101, 129, 257)


async def _many_runs_listed(run_store: RunStore) -> None:
    """Start runs until the store holds more than each page size of :data:`_LISTED_AT`, and
    list them each time: every run started is listed, exactly once."""
    started: list[str] = []
    for count in _LISTED_AT:
        while len(started) < count:
            run_id = unique_run_id(f"page{len(started):04d}")
            await run_store.append(run_id, _started(run_id), sequence=0)
            started.append(run_id)
        listed = await run_store.run_ids()
        assert isinstance(listed, list), (
            f"run_ids() must return a list, got {type(listed).__name__}"
        )
        mine, counted = set(started), Counter(listed)
        missing = [r for r in started if r not in counted]
        assert not missing, (
            f"run_ids() of a store holding {count} started runs (and {len(listed)} listed) "
            f"leaves out {len(missing)} of them, e.g. {short(missing[:3])} — a first page "
            "only? run_ids() must list every run"
        )
        twice = sorted(r for r, n in counted.items() if r in mine and n > 1)
        assert not twice, f"run_ids() lists {short(twice[:3])} more than once ({count} runs)"


class IndexAndListing:
    """Every run is listed, and the index agrees with the log."""

    async def test_lists_its_runs(self, run_store: RunStore, store_samples: object) -> None:
        """``run_ids()`` returns a list of str that includes a run once its start was appended.

        ``polyloop runs`` and every analysis that walks a store start here; a run missing from
        the list is invisible. Checked as "absent before, present after", since the store may
        hold other runs; the run id is listed exactly as it was given (128 characters, mixed
        case). When ``store_samples`` names a factory, every one of three store objects on the
        same data lists the runs any of them started, whether it was opened before or after.
        And a store holding more runs than a page — 101, 129 and 257 started runs — lists every
        one of them, exactly once: a listing that returns the first page of its backend (100,
        128 or 256 rows) hides every later run.
        """
        check_store(run_store)
        run_id = fresh_run_id()
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
        await _many_runs_listed(run_store)
        await across_objects(store_samples, listing_across_objects)

    async def test_index_agrees_with_log(self, run_store: RunStore) -> None:
        """After ``RunFinished`` is appended, the run's row in the store's run index agrees
        with its log: stop reason, steps, executed actions, usage, batch, task id and labels.

        Thousands of runs are listed and tallied from the index alone (``polyloop runs``,
        ``polyloop stats``): a row that forgets a stop reason, counts steps wrongly or was
        updated by a batch the append rules refused misreports a whole experiment while every
        log is right. Checked when the store offers the index
        (``polyloop.ports.IndexedRunStore``): a run of every step path is appended as the loop
        commits it, a batch ending the run is refused (stale ``sequence``) and the row must
        still agree; then the real finish, after which the row — found by its batch, and by
        its labels and stop reason — and ``run_stats`` of its batch agree with the log.
        """
        check_store(run_store)
        index = index_or_skip(run_store)
        run_id = fresh_run_id()
        calls, refused, finish = probe_calls(run_id)
        sequence = 0
        for batch in calls:
            await append_call(run_store, run_id, batch, sequence)
            sequence += len(batch)
        start = calls[0][0]
        assert isinstance(start, RunStarted)
        by_batch = RunQuery(batch=start.batch)
        for attempt in (refused, refused[-1:]):
            with pytest.raises(RunConflict):  # the rules refuse it; the index must ignore it
                await append_call(run_store, run_id, attempt, sequence - 1)
        problems = row_problems(
            await the_row(index, run_id, by_batch),
            await read_checked(run_store, run_id),
            run_id,
            "after a refused batch ending the run",
        )
        await append_call(run_store, run_id, [finish], sequence)
        log = await read_checked(run_store, run_id)
        narrow = RunQuery(
            batch=start.batch, labels=start.labels, stop_reasons=(finish.stop_reason.value,)
        )
        for query, by in ((by_batch, "its batch"), (narrow, "batch, labels, stop reason")):
            problems += row_problems(
                await the_row(index, run_id, query), log, run_id, f"found by {by}"
            )
        stats = await index.run_stats(by_batch)
        row = await the_row(index, run_id, by_batch)
        tally = (stats.runs, stats.running, stats.stop_reasons)
        found = mismatch((1, 0, {finish.stop_reason.value: 1}), tally, "tally")
        if found is not None:
            problems.append(
                f"run_stats of its batch: (runs, running, stop_reasons) = {tally} ({found})"
            )
        found = None if row is None else mismatch(row.usage, stats.usage, "usage")
        if row is not None and found is not None:
            problems.append(f"run_stats usage {stats.usage!r}, its row's {row.usage!r} ({found})")
        assert not problems, "\n".join(problems)

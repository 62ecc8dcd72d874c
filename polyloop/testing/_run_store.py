"""The run-store suite.

The store is the intent log a crashed run is resumed from, so everything it hands back must be
exactly what was appended — value and type — and its fences (exclusive start, nothing after the
finish, ``sequence``) are what keep a second process from repeating an action. Every promise
uses fresh run ids (``_run_ids``: 128 characters across the whole grammar, mixed case, ids of
one promise differing only in their last characters — some only in case — each carrying a
``uuid4``) and checks "absent before, present after": the store may already hold other runs (a
shared database).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from polyloop._base._run_index import RunQuery
from polyloop.errors import RunAlreadyExists, RunAlreadyFinished, RunConflict
from polyloop.ports import BatchRunStore, RunStore
from polyloop.testing import strategies as pst
from polyloop.testing._base import (
    ContractBase,
    UnusableSamples,
    bounded_settings,
    missing_fixture,
    require_samples,
    require_seam,
    samples_hint,
)
from polyloop.testing._clock import CLOCKS, wall_clock
from polyloop.testing._crash_writer import FactoryError, load_factory
from polyloop.testing._durability import (
    CrashFindings,
    CrashProbeCannotRun,
    crash_findings,
    reopen_problems,
)
from polyloop.testing._index_probe import (
    append_call,
    index_or_skip,
    probe_calls,
    row_problems,
    the_row,
)
from polyloop.testing._inline_commit import calls, inline_or_skip, read, same_log
from polyloop.testing._power import (
    INSTALL_HINT,
    PowerFindings,
    TracerUnavailable,
    missing_for_power_probe,
    power_findings,
)
from polyloop.testing._run_ids import (
    fresh_run_id,
    fresh_run_ids,
    numeric_run_ids,
    unique_run_id,
)
from polyloop.testing._sample_records import finished as _finished
from polyloop.testing._sample_records import started as _started
from polyloop.testing._samples import StoreSamples
from polyloop.testing._shapes import mismatch, run_log_problems, short
from polyloop.testing._skips import not_applicable, unverifiable
from polyloop.testing._stateful import StoreComparison, lifecycle_programs
from polyloop.testing._store_objects import (
    across_objects,
    across_processes,
    exclusive_start_across_objects,
    fence_across_objects,
    finish_across_objects,
    listing_across_objects,
)

# shared shape, kept on purpose: import list
from polyloop.types import (
    Action,
    ActionIntent,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunLog,
    RunStarted,
)

__all__ = ["RunStoreContract"]

# Built once: constructing a strategy per example costs more than running the example.
_LOGS = pst.run_logs()
_RUN_IDS = pst.run_ids()
_CONCURRENT_RUNS = 8
_RECORDS_PER_CONCURRENT_RUN = 6
_PROGRAMS = lifecycle_programs()
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
#: (records between start and finish, where calls begin, whether the run finishes).
_BATCH_PROGRAMS = st.builds(
    _batch_program,
    st.lists(_MIDDLE, min_size=2, max_size=12),
    st.sets(st.integers(min_value=1, max_value=13), max_size=5),
    st.booleans(),
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


def _sample_line() -> str:
    """Which sample turns a crash promise on, said for every route that finds a store."""
    factory = "StoreSamples(factory='package.module:callable')"
    return (
        "give the suite a factory (a callable that takes a fresh directory and returns your "
        f"store over data kept there): {samples_hint(RunStoreContract, 'store_samples', factory)}"
        "; the kit then checks this"
    )


_ATOMIC = (
    "a crash during append() leaves the record wholly present or wholly absent",
    "write to one transaction or one atomic rename per record",
)
_DURABLE = (
    "once append() returns, the record survives a crash: the log after a crash is a prefix of "
    "what was appended",
    "commit (fsync, or a synchronous database commit) before append() returns",
)


def _factory_or_skip(
    samples: object, promise: tuple[str, str], test: str = "test it by killing a writer"
) -> str:
    """The factory to probe, or the skip that says which sample turns the promise on."""
    if samples is None:
        unverifiable(
            promise=promise[0],
            why="the suite has no way to reopen your store's data or to kill a process writing it",
            verify_yourself=f"{_sample_line()}; or {promise[1]}, and {test}",
        )
    checked = require_samples(samples, StoreSamples, "store_samples")
    if checked.factory is None:
        not_applicable(
            promise=promise[0],
            why="StoreSamples(in_memory=True) declares that the store keeps nothing across a crash",
            verify_yourself="use a persistent store for runs that must survive a crash",
        )
    return checked.factory


def _load(factory: str) -> Callable[[Path], Any]:
    try:
        return load_factory(factory)
    except FactoryError as error:
        raise UnusableSamples(f"store_samples: {error}", "store_samples") from None


async def _probe(factory: str, promise: tuple[str, str]) -> CrashFindings:
    _load(factory)
    try:
        return await crash_findings(factory)
    except CrashProbeCannotRun as error:
        # Nothing was judged: neither held nor violated (a store need not serve two processes).
        unverifiable(
            promise=promise[0],
            why=f"the crash probe could not run: {error}",
            verify_yourself=(
                f"{promise[1]}, and test it by killing a process that writes through your store"
            ),
        )
    except RuntimeError as error:
        pytest.fail(f"the crash probe's writer failed: {error}", pytrace=False)


_POWER = (
    "an acknowledged append survives a power loss or an operating-system crash",
    "fsync (or fdatasync) the file before append() returns, and its directory after creating "
    "or renaming a file in it",
)
_POWER_BY_HAND = (
    "check where your store syncs: `strace -f -e trace=write,pwrite64,fsync,fdatasync,rename,"
    "openat` on a test that appends shows whether an fsync or fdatasync of the file (and of its "
    "directory, for a new file or a rename) comes before append returns; then crash the "
    "storage under it (LazyFS, or a dm-log-writes device replayed up to each flush) and check "
    "that the store opens and every acknowledged record reads back; a database server: run it "
    "with synchronous commits (PostgreSQL synchronous_commit=on, fsync=on, full_page_writes=on)"
)


async def _power_or_skip(samples: object) -> PowerFindings:
    """The power-loss probe's findings, or the skip that says what it lacks to run."""
    factory = _factory_or_skip(samples, _POWER, "test it on storage that drops unsynced writes")
    missing, install = missing_for_power_probe(), f"{INSTALL_HINT}; or {_POWER_BY_HAND}"
    if missing is not None:
        unverifiable(promise=_POWER[0], why=missing, verify_yourself=install)
    _load(factory)
    try:
        findings = await power_findings(factory)
    except TracerUnavailable as error:
        unverifiable(
            promise=_POWER[0],
            why=str(error),
            verify_yourself=f"{INSTALL_HINT}; or {_POWER_BY_HAND}",
        )
    except RuntimeError as error:
        pytest.fail(f"the power-loss probe could not run: {error}", pytrace=False)
    if findings.not_judged is not None:
        unverifiable(promise=_POWER[0], why=findings.not_judged, verify_yourself=_POWER_BY_HAND)
    return findings


def _power_summary(findings: PowerFindings) -> str:
    shown = findings.violations[:5]
    if len(findings.violations) > 5:
        shown.append(f"… and {len(findings.violations) - 5} more")
    return "\n".join([*shown, f"({findings.summary()})"])


def _summary(problems: list[str], findings: CrashFindings) -> str:
    shown = "\n".join(problems[:5])
    more = f"\n… and {len(problems) - 5} more" if len(problems) > 5 else ""
    return f"{shown}{more}\n({findings.acknowledged} acknowledged appends over the rounds)"


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
                f"{type(error).__name__}: {error}; the runs {run_ids} were started in that order "
                "and are distinct",
                pytrace=False,
            )
    listed = await store.run_ids()
    for run_id in run_ids:
        log = await _read(store, run_id)
        _assert_log_is(
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
        await _append_all(store, run_id, records)
        return
    for start in range(0, len(records), _CHUNK):
        await batches(run_id, records[start : start + _CHUNK], sequence=start)


async def _read_sized(store: RunStore, run_id: str, what: str) -> RunLog:
    """``_read``, with an exception out of ``read_log`` named by what the log holds."""
    try:
        return await _read(store, run_id)
    except AssertionError:
        raise
    except Exception as error:
        pytest.fail(
            f"read_log of {what} raised {type(error).__name__}: {str(error)[:300]}",
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
        _assert_log_is(await _read_sized(store, run_id, what), records, what)
    run_id = fresh_run_id()
    big: list[Record] = [_started(run_id, "records of every size")]
    for letter in ("x", "\u00e9"):
        big += [ActionIntent(step_index=n, action=Action(text=letter * n)) for n in _TEXT_SIZES]
    await _append_in_chunks(store, run_id, big)
    what = f"records whose texts are {_TEXT_SIZES} characters long (one- and two-byte)"
    _assert_log_is(await _read_sized(store, run_id, what), big, what)


async def _order_under_other_clocks(store: RunStore) -> None:
    """Appends made under other wall clocks, dates and time zones (a clock stepped back, a
    process in another zone) read back in append order, under yet another clock (issue 30
    §1, time)."""
    run_id = fresh_run_id()
    records: list[Record] = [_started(run_id, "appended under other clocks")]
    await _append_all(store, run_id, records)
    for step, (offset, zone, _) in enumerate(CLOCKS):
        record = ModelCallIntent(step_index=step, prompt_chars=step)
        with wall_clock(offset, zone):
            await store.append(run_id, record, sequence=len(records))
        records.append(record)
    clocks = "; ".join(what for _, _, what in CLOCKS)
    for offset, zone, what in (CLOCKS[0], CLOCKS[-1]):
        with wall_clock(offset, zone):
            log = await _read(store, run_id)
        _assert_log_is(
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
                raised = f"raised {type(error).__name__}: {error}"
            else:
                raised = "was accepted"
        pytest.fail(
            f"a second start of run {run_id} under another wall clock ({what}) {raised}; "
            "it had to raise RunAlreadyExists (a run is never abandoned by the clock)",
            pytrace=False,
        )


def _assert_log_is(log: RunLog, expected: Sequence[Record], what: str) -> None:
    found = mismatch(tuple(expected), log.records, "records")
    assert found is None, f"{what}: {found}"


class RunStoreContract(ContractBase):
    """Inherit this and override ``run_store`` (return a fresh, open store).

    Records are the library's own, so no samples are needed — except to check the two crash
    promises: a ``store_samples`` fixture (a method here, or beside a tagged fixture), or the
    fixture a tag's ``samples=`` names, returns :class:`~polyloop.testing.StoreSamples` naming a
    factory that reopens your store's data (from another process too). The store may
    be shared with other runs (a real database); every promise works on fresh ``uuid4`` run ids.
    """

    seam = "run_store"
    samples_fixture = None
    optional_samples_fixture = "store_samples"

    @pytest.fixture
    def store_samples(self) -> StoreSamples | None:
        """Optional: ``StoreSamples(factory="package.module:callable")`` turns the two crash
        promises on. Override this fixture (or define one of this name outside the class: it is
        read from there); the default ``None`` leaves them unverifiable."""
        return None

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
        run_id = fresh_run_id()
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
        Logs cover all six kinds, nasty text in every text field (lone surrogates, CJK, emoji,
        combining marks, control characters) and large integers.
        """
        _check_store(run_store)
        drawn = data.draw(_LOGS, label="records")
        run_id = unique_run_id(data.draw(_RUN_IDS, label="run id"))
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
        run_id = fresh_run_id()
        records: list[Record] = [_started(run_id)]
        for step in (5, 3, 9, 0, 7, 3):
            records.append(ModelCallIntent(step_index=step, prompt_chars=100 - step))
        await _append_all(run_store, run_id, records)
        _assert_log_is(await _read(run_store, run_id), records, "the log came back reordered")
        await _order_under_other_clocks(run_store)
        await _order_at_every_size(run_store)

    async def test_runs_are_isolated(self, run_store: RunStore) -> None:
        """Records appended to one run never show up in another's log.

        Two runs' records mixed into one log rebuild a conversation nobody had; a store that
        ignores or truncates the run id also refuses the second run's start as "already
        exists".
        """
        _check_store(run_store)
        first, second = fresh_run_ids(2)  # the same 128 characters but the last two's case
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
        await _numeric_ids_are_isolated(run_store)

    async def test_concurrent_appends_to_distinct_runs(self, run_store: RunStore) -> None:
        """Appends to different runs may interleave freely; none is lost or misplaced.

        A harness drives many runs at once against one store. A store that reads, modifies and
        writes a shared structure around an await (or takes no lock on a shared file) loses
        another run's append — and a lost intent record is exactly what makes a resume repeat an
        action.
        """
        _check_store(run_store)
        run_ids = fresh_run_ids(_CONCURRENT_RUNS)
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
        _check_store(run_store)
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
        _check_store(run_store)
        for finished, run_id in zip((False, True), fresh_run_ids(2), strict=True):
            records: list[Record] = [_started(run_id, "original"), *[_finished()] * finished]
            await _append_all(run_store, run_id, records)
            before = await _read(run_store, run_id)
            for sequence in (len(records), 0):
                with pytest.raises(RunAlreadyExists):
                    await run_store.append(run_id, _started(run_id, "intruder"), sequence=sequence)
            await _start_refused_under_other_clocks(run_store, run_id)
            what = "finished" if finished else "started"
            # Compared with the log as read before, not as appended: "writes nothing" is the
            # promise here, how faithfully a finish reads back is round_trips_every_record_kind's.
            _assert_log_is(
                await _read(run_store, run_id),
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
        _check_store(run_store)
        run_id = fresh_run_id()
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
        _check_store(run_store)
        run_id = fresh_run_id()
        for sequence in (1, 3):
            with pytest.raises(RunConflict):
                await run_store.append(run_id, _started(run_id), sequence=sequence)
        # Had a refused start written anything, this start at 0 would be refused as "exists".
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
        await across_objects(store_samples, fence_across_objects)
        await across_processes(store_samples)

    async def test_lists_its_runs(self, run_store: RunStore, store_samples: object) -> None:
        """``run_ids()`` returns a list of str that includes a run once its start was appended.

        ``polyloop runs`` and every analysis that walks a store start here; a run missing from
        the list is invisible. Checked as "absent before, present after", since the store may
        hold other runs; the run id is listed exactly as it was given (128 characters, mixed
        case). When ``store_samples`` names a factory, every one of three store objects on the
        same data lists the runs any of them started, whether it was opened before or after.
        """
        _check_store(run_store)
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
        await across_objects(store_samples, listing_across_objects)

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
        run_id = fresh_run_id()
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

    @bounded_settings(max_examples=10)
    @given(program=_BATCH_PROGRAMS)
    @example(program=_ADVERSE_BATCHES)
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
        it is caught) — and the log must read back record for record as sent.
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
        _assert_log_is(
            await _read(run_store, run_id),
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
        _check_store(run_store)
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
            await _read(run_store, run_id),
            run_id,
            "after a refused batch ending the run",
        )
        await append_call(run_store, run_id, [finish], sequence)
        log = await _read(run_store, run_id)
        narrow = RunQuery(
            batch=start.batch, labels=start.labels, stop_reasons=(finish.stop_reason.value,)
        )
        for query, found in ((by_batch, "its batch"), (narrow, "batch, labels, stop reason")):
            problems += row_problems(
                await the_row(index, run_id, query), log, run_id, f"found by {found}"
            )
        stats = await index.run_stats(by_batch)
        row = await the_row(index, run_id, by_batch)
        tally = (stats.runs, stats.running, stats.stop_reasons)
        if tally != (1, 0, {finish.stop_reason.value: 1}):
            problems.append(f"run_stats of its batch: (runs, running, stop_reasons) = {tally}")
        if row is not None and stats.usage != row.usage:
            problems.append(f"run_stats usage {stats.usage!r}, its row's {row.usage!r}")
        assert not problems, "\n".join(problems)

    async def test_atomic_append(self, run_store: RunStore, store_samples: object) -> None:
        """A crash during ``append`` leaves the record wholly present or wholly absent, and a
        crash during ``append_many`` the whole batch or none of it.

        A half-written record is unreadable; the resume then cannot tell whether the action
        whose intent it was has run — and half a batch is a reply without the intent it was
        committed with. Checked when ``store_samples`` names a factory: writer processes are
        killed (``SIGKILL``) after varied numbers of appends, and at many points spread over
        the measured duration of one big call — an ``append`` of a record over 1 MiB, and, when
        the store has it, an ``append_many`` around one — so the kill lands inside the write,
        which then spans many pages and system calls. Then every run must read back exactly as
        a prefix of what was sent, ending at a batch boundary (no partial or torn record, no
        decode error, ``StoreCorrupted`` included), and take its next append at the right
        sequence. This is a *process* crash: the operating system keeps what was written, so a
        missing ``fsync`` cannot show here (``run_store.survives_power_loss`` is that promise).
        """
        factory = _factory_or_skip(store_samples, _ATOMIC)
        findings = await _probe(factory, _ATOMIC)
        assert not findings.atomicity, _summary(findings.atomicity, findings)

    async def test_prefix_durability(self, run_store: RunStore, store_samples: object) -> None:
        """After a crash the log is a prefix of what was appended: a returned append is durable.

        The loop executes an action only after its intent's append returned; if that record
        can vanish in a crash, the resume repeats an action it was told had an intent. Checked
        when ``store_samples`` names a factory: a second store opened on the same data must
        read back every acknowledged record (a forgotten commit shows here), and after a writer
        process is killed — between calls, or inside a big ``append`` or ``append_many`` —
        every call it was told had returned must be there, batches whole. This is a *process*
        crash (``SIGKILL`` cannot lose the operating system's page cache, so a missing
        ``fsync`` cannot show); surviving a power loss is ``run_store.survives_power_loss``.
        """
        factory = _factory_or_skip(store_samples, _DURABLE)
        with tempfile.TemporaryDirectory(prefix="polyloop-reopen-") as directory:
            problems = await reopen_problems(_load(factory), Path(directory))
        assert not problems, "\n".join(problems)
        findings = await _probe(factory, _DURABLE)
        assert not findings.durability, _summary(findings.durability, findings)

    async def test_survives_power_loss(self, run_store: RunStore, store_samples: object) -> None:
        """Once ``append`` or ``append_many`` returned, its records survive a power loss or an
        operating-system crash, and the store then opens and reads as a prefix of what was
        appended.

        The process-crash promises (``atomic_append``, ``prefix_durability``) cannot see this:
        a killed process leaves its writes in the operating system's page cache, which reaches
        the disk anyway. Only the ``fsync`` (or ``fdatasync``, or a synchronous database
        commit) before ``append`` returns — of the file and, for a new file or a rename, of its
        directory — puts the record on the disk, and leaving it out passes every test that runs
        in a process. Checked when ``store_samples`` names a factory, on Linux with ``strace``:
        the writer appends through the factory on an empty directory — new runs and existing
        ones, single appends and ``append_many`` batches, a run finished — under a system-call
        trace; the trace is replayed up to many crash points (before and after every sync,
        inside every write of more than a page), keeping of what was not synced nothing, all,
        only file data, only directory changes, or a seeded choice. On each state the store
        must open, every acknowledged record must read back exactly, no record or batch may be
        half-present, and the append rules must still hold (a finished run stays finished).
        """
        findings = await _power_or_skip(store_samples)
        assert not findings.violations, _power_summary(findings)

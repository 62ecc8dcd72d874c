"""SQLiteStore: the append rules, durability in force, bad files refused untouched, concurrency."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import os
import sqlite3
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from polyloop import (
    Action,
    ActionIntent,
    ActionStatus,
    InvalidRunId,
    ModelCallIntent,
    ModelReplied,
    ModelReply,
    Record,
    RunAlreadyExists,
    RunAlreadyFinished,
    RunConflict,
    RunFinished,
    RunStarted,
    SchemaVersionError,
    StepCompleted,
    StepRecord,
    StopReason,
    StoreCorrupted,
)
from polyloop.ports import RunStore
from polyloop.stores import SQLiteStore
from polyloop.stores._sqlite import _inspect_file

pytestmark = pytest.mark.asyncio


def started(run_id: str) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        goal="count to three",
        parameters={"budget": {"max_steps": 3}},
        parameters_hash="sha256:" + "0" * 64,
        started_at="2026-11-30T10:00:00.000Z",
    )


def intent(step_index: int = 0) -> ModelCallIntent:
    return ModelCallIntent(step_index=step_index, prompt_chars=42)


def finished() -> RunFinished:
    return RunFinished(
        stop_reason=StopReason.AGENT_FINISHED,
        final_answer="three",
        executed_actions=1,
        finished_at="2026-11-30T10:00:01.000Z",
    )


def every_kind(run_id: str) -> list[Record]:
    step = StepRecord(
        step_index=0,
        raw_output="run `echo 1` — ünïcode ✓",
        response_chars=24,
        reasoning_chars=0,
        action="echo 1",
        parse_ok=True,
        parse_error=None,
        observation="1\n",
        observation_is_synthetic=False,
        observation_truncated_chars=0,
        prompt_chars=42,
        llm_call_id="call-0",
        step_wall_ms=7,
        tool_name="shell",
        tool_args_json='{"cmd":"echo 1"}',
        action_status=ActionStatus.EXECUTED,
    )
    return [
        started(run_id),
        intent(0),
        ModelReplied(
            step_index=0,
            reply=ModelReply(text=step.raw_output, call_id="call-0", usage={"prompt_tokens": 9}),
        ),
        ActionIntent(
            step_index=0, action=Action(text="echo 1", tool_name="shell", tool_args={"cmd": "x"})
        ),
        StepCompleted(step=step),
        finished(),
    ]


async def append_all(store: RunStore, run_id: str, records: list[Record]) -> None:
    for sequence, record in enumerate(records):
        await store.append(run_id, record, sequence=sequence)


async def write_and_close(db: Path, run_id: str, records: list[Record]) -> None:
    """Write a log and close the store, so no checkpoint can change the file afterwards."""
    async with SQLiteStore(db) as store:
        await append_all(store, run_id, records)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Plain file operations, kept out of the async test bodies (they block, briefly).
def write_file(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def read_file(path: Path) -> bytes:
    return path.read_bytes()


def exists(path: Path) -> bool:
    return path.exists()


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def execute_raw(path: Path, *statements: str) -> None:
    """Change a database behind the store's back (to damage it on purpose)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


# --------------------------------------------------------------------------- round trip


async def test_every_record_kind_reads_back_equal_and_in_order(db: Path) -> None:
    store = SQLiteStore(db)
    records = every_kind("r1")
    await append_all(store, "r1", records)
    await store.aclose()

    log = await SQLiteStore(db).read_log("r1")  # a new store object: it came from the file

    assert log.records == tuple(records)


async def test_unknown_run_reads_as_an_empty_log(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "known", [started("known")])

    log = await store.read_log("unknown")

    assert log.records == ()


async def test_run_ids_are_listed_sorted(db: Path) -> None:
    store = SQLiteStore(db)
    for run_id in ["b-2", "A1", "a.1", "b-10"]:
        await store.append(run_id, started(run_id), sequence=0)

    assert await store.run_ids() == sorted(["b-2", "A1", "a.1", "b-10"])


async def test_runs_are_isolated(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "one", [started("one"), intent(0), intent(1)])
    await append_all(store, "two", [started("two")])

    assert len(await store.read_log("one")) == 3
    assert (await store.read_log("two")).records == (started("two"),)


# --------------------------------------------------------------------------- append rules


async def test_run_started_for_a_run_with_a_log_is_run_already_exists(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", [started("r")])

    with pytest.raises(RunAlreadyExists, match="'r'"):
        await store.append("r", started("r"), sequence=1)
    assert len(await store.read_log("r")) == 1


async def test_a_record_after_run_finished_is_run_already_finished(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", [started("r"), finished()])

    with pytest.raises(RunAlreadyFinished, match="'r'"):
        await store.append("r", intent(), sequence=2)
    assert len(await store.read_log("r")) == 2


@pytest.mark.parametrize("sequence", [0, 1, 3, 99])
async def test_a_sequence_other_than_the_log_length_is_run_conflict(
    db: Path, sequence: int
) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", [started("r"), intent(0)])

    with pytest.raises(RunConflict, match=f"sequence {sequence} but the log has 2"):
        await store.append("r", intent(1), sequence=sequence)
    assert len(await store.read_log("r")) == 2


async def test_a_first_record_that_is_not_run_started_is_run_conflict(db: Path) -> None:
    store = SQLiteStore(db)

    with pytest.raises(RunConflict, match="first record must be RunStarted"):
        await store.append("r", intent(), sequence=0)
    assert await store.run_ids() == []


async def test_already_exists_wins_over_finished_and_conflict(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", [started("r"), finished()])

    with pytest.raises(RunAlreadyExists):
        await store.append("r", started("r"), sequence=7)  # finished and out of sequence too


async def test_already_finished_wins_over_conflict(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", [started("r"), finished()])

    with pytest.raises(RunAlreadyFinished):
        await store.append("r", intent(), sequence=7)


async def test_the_primary_key_fences_run_and_sequence_under_the_rules(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", [started("r")])

    # A writer that skipped the rules still cannot put a second record 0 into the run.
    with pytest.raises(sqlite3.IntegrityError):
        execute_raw(
            db,
            "INSERT INTO polyloop_records (run_id, sequence, kind, body) "
            "VALUES ('r', 0, 'run_started', '{}')",
        )


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("run_id", ["../escape", "", "a/b", "-leading-dash", "x" * 129])
async def test_an_invalid_run_id_is_refused_before_the_file_is_created(
    db: Path, run_id: str
) -> None:
    store = SQLiteStore(db)

    with pytest.raises(InvalidRunId):
        await store.append(run_id, started("ok"), sequence=0)
    with pytest.raises(InvalidRunId):
        await store.read_log(run_id)
    assert not exists(db)


async def test_a_non_record_or_negative_sequence_is_refused_before_any_io(db: Path) -> None:
    store = SQLiteStore(db)

    with pytest.raises(TypeError, match="polyloop record"):
        await store.append("r", {"kind": "run_started"}, sequence=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sequence"):
        await store.append("r", started("r"), sequence=-1)
    assert not exists(db)


# --------------------------------------------------------------------------- durability


async def test_wal_and_synchronous_full_are_in_force_on_the_store_connection(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", [started("r")])

    def settings(conn: sqlite3.Connection) -> tuple[str, int, int]:
        return (
            conn.execute("PRAGMA journal_mode").fetchone()[0],
            conn.execute("PRAGMA synchronous").fetchone()[0],
            conn.execute("PRAGMA busy_timeout").fetchone()[0],
        )

    journal_mode, synchronous, busy_timeout_ms = store._with_connection(settings)

    assert journal_mode == "wal"
    assert synchronous == 2  # FULL: the WAL is fsynced at every commit
    assert busy_timeout_ms >= 10_000


async def test_the_file_itself_is_in_wal_mode_for_every_other_connection(db: Path) -> None:
    await write_and_close(db, "r", [started("r")])

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


async def test_an_append_is_visible_to_another_connection_when_it_returns(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", [started("r"), intent(0)])

    conn = sqlite3.connect(db)
    try:
        count = conn.execute("SELECT count(*) FROM polyloop_records").fetchone()[0]
    finally:
        conn.close()
    assert count == 2  # committed, not waiting in an open transaction


# --------------------------------------------------------------------------- bad files


async def test_a_file_of_random_bytes_is_store_corrupted_and_untouched(db: Path) -> None:
    write_file(db, os.urandom(8192))
    before = sha256_of(db)

    with pytest.raises(StoreCorrupted, match=str(db)):
        await SQLiteStore(db).run_ids()
    assert sha256_of(db) == before
    assert names_in(db.parent) == ["runs.db"]


async def test_random_bytes_after_an_sqlite_header_are_store_corrupted_and_untouched(
    db: Path,
) -> None:
    write_file(db, b"SQLite format 3\x00" + os.urandom(8192 - 16))
    before = sha256_of(db)

    with pytest.raises(StoreCorrupted, match=str(db)):
        await SQLiteStore(db).read_log("r")
    assert sha256_of(db) == before


async def test_a_truncated_database_is_store_corrupted_and_untouched(db: Path) -> None:
    store = SQLiteStore(db)
    for i in range(30):
        await append_all(store, f"run-{i}", every_kind(f"run-{i}"))
    await store.aclose()
    whole = read_file(db)
    write_file(db, whole[: len(whole) // 2])
    before = sha256_of(db)

    with pytest.raises(StoreCorrupted, match=f"{db}: truncated"):
        await SQLiteStore(db).run_ids()
    assert sha256_of(db) == before


async def test_a_short_file_beside_a_live_wal_is_left_to_sqlite_to_recover(db: Path) -> None:
    # What another connection's checkpoint looks like from outside for a moment: page 1 (with
    # the new page count) is written, the later pages are not yet, the WAL still holds them.
    store = SQLiteStore(db)
    for i in range(30):
        await append_all(store, f"run-{i}", every_kind(f"run-{i}"))
    await store.aclose()
    write_file(db, read_file(db)[: 3 * 4096])  # whole pages, fewer than the header says
    write_file(db.with_name("runs.db-wal"), b"\x00" * 32)

    assert _inspect_file(db) is False  # not fresh, and not refused as truncated

    write_file(db.with_name("runs.db-wal"), b"")  # no live WAL: now it is damage
    with pytest.raises(StoreCorrupted, match="truncated"):
        _inspect_file(db)


async def test_a_database_cut_mid_page_is_store_corrupted(db: Path) -> None:
    store = SQLiteStore(db)
    await append_all(store, "r", every_kind("r"))
    await store.aclose()
    whole = read_file(db)
    write_file(db, whole[:-100])
    before = sha256_of(db)

    with pytest.raises(StoreCorrupted, match="truncated"):
        await SQLiteStore(db).read_log("r")
    assert sha256_of(db) == before


async def test_a_foreign_sqlite_database_is_refused_and_gets_no_tables(db: Path) -> None:
    execute_raw(
        db, "CREATE TABLE invoices (id INTEGER PRIMARY KEY)", "INSERT INTO invoices VALUES (1)"
    )
    before = sha256_of(db)

    with pytest.raises(StoreCorrupted, match=f"{db}: an SQLite database but not a polyloop store"):
        await SQLiteStore(db).append("r", started("r"), sequence=0)
    assert sha256_of(db) == before


async def test_a_foreign_database_in_wal_mode_is_refused_untouched(db: Path) -> None:
    execute_raw(db, "PRAGMA journal_mode=WAL", "CREATE TABLE notes (body TEXT)")
    before = sha256_of(db)

    with pytest.raises(StoreCorrupted, match="notes"):
        await SQLiteStore(db).run_ids()
    assert sha256_of(db) == before


async def test_an_unknown_store_schema_major_is_schema_version_error_naming_the_file(
    db: Path,
) -> None:
    await write_and_close(db, "r", [started("r")])
    execute_raw(db, "UPDATE polyloop_schema SET major = 2, minor = 5")
    before = sha256_of(db)

    with pytest.raises(SchemaVersionError, match=rf"{db}: store schema version 2\.5"):
        await SQLiteStore(db).read_log("r")
    assert sha256_of(db) == before


async def test_a_newer_store_schema_minor_is_read(db: Path) -> None:
    await write_and_close(db, "r", [started("r")])
    execute_raw(db, "UPDATE polyloop_schema SET minor = 9")

    assert (await SQLiteStore(db).read_log("r")).records == (started("r"),)


async def test_a_schema_table_without_its_row_is_store_corrupted(db: Path) -> None:
    await write_and_close(db, "r", [started("r")])
    execute_raw(db, "DELETE FROM polyloop_schema")

    with pytest.raises(StoreCorrupted, match="polyloop_schema"):
        await SQLiteStore(db).run_ids()


async def test_an_empty_file_becomes_a_new_store(db: Path) -> None:
    write_file(db, b"")  # as tempfile.mkstemp() or `touch` leave it: nothing in it to lose
    store = SQLiteStore(db)

    await store.append("r", started("r"), sequence=0)

    assert (await store.read_log("r")).records == (started("r"),)
    assert "polyloop_schema" in str(read_file(db) + read_file(db.with_name("runs.db-wal")))


async def test_an_sqlite_database_with_no_schema_at_all_becomes_a_new_store(db: Path) -> None:
    execute_raw(db, "PRAGMA user_version = 7")  # a valid database file holding nothing
    assert read_file(db).startswith(b"SQLite format 3")
    store = SQLiteStore(db)

    await store.append("r", started("r"), sequence=0)

    assert await store.run_ids() == ["r"]


async def test_a_directory_is_store_corrupted_naming_it(tmp_path: Path) -> None:
    with pytest.raises(StoreCorrupted, match=f"{tmp_path}: is a directory"):
        await SQLiteStore(tmp_path).run_ids()
    assert names_in(tmp_path) == []


async def test_a_missing_directory_is_store_corrupted_and_not_created(tmp_path: Path) -> None:
    with pytest.raises(StoreCorrupted, match="does not exist"):
        await SQLiteStore(tmp_path / "absent" / "runs.db").run_ids()
    assert not exists(tmp_path / "absent")


async def test_a_bad_file_fails_when_the_store_is_entered(db: Path) -> None:
    write_file(db, b"not a database at all, just some text\n" * 10)

    with pytest.raises(StoreCorrupted, match=str(db)):
        async with SQLiteStore(db):
            pass


async def test_an_unreadable_record_body_names_file_run_and_sequence(db: Path) -> None:
    await write_and_close(db, "r", [started("r"), intent(0)])
    execute_raw(
        db, 'UPDATE polyloop_records SET body = \'{"kind": "model_call\' WHERE sequence = 1'
    )

    with pytest.raises(StoreCorrupted, match=rf"{db}: run 'r', sequence 1: unreadable"):
        await SQLiteStore(db).read_log("r")


async def test_a_record_body_of_an_unknown_major_is_schema_version_error(db: Path) -> None:
    await write_and_close(db, "r", [started("r"), intent(0)])
    body = intent(0).to_json().replace('"1.1"', '"7.0"')
    execute_raw(db, f"UPDATE polyloop_records SET body = '{body}' WHERE sequence = 1")

    with pytest.raises(SchemaVersionError, match=r"run 'r', sequence 1: .*'7\.0'"):
        await SQLiteStore(db).read_log("r")


async def test_a_gap_in_the_sequence_is_store_corrupted(db: Path) -> None:
    await write_and_close(db, "r", [started("r"), intent(0), intent(1)])
    execute_raw(db, "DELETE FROM polyloop_records WHERE sequence = 1")

    with pytest.raises(StoreCorrupted, match="sequence 1: record missing"):
        await SQLiteStore(db).read_log("r")


async def test_a_body_indexed_under_another_kind_is_store_corrupted(db: Path) -> None:
    await write_and_close(db, "r", [started("r"), intent(0)])
    execute_raw(db, "UPDATE polyloop_records SET kind = 'run_finished' WHERE sequence = 1")

    with pytest.raises(StoreCorrupted, match="indexed as 'run_finished'"):
        await SQLiteStore(db).read_log("r")


# --------------------------------------------------------------------------- concurrency


async def test_two_hundred_concurrent_runs_in_one_loop_all_keep_their_logs(db: Path) -> None:
    store = SQLiteStore(db)

    async def drive(run_id: str) -> None:
        await append_all(store, run_id, [started(run_id), finished()])

    await asyncio.gather(*(drive(f"run-{i:03d}") for i in range(200)))

    assert await store.run_ids() == [f"run-{i:03d}" for i in range(200)]
    logs = await asyncio.gather(*(store.read_log(f"run-{i:03d}") for i in range(200)))
    assert all(log.finished is not None and len(log) == 2 for log in logs)


async def test_concurrent_appends_at_one_sequence_admit_exactly_one(db: Path) -> None:
    store = SQLiteStore(db)
    await store.append("r", started("r"), sequence=0)

    outcomes = await asyncio.gather(
        *(store.append("r", intent(i), sequence=1) for i in range(20)), return_exceptions=True
    )

    assert sum(outcome is None for outcome in outcomes) == 1
    assert all(isinstance(o, RunConflict) for o in outcomes if o is not None)
    assert len(await store.read_log("r")) == 2


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from polyloop import ModelCallIntent, RunConflict, RunStarted
    from polyloop.stores import SQLiteStore

    async def main(path, worker):
        store = SQLiteStore(path)
        won = 0
        for i in range(15):
            run_id = f"w{worker}-{i}"
            await store.append(run_id, RunStarted(run_id=run_id, goal="g", parameters={},
                parameters_hash="h", started_at="t"), sequence=0)
            for step in range(3):
                await store.append(run_id, ModelCallIntent(step_index=step, prompt_chars=1),
                                   sequence=step + 1)
        # Every worker drives the shared run "contested" at sequence 1 once.
        try:
            await store.append("contested", ModelCallIntent(step_index=0, prompt_chars=worker),
                               sequence=1)
            won = 1
        except RunConflict:
            pass
        await store.aclose()
        print(won)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


async def test_four_processes_share_one_file_and_the_sequence_fences_them(db: Path) -> None:
    store = SQLiteStore(db)
    await store.append("contested", started("contested"), sequence=0)

    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _WRITER,
            str(db),
            str(worker),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for worker in range(4)
    ]
    results = [await proc.communicate() for proc in procs]

    assert [proc.returncode for proc in procs] == [0, 0, 0, 0], [err for _, err in results]
    assert sum(int(out) for out, _ in results) == 1  # exactly one driver won sequence 1
    run_ids = await store.run_ids()
    assert len(run_ids) == 4 * 15 + 1
    logs = await asyncio.gather(*(store.read_log(r) for r in run_ids if r != "contested"))
    assert {len(log) for log in logs} == {4}
    assert len(await store.read_log("contested")) == 2


async def test_a_closed_store_reopens_on_next_use(db: Path) -> None:
    store = SQLiteStore(db)
    await store.append("r", started("r"), sequence=0)
    await store.aclose()

    await store.append("r", intent(0), sequence=1)

    assert len(await store.read_log("r")) == 2


async def test_async_with_closes_the_connection(db: Path) -> None:
    async with SQLiteStore(db) as store:
        await store.append("r", started("r"), sequence=0)
        assert store._conn is not None

    assert store._conn is None


async def test_aclose_ends_the_worker_thread(db: Path) -> None:
    before = set(threading.enumerate())
    store = SQLiteStore(db)
    await store.append("r", started("r"), sequence=0)
    worker_threads = [
        t for t in set(threading.enumerate()) - before if t.name.startswith("polyloop-sqlite")
    ]
    assert len(worker_threads) == 1

    await store.aclose()

    await asyncio.to_thread(worker_threads[0].join, 10)
    assert not worker_threads[0].is_alive()


async def test_a_store_never_closed_does_not_keep_its_thread(db: Path) -> None:
    before = set(threading.enumerate())
    store = SQLiteStore(db)
    await store.append("r", started("r"), sequence=0)
    (worker,) = [t for t in set(threading.enumerate()) - before if t.name == "polyloop-sqlite"]

    del store
    gc.collect()

    await asyncio.to_thread(worker.join, 10)
    assert not worker.is_alive()


async def test_a_store_is_usable_from_successive_event_loops(db: Path) -> None:
    store = SQLiteStore(db)
    await store.append("r", started("r"), sequence=0)

    # A second event loop (in another thread, as asyncio.run() cannot nest), then this one again.
    await asyncio.to_thread(asyncio.run, store.append("r", intent(0), sequence=1))
    await store.append("r", intent(1), sequence=2)

    assert len(await asyncio.to_thread(asyncio.run, store.read_log("r"))) == 3


async def test_making_a_store_does_no_io(db: Path) -> None:
    store = SQLiteStore(db)

    assert not exists(db)
    assert store.path == db
    assert repr(store) == f"SQLiteStore({str(db)!r})"


async def test_a_relative_path_is_fixed_when_the_store_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SQLiteStore("runs.db")
    monkeypatch.chdir(tmp_path.parent)

    await store.append("r", started("r"), sequence=0)

    assert exists(tmp_path / "runs.db")

"""A store written without the run index: any writing open builds it, resumably and logged;
the read-only commands never do, and read the logs instead, saying so in one line."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from polyloop import IndexNotBuilt, Record, RunQuery, StopReason
from polyloop._base._run_index import stats_of, summarize_log
from polyloop.cli import main
from polyloop.stores import SQLiteStore
from polyloop.stores import _sqlite_index as sqlite_index
from tests.unit._index_runs import run_batches
from tests.unit._pre_index_store import SQLITE_1_0, write_sqlite_1_0


def old_runs(count: int = 3) -> dict[str, list[Record]]:
    runs: dict[str, list[Record]] = {}
    for n in range(count):
        reason = None if n == 0 else StopReason.AGENT_FINISHED
        batches = run_batches(
            f"run-{n}",
            steps=n + 1,
            reason=reason,
            at=f"2026-11-30T10:00:0{n}.000Z",
            batch="old",
            labels={"n": str(n)},
            usage={"tokens": 10},
        )
        runs[f"run-{n}"] = [record for batch in batches for record in batch]
    return runs


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def schema_minor(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT minor FROM polyloop_schema").fetchone()[0])


async def rows_and_logs(path: Path) -> tuple[list[Any], list[Any]]:
    async with SQLiteStore(path) as store:
        rows = await store.query_runs(RunQuery())
        logs = [summarize_log(r.run_id, await store.read_log(r.run_id)) for r in rows]
        # The statistics come from tallies the migration rebuilt: they agree with the rows.
        assert await store.run_stats(RunQuery()) == stats_of(rows)
    return rows, logs


def test_a_writing_open_builds_the_index_of_an_old_store_and_logs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "old.db"
    write_sqlite_1_0(db, old_runs())
    assert schema_minor(db) == 0

    with caplog.at_level(logging.INFO, logger="polyloop"):
        rows, logs = asyncio.run(rows_and_logs(db))

    assert [row.run_id for row in rows] == ["run-0", "run-1", "run-2"]
    assert rows == logs
    assert rows[0].stop_reason is None
    assert rows[2].steps == 3
    assert rows[1].labels == {"n": "1"}
    assert rows[1].usage == {"tokens": 20}
    assert schema_minor(db) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any("building the run index" in m for m in messages)
    assert any("run index built (3 runs indexed)" in m for m in messages)


def test_an_interrupted_build_continues_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "old.db"
    write_sqlite_1_0(db, old_runs(5))
    monkeypatch.setattr(sqlite_index, "_CHUNK", 2)
    written: list[str] = []
    real = sqlite_index._write_summary

    def dies_on_the_third(conn: sqlite3.Connection, summary: Any) -> None:
        if len(written) == 2:
            raise KeyboardInterrupt  # the process is stopped half-way
        written.append(summary.run_id)
        real(conn, summary)

    monkeypatch.setattr(sqlite_index, "_write_summary", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(rows_and_logs(db))
    assert schema_minor(db) == 0  # not complete: readers still read the logs

    def records_each(conn: sqlite3.Connection, summary: Any) -> None:
        written.append(summary.run_id)
        real(conn, summary)

    monkeypatch.setattr(sqlite_index, "_write_summary", records_each)

    rows, logs = asyncio.run(rows_and_logs(db))

    assert written == ["run-0", "run-1", "run-2", "run-3", "run-4"]  # none indexed twice
    assert rows == logs
    assert len(rows) == 5
    assert schema_minor(db) == 1


def test_read_only_commands_never_migrate_and_say_they_read_the_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "old.db"
    write_sqlite_1_0(db, old_runs())
    before = digest(db)

    assert main(["runs", "--store", str(db), "--format", "json", "--stop-reason", "running"]) == 0
    assert main(["stats", "--store", str(db), "--format", "json"]) == 0

    captured = capsys.readouterr()
    notes = captured.err.splitlines()
    assert len(notes) == 2
    assert all(n.startswith("polyloop: note: ") and "no run index yet" in n for n in notes)
    assert '"run_id": "run-0"' in captured.out
    assert '"run-1"' not in captured.out
    assert '"running": 1' in captured.out
    assert digest(db) == before
    assert schema_minor(db) == 0


def test_migrate_builds_the_index_and_reading_then_uses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "old.db"
    write_sqlite_1_0(db, old_runs())

    assert main(["migrate", "--store", str(db)]) == 0
    assert "the run index is up to date (3 runs)" in capsys.readouterr().out
    assert schema_minor(db) == 1
    assert main(["runs", "--store", str(db)]) == 0

    captured = capsys.readouterr()
    assert captured.err == ""  # the index is used: no note
    assert "run-2" in captured.out


def test_the_read_only_store_refuses_an_index_not_built(tmp_path: Path) -> None:
    from polyloop.cli._read_only import ReadOnlySQLite

    db = tmp_path / "old.db"
    write_sqlite_1_0(db, old_runs(1))
    reader = ReadOnlySQLite(str(db))
    reader.open(str(db))
    try:
        with pytest.raises(IndexNotBuilt):
            asyncio.run(reader.query_runs(RunQuery()))
    finally:
        reader.close()


def test_the_old_schema_is_what_the_store_wrote_before_the_index() -> None:
    # The fixture's SQL is the 1.0 layout: the records table the store still creates first.
    from polyloop.stores._sqlite import _SCHEMA

    assert "polyloop_records" in _SCHEMA[2]
    assert "polyloop_records" in SQLITE_1_0[4]
    assert all("polyloop_runs" not in statement for statement in SQLITE_1_0)


@pytest.mark.postgres
def test_postgres_1_0_store_is_read_without_migrating_then_migrated(
    postgres_database_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    runs = old_runs()
    with psycopg.connect(postgres_database_dsn, autocommit=True) as conn:
        for statement in _PG_1_0:
            conn.execute(statement)
        for run_id, records in runs.items():
            last = records[-1]
            finished = last.kind == "run_finished"
            conn.execute(
                "INSERT INTO polyloop_runs (run_id, length, finished, stop_reason) "
                "VALUES (%s, %s, %s, %s)",
                (run_id, len(records), finished, "agent_finished" if finished else None),
            )
            for sequence, record in enumerate(records):
                conn.execute(
                    "INSERT INTO polyloop_records (run_id, sequence, kind, body) "
                    "VALUES (%s, %s, %s, %s)",
                    (run_id, sequence, record.kind, record.to_json()),
                )

    assert main(["runs", "--store", postgres_database_dsn, "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("polyloop: note: ")
    assert '"run-2"' in captured.out
    with psycopg.connect(postgres_database_dsn) as conn:
        version = conn.execute("SELECT version FROM polyloop_schema").fetchone()
    assert version == ("1.0",)  # reading did not migrate

    assert main(["migrate", "--store", postgres_database_dsn]) == 0
    assert main(["stats", "--store", postgres_database_dsn, "--format", "json"]) == 0

    captured = capsys.readouterr()
    assert captured.err == ""
    assert '"runs": 3' in captured.out
    assert '"running": 1' in captured.out
    with psycopg.connect(postgres_database_dsn) as conn:
        version = conn.execute("SELECT version FROM polyloop_schema").fetchone()
    assert version == ("1.1",)


#: The PostgreSQL layout of store version 1.0, as polyloop made it before the run index.
_PG_1_0 = (
    "CREATE TABLE polyloop_schema (component text PRIMARY KEY, version text NOT NULL)",
    'CREATE TABLE polyloop_runs (run_id text COLLATE "C" PRIMARY KEY CHECK (run_id ~ '
    "'^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'), length bigint NOT NULL CHECK (length >= 1), "
    "finished boolean NOT NULL, stop_reason text, started_at timestamptz NOT NULL DEFAULT now())",
    'CREATE TABLE polyloop_records (run_id text COLLATE "C" NOT NULL, sequence bigint NOT NULL '
    "CHECK (sequence >= 0), kind text NOT NULL, body text NOT NULL, appended_at timestamptz NOT "
    "NULL DEFAULT now(), PRIMARY KEY (run_id, sequence))",
    "INSERT INTO polyloop_schema (component, version) VALUES ('store', '1.0')",
)

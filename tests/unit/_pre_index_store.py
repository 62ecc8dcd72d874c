"""Stores as a polyloop without the run index wrote them (store schema 1.0), built here with
that version's own SQL, for the migration and fallback tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

from polyloop import Record

#: The SQLite schema of store version 1.0, as polyloop wrote it before the run index.
SQLITE_1_0 = (
    "PRAGMA page_size=1024",
    "PRAGMA journal_mode=WAL",
    "CREATE TABLE polyloop_schema (major INTEGER NOT NULL, minor INTEGER NOT NULL)",
    "INSERT INTO polyloop_schema (major, minor) VALUES (1, 0)",
    "CREATE TABLE polyloop_records ( run_id TEXT NOT NULL, sequence INTEGER NOT NULL, kind TEXT "
    "NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, sequence)) WITHOUT ROWID",
)


def write_sqlite_1_0(path: Path, runs: Mapping[str, Sequence[Record]]) -> None:
    """A SQLite store of version 1.0 holding ``runs`` (run id → its records, in order)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in SQLITE_1_0:
            conn.execute(statement)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO polyloop_records (run_id, sequence, kind, body) VALUES (?, ?, ?, ?)",
            [
                (run_id, sequence, record.kind, record.to_json())
                for run_id, records in runs.items()
                for sequence, record in enumerate(records)
            ],
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def drop_sqlite_index(path: Path) -> None:
    """Make an indexed SQLite store look as version 1.0 wrote it: no index tables, minor 0."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for table in ("polyloop_runs", "polyloop_run_labels", "polyloop_run_usage"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("UPDATE polyloop_schema SET minor = 0")
    finally:
        conn.close()

"""The SQLite store's run index: its tables, the one call a commit makes, queries, migration.

:func:`index_batch` is called inside the commit's transaction, after the records' insert, so
the row and the records are committed — or rolled back — together. :func:`build_index` indexes
a store written by a polyloop without the index (store schema 1.0), one chunk of runs per
transaction: an interrupted build continues where it stopped on the next writing open, and the
store's schema minor becomes 1 only once every run is indexed — readers use the index only
then (``index_complete``).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from polyloop._base._run_index import (
    IndexDelta,
    RunQuery,
    RunStats,
    RunSummary,
    index_delta,
    summarize_log,
)
from polyloop.errors import PolyloopError
from polyloop.stores._index_sql import (
    RUN_GROUPS,
    TALLY_ROW,
    USAGE_GROUPS,
    IndexSql,
    column_text,
    encoded,
    labels_text,
    rows_to_summaries,
    stats_from_groups,
    storable_number,
    tally_change,
    tally_rebuild,
    tally_tables,
    tally_upserts,
)
from polyloop.stores._rules import decode_log
from polyloop.types import Record, RunLog

__all__ = [
    "INDEX_MINOR",
    "INDEX_TABLES",
    "build_index",
    "index_batch",
    "index_complete",
    "query_runs",
    "run_stats",
]

_log = logging.getLogger("polyloop")

#: The store schema minor from which every run of the store is in the index.
INDEX_MINOR = 1
_SQL = IndexSql(placeholder="?", started="started_at", tallies=True)
_CHUNK = 500  # runs indexed per transaction by build_index

INDEX_TABLES = (
    "CREATE TABLE IF NOT EXISTS polyloop_runs ("
    " run_id TEXT NOT NULL PRIMARY KEY,"
    " batch TEXT,"
    " task_id TEXT,"
    " labels TEXT NOT NULL DEFAULT '{}',"
    " started_at TEXT NOT NULL DEFAULT '',"
    " finished_at TEXT,"
    " stop_reason TEXT,"
    " steps INTEGER NOT NULL DEFAULT 0,"
    " executed_actions INTEGER NOT NULL DEFAULT 0"
    ") WITHOUT ROWID",
    # `runs --limit N` reads the newest N rows in this order, without sorting the table.
    "CREATE INDEX IF NOT EXISTS polyloop_runs_by_start ON polyloop_runs (started_at, run_id)",
    "CREATE INDEX IF NOT EXISTS polyloop_runs_by_batch ON polyloop_runs (batch, started_at)",
    "CREATE TABLE IF NOT EXISTS polyloop_run_labels ("
    " key TEXT NOT NULL, value TEXT NOT NULL, run_id TEXT NOT NULL,"
    " PRIMARY KEY (key, value, run_id)"
    ") WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS polyloop_run_usage ("
    " run_id TEXT NOT NULL, key TEXT NOT NULL, tokens NOT NULL,"  # int or float, as given
    " PRIMARY KEY (run_id, key)"
    ") WITHOUT ROWID",
    # `polyloop stats` without a time or label filter reads these, not the rows.
    *tally_tables(""),
)

_ADD_USAGE = (
    "INSERT INTO polyloop_run_usage (run_id, key, tokens) VALUES (?, ?, ?) "
    "ON CONFLICT (run_id, key) DO UPDATE SET tokens = tokens + excluded.tokens"
)


def index_batch(conn: sqlite3.Connection, run_id: str, batch: Sequence[Record]) -> None:
    """Bring the run's row up to date with ``batch``, inside the commit's open transaction."""
    delta = index_delta(batch)
    if not delta.empty:
        _write_delta(conn, run_id, delta)
        _write_tallies(conn, run_id, delta)


def _write_tallies(conn: sqlite3.Connection, run_id: str, delta: IndexDelta) -> None:
    """Per-batch counts ``polyloop stats`` reads instead of every row."""
    if delta.started is None and delta.finished is None and not delta.usage:
        return
    row = conn.execute(TALLY_ROW.format(ph="?"), (run_id,)).fetchone()
    if row is None:  # not indexed yet (a migration is under way): rebuilt when it ends
        return
    for sql, params in tally_upserts("?", tally_change(row, delta)):
        conn.execute(sql, params)


def _write_delta(conn: sqlite3.Connection, run_id: str, delta: IndexDelta) -> None:
    if delta.started is not None:
        start = delta.started
        conn.execute(
            "INSERT INTO polyloop_runs (run_id, batch, task_id, labels, started_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                run_id,
                column_text(start.batch),
                column_text(start.task_id),
                labels_text(start.labels),
                column_text(start.started_at),
            ),
        )
        conn.executemany(
            "INSERT INTO polyloop_run_labels (key, value, run_id) VALUES (?, ?, ?)",
            [(encoded(k), encoded(v), run_id) for k, v in start.labels.items()],
        )
    if delta.finished is not None:
        end = delta.finished
        conn.execute(
            "UPDATE polyloop_runs SET steps = steps + ?, executed_actions = ?, finished_at = ?, "
            "stop_reason = ? WHERE run_id = ?",
            (
                delta.steps,
                end.executed_actions,
                column_text(end.finished_at),
                end.stop_reason.value,
                run_id,
            ),
        )
    elif delta.steps:
        conn.execute(
            "UPDATE polyloop_runs SET steps = steps + ?, executed_actions = executed_actions + ? "
            "WHERE run_id = ?",
            (delta.steps, delta.executed_actions, run_id),
        )
    if delta.usage:
        conn.executemany(
            _ADD_USAGE,
            [
                (run_id, encoded(key), storable_number(tokens))
                for key, tokens in delta.usage.items()
            ],
        )


def _write_summary(conn: sqlite3.Connection, summary: RunSummary) -> None:
    """Replace the run's row by ``summary`` (the migration's write)."""
    run_id = summary.run_id
    for table in ("polyloop_runs", "polyloop_run_labels", "polyloop_run_usage"):
        conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
    conn.execute(
        "INSERT INTO polyloop_runs (run_id, batch, task_id, labels, started_at, finished_at, "
        "stop_reason, steps, executed_actions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            column_text(summary.batch),
            column_text(summary.task_id),
            labels_text(summary.labels),
            column_text(summary.started_at),
            column_text(summary.finished_at),
            summary.stop_reason,
            summary.steps,
            summary.executed_actions,
        ),
    )
    conn.executemany(
        "INSERT INTO polyloop_run_labels (key, value, run_id) VALUES (?, ?, ?)",
        [(encoded(k), encoded(v), run_id) for k, v in summary.labels.items()],
    )
    conn.executemany(
        "INSERT INTO polyloop_run_usage (run_id, key, tokens) VALUES (?, ?, ?)",
        [(run_id, encoded(k), storable_number(n)) for k, n in summary.usage.items()],
    )


def query_runs(conn: sqlite3.Connection, query: RunQuery) -> list[RunSummary]:
    sql, params = _SQL.rows(query)
    rows = conn.execute(sql, params).fetchall()
    if query.limit is not None and len(rows) <= 500:
        usage_sql, usage_params = _SQL.usage_of([row[0] for row in rows])
    else:
        usage_sql, usage_params = _SQL.usage_where(query)
    usage = conn.execute(usage_sql, usage_params).fetchall() if rows else []
    return rows_to_summaries(rows, usage)


def run_stats(conn: sqlite3.Connection, query: RunQuery) -> RunStats:
    query = replace(query, limit=None)
    groups = conn.execute(*_SQL.groups(query)).fetchall()
    try:
        usage = conn.execute(*_SQL.usage_totals(query)).fetchall()
    except sqlite3.OperationalError:  # integer overflow: SQLite's sum() refuses, total() floats
        usage = conn.execute(*_SQL.usage_totals(query, "total")).fetchall()
    return stats_from_groups(groups, usage)


def index_complete(conn: sqlite3.Connection) -> bool:
    """Whether every run of the store is in the index (schema minor ≥ 1)."""
    row = conn.execute("SELECT minor FROM polyloop_schema").fetchone()
    return row is not None and int(row[0]) >= INDEX_MINOR


def build_index(conn: sqlite3.Connection, where: str) -> int:
    """Index every run not yet in the index, a chunk per transaction; return how many.

    Resumable: each chunk commits on its own, and a run already indexed is skipped, so an
    interrupted build continues where it stopped. Only when no run is left is the schema's
    minor set, in the last transaction. ``conn`` is in autocommit mode (no open transaction).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in INDEX_TABLES:
            conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    _log.warning(
        "%s: building the run index of a store written by an earlier polyloop (resumable: an "
        "interrupted build continues on the next writing open)",
        where,
    )
    indexed = 0
    after = ""
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            chunk = [
                str(row[0])
                for row in conn.execute(
                    "SELECT DISTINCT run_id FROM polyloop_records WHERE run_id > ? "
                    "ORDER BY run_id LIMIT ?",
                    (after, _CHUNK),
                )
            ]
            for run_id in chunk:
                if _is_indexed(conn, run_id):
                    continue
                summary = summarize_log(run_id, _readable_log(conn, run_id, where))
                if summary is not None:
                    _write_summary(conn, summary)
                    indexed += 1
            if not chunk:
                groups = conn.execute(RUN_GROUPS).fetchall()
                usage = conn.execute(USAGE_GROUPS).fetchall()
                for sql, params in tally_rebuild("?", groups, usage):
                    conn.execute(sql, params)
                conn.execute("UPDATE polyloop_schema SET minor = ?", (INDEX_MINOR,))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        if not chunk:
            break
        after = chunk[-1]
        _log.info("%s: run index: %d runs indexed so far", where, indexed)
    _log.warning("%s: run index built (%d runs indexed)", where, indexed)
    return indexed


def _is_indexed(conn: sqlite3.Connection, run_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM polyloop_runs WHERE run_id = ?", (run_id,)).fetchone()
    return found is not None


def _readable_log(conn: sqlite3.Connection, run_id: str, where: str) -> RunLog:
    """The run's log; a damaged one is indexed from its readable prefix, and said so."""
    rows: list[Any] = conn.execute(
        "SELECT sequence, kind, body FROM polyloop_records WHERE run_id = ? ORDER BY sequence",
        (run_id,),
    ).fetchall()
    for end in range(len(rows), -1, -1):
        try:
            log = decode_log(run_id, rows[:end], where=where)
        except (PolyloopError, ValueError) as exc:
            if end == len(rows):
                _log.warning(
                    "%s: run %r indexed from its readable records only: %s", where, run_id, exc
                )
            continue
        return log
    return RunLog.empty()


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")

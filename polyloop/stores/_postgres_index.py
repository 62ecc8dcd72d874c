"""The PostgreSQL store's run index: columns of ``polyloop_runs``, the call a commit makes,
queries, and the migration of a store written without it (store schema 1.0 → 1.1).

:func:`index_batch` runs inside ``append_many``'s transaction after the records' insert, under
the run's row lock. :func:`build_index` fills the index of a 1.0 store a chunk of runs per
transaction (``indexed`` marks the runs done, so an interrupted build continues where it
stopped); the store's version becomes 1.1 only once no run is left, and readers use the index
only then. psycopg is imported by the caller; this module only receives its connections.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from polyloop._base._run_index import (
    RunQuery,
    RunStats,
    RunSummary,
    index_delta,
    summarize_log,
)
from polyloop.errors import PolyloopError
from polyloop.stores._index_sql import (
    IndexSql,
    column_text,
    encoded,
    labels_text,
    rows_to_summaries,
    stats_from_groups,
    storable_number,
)
from polyloop.stores._rules import decode_log
from polyloop.types import Record, RunLog

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "INDEXED_VERSION",
    "INDEX_COLUMNS",
    "build_index",
    "index_arguments",
    "query_runs",
    "run_stats",
]

_log = logging.getLogger("polyloop")

#: The store version from which every run is in the index.
INDEXED_VERSION: Final = "1.1"
_SQL = IndexSql(placeholder="%s", started="run_started_at", tallies=False)
_CHUNK = 500

# polyloop_runs already has run_id, length, finished, stop_reason and started_at (the server's
# time of the first append); the index adds the rest. run_started_at is RunStarted.started_at,
# the text the record holds (what --since compares, as in SQLite).
INDEX_COLUMNS: Final = (
    'ALTER TABLE polyloop_runs ADD COLUMN IF NOT EXISTS batch text COLLATE "C"',
    "ALTER TABLE polyloop_runs ADD COLUMN IF NOT EXISTS task_id text",
    "ALTER TABLE polyloop_runs ADD COLUMN IF NOT EXISTS labels text NOT NULL DEFAULT '{}'",
    # COLLATE "C": ordered and compared byte by byte, as in SQLite and the memory store.
    'ALTER TABLE polyloop_runs ADD COLUMN IF NOT EXISTS run_started_at text COLLATE "C" '
    "NOT NULL DEFAULT ''",
    "ALTER TABLE polyloop_runs ADD COLUMN IF NOT EXISTS finished_at text",
    "ALTER TABLE polyloop_runs ADD COLUMN IF NOT EXISTS steps bigint NOT NULL DEFAULT 0",
    "ALTER TABLE polyloop_runs ADD COLUMN IF NOT EXISTS executed_actions bigint NOT NULL DEFAULT 0",
    # Rows that exist when the column is added are not indexed yet; rows made afterwards are.
    "ALTER TABLE polyloop_runs ADD COLUMN IF NOT EXISTS indexed boolean NOT NULL DEFAULT false",
    "ALTER TABLE polyloop_runs ALTER COLUMN indexed SET DEFAULT true",
    "CREATE INDEX IF NOT EXISTS polyloop_runs_by_start ON polyloop_runs (run_started_at, run_id)",
    "CREATE INDEX IF NOT EXISTS polyloop_runs_by_batch ON polyloop_runs (batch, run_started_at)",
    'CREATE TABLE IF NOT EXISTS polyloop_run_labels (key text COLLATE "C" NOT NULL, '
    'value text COLLATE "C" NOT NULL, run_id text COLLATE "C" NOT NULL, '
    "PRIMARY KEY (key, value, run_id))",
    'CREATE TABLE IF NOT EXISTS polyloop_run_usage (run_id text COLLATE "C" NOT NULL, '
    'key text COLLATE "C" NOT NULL, tokens numeric NOT NULL, PRIMARY KEY (run_id, key))',
)


def index_arguments(batch: Sequence[Record]) -> tuple[Any, ...]:
    """What ``batch`` changes in its run's index, as the append function's arguments (after
    ``p_stop_reason``, see polyloop/stores/_postgres.py): the start's columns and labels (for
    the batch that starts the run), the steps and executed actions to add, the final count and
    time (for the batch that finishes it), the usage to add. The function writes them with the
    runs row in the statement that writes the records: no statement for what did not change."""
    delta = index_delta(batch)
    start, end = delta.started, delta.finished
    labels = {} if start is None else start.labels
    return (
        None if start is None else column_text(start.batch),
        None if start is None else column_text(start.task_id),
        None if start is None else labels_text(labels),
        None if start is None else column_text(start.started_at),
        [encoded(key) for key in labels],
        [encoded(value) for value in labels.values()],
        delta.steps,
        delta.executed_actions,
        None if end is None else end.executed_actions,
        None if end is None else column_text(end.finished_at),
        [encoded(key) for key in delta.usage],
        [_numeric_text(storable_number(tokens)) for tokens in delta.usage.values()],
    )


def _numeric_text(number: float) -> str:
    """A usage number as PostgreSQL's ``numeric`` reads it from text."""
    if isinstance(number, int):
        return str(number)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return repr(number)


async def _insert_many(conn: AsyncConnection[Any], sql: str, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        async with conn.cursor() as cur:
            await cur.executemany(sql, rows)


async def query_runs(conn: AsyncConnection[Any], query: RunQuery) -> list[RunSummary]:
    sql, params = _SQL.rows(query)
    rows = await (await conn.execute(sql, params)).fetchall()
    if not rows:
        return []
    if query.limit is not None and len(rows) <= 500:
        usage_sql, usage_params = _SQL.usage_of([row[0] for row in rows])
    else:
        usage_sql, usage_params = _SQL.usage_where(query)
    usage = await (await conn.execute(usage_sql, usage_params)).fetchall()
    return rows_to_summaries(rows, usage)


async def run_stats(conn: AsyncConnection[Any], query: RunQuery) -> RunStats:
    query = replace(query, limit=None)
    sql, params = _SQL.groups(query)
    groups = await (await conn.execute(sql, params)).fetchall()
    sql, params = _SQL.usage_totals(query)
    usage = await (await conn.execute(sql, params)).fetchall()
    return stats_from_groups(groups, usage)


async def build_index(conn: AsyncConnection[Any], where: str) -> int:
    """Index every run not yet indexed, a chunk per transaction; return how many.

    ``conn`` is in autocommit mode. Rows locked by a concurrent append (or another process
    building the index) are skipped and retried, so two processes share the work.
    """
    _log.warning(
        "%s: building the run index of a store written by an earlier polyloop (resumable: an "
        "interrupted build continues on the next writing open)",
        where,
    )
    indexed = 0
    while True:
        async with conn.transaction():
            cur = await conn.execute(
                "SELECT run_id FROM polyloop_runs WHERE NOT indexed ORDER BY run_id "
                "LIMIT %s FOR UPDATE SKIP LOCKED",
                (_CHUNK,),
            )
            chunk = [str(row[0]) for row in await cur.fetchall()]
            for run_id in chunk:
                summary = summarize_log(run_id, await _readable_log(conn, run_id, where))
                await _write_summary(conn, run_id, summary)
                indexed += 1
        if chunk:
            _log.info("%s: run index: %d runs indexed so far", where, indexed)
            continue
        async with conn.transaction():
            cur = await conn.execute("SELECT count(*) FROM polyloop_runs WHERE NOT indexed")
            left = await cur.fetchone()
            if left is not None and int(left[0]) == 0:
                await conn.execute(
                    "UPDATE polyloop_schema SET version = %s WHERE component = 'store'",
                    (INDEXED_VERSION,),
                )
                break
        await asyncio.sleep(0.05)  # the rest is locked by appends or another builder
    _log.warning("%s: run index built (%d runs indexed)", where, indexed)
    return indexed


async def _write_summary(
    conn: AsyncConnection[Any], run_id: str, summary: RunSummary | None
) -> None:
    await conn.execute("DELETE FROM polyloop_run_labels WHERE run_id = %s", (run_id,))
    await conn.execute("DELETE FROM polyloop_run_usage WHERE run_id = %s", (run_id,))
    row = summary or RunSummary(run_id=run_id)
    await conn.execute(
        "UPDATE polyloop_runs SET batch = %s, task_id = %s, labels = %s, run_started_at = %s, "
        "finished_at = %s, steps = %s, executed_actions = %s, indexed = true WHERE run_id = %s",
        (
            column_text(row.batch),
            column_text(row.task_id),
            labels_text(row.labels),
            column_text(row.started_at),
            column_text(row.finished_at),
            row.steps,
            row.executed_actions,
            run_id,
        ),
    )
    await _insert_many(
        conn,
        "INSERT INTO polyloop_run_labels (key, value, run_id) VALUES (%s, %s, %s)",
        [(encoded(k), encoded(v), run_id) for k, v in row.labels.items()],
    )
    await _insert_many(
        conn,
        "INSERT INTO polyloop_run_usage (run_id, key, tokens) VALUES (%s, %s, %s)",
        [(run_id, encoded(k), storable_number(n)) for k, n in row.usage.items()],
    )


async def _readable_log(conn: AsyncConnection[Any], run_id: str, where: str) -> RunLog:
    """The run's log; a damaged one is indexed from its readable prefix, and said so."""
    cur = await conn.execute(
        "SELECT sequence, kind, body FROM polyloop_records WHERE run_id = %s ORDER BY sequence",
        (run_id,),
    )
    rows = await cur.fetchall()
    for end in range(len(rows), -1, -1):
        try:
            return decode_log(run_id, rows[:end], where=where)
        except (PolyloopError, ValueError) as exc:
            if end == len(rows):
                _log.warning(
                    "%s: run %r indexed from its readable records only: %s", where, run_id, exc
                )
    return RunLog.empty()

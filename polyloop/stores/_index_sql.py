"""The run index in SQL, written once for SQLite and PostgreSQL: filters, rows and statistics.

Both stores keep the same three things beside their records: a row per run (the
:class:`~polyloop.RunSummary` columns, labels as JSON text), ``polyloop_run_labels`` (one row
per label, what ``--label k=v`` filters on) and ``polyloop_run_usage`` (one row per usage key,
what the usage totals sum). Label and usage keys and values are stored as their ASCII JSON text
(:func:`encoded`), so any Python string — a NUL, a lone surrogate — is stored and compared
exactly in either database (PostgreSQL's ``text`` holds neither as it is).

The statistics are computed by the database, so ``polyloop stats`` moves no per-run data into
Python: SQLite reads per-batch tallies (stop reason × steps × executed actions, and usage per
key: a few hundred rows, whatever the number of runs) when the query filters by batch and stop
reason at most, and otherwise — and PostgreSQL always — groups the selected rows.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from polyloop._base._run_index import (
    RUNNING,
    IndexDelta,
    RunQuery,
    RunStats,
    RunSummary,
    StatsTally,
)

__all__ = [
    "RUN_GROUPS",
    "TALLY_ROW",
    "USAGE_GROUPS",
    "IndexSql",
    "TallyChange",
    "batch_key",
    "column_text",
    "column_value",
    "decoded",
    "encoded",
    "labels_text",
    "read_number",
    "rows_to_summaries",
    "stats_from_groups",
    "storable_number",
    "tallied",
    "tally_change",
    "tally_rebuild",
    "tally_tables",
    "tally_upserts",
]


def encoded(text: str) -> str:
    """A label or usage key (or label value) as stored: its JSON text, ASCII only."""
    return json.dumps(text)


def decoded(text: str) -> str:
    value = json.loads(text)
    if not isinstance(value, str):
        raise ValueError(f"an index key must be a JSON string, got {text!r}")
    return value


def column_text(text: str | None) -> str | None:
    """A batch id, task id or timestamp as its column holds it: itself when both databases can
    store it, else its ASCII JSON spelling (a lone surrogate or a NUL: neither database's text
    holds them), so an append never fails for the index's sake."""
    if text is None or _utf8(text):
        return text
    return json.dumps(text)


def _utf8(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def column_value(stored: str | None) -> str | None:
    """:func:`column_text` reversed."""
    if stored is None or not stored.startswith('"'):
        return stored
    try:
        value = json.loads(stored)
    except ValueError:
        return stored
    if isinstance(value, str) and not _utf8(value) and json.dumps(value) == stored:
        return value
    return stored


_INT64 = (1 << 63) - 1


def storable_number(value: float) -> float:
    """A usage number as both databases store it: an int in 64 bits as it is, anything else
    as a float (the largest float for an int beyond it)."""
    if isinstance(value, int) and -_INT64 <= value <= _INT64:
        return value
    try:
        return float(value)
    except OverflowError:
        return sys.float_info.max if value > 0 else -sys.float_info.max


def read_number(value: Any) -> int | float:
    """A usage number as read back (PostgreSQL's numeric is a ``Decimal``)."""
    if isinstance(value, int | float):
        return value
    number = float(value)
    return int(value) if number.is_integer() and abs(number) <= _INT64 else number


def labels_text(labels: dict[str, str]) -> str:
    """The labels column: the mapping as ASCII JSON text, keys sorted."""
    return json.dumps(labels, sort_keys=True)


@dataclass(frozen=True, slots=True)
class IndexSql:
    """The statements of one database: its placeholder and the name of its start column."""

    placeholder: str  # "?" (sqlite3) or "%s" (psycopg)
    started: str  # the column holding RunStarted.started_at
    # Whether the per-batch tallies are kept. SQLite's writers take turns on the whole file, so
    # the tallies cost no concurrency there; in PostgreSQL the rows of a batch's tallies would
    # be a lock every concurrent run of the batch waits for, and its GROUP BY is fast anyway.
    tallies: bool

    @property
    def columns(self) -> str:
        return (
            f"run_id, batch, task_id, labels, {self.started}, finished_at, stop_reason, steps, "
            "executed_actions"
        )

    def where(self, query: RunQuery, *, tally: bool = False) -> tuple[str, list[Any]]:
        """``WHERE …`` (or ``""``) for the filters of ``query``: over ``polyloop_runs``, or with
        ``tally`` over a tally table (kept per batch key and stop reason, a running run's being
        ``""``; asked only for a :func:`tallied` query: no start time, no label)."""
        ph = self.placeholder
        clauses: list[str] = []
        params: list[Any] = []
        if query.batch is not None:
            stored = column_text(query.batch)
            clauses.append(f"batch_key = {ph}" if tally else f"batch = {ph}")
            params.append(batch_key(stored) if tally else stored)
        if query.stop_reasons:
            clause, reasons = self._stop_reasons(query.stop_reasons, tally=tally)
            clauses.append(clause)
            params.extend(reasons)
        if query.since is not None:
            clauses.append(f"{self.started} >= {ph}")
            params.append(query.since)
        for key, value in sorted(query.labels.items()):
            clauses.append(
                f"run_id IN (SELECT run_id FROM polyloop_run_labels WHERE key = {ph} "
                f"AND value = {ph})"
            )
            params.extend((encoded(key), encoded(value)))
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", params

    def _stop_reasons(self, wanted: Sequence[str], *, tally: bool) -> tuple[str, list[str]]:
        """The stop-reason clause and its parameters: ``running`` is ``IS NULL`` in the rows
        and ``""`` in a tally."""
        if tally:
            reasons = ["" if r == RUNNING else r for r in wanted]
            return f"stop_reason IN ({', '.join([self.placeholder] * len(reasons))})", reasons
        reasons = [r for r in wanted if r != RUNNING]
        either = [f"stop_reason IN ({', '.join([self.placeholder] * len(reasons))})"]
        either = either if reasons else []
        if RUNNING in wanted:
            either.append("stop_reason IS NULL")
        return "(" + " OR ".join(either) + ")", reasons

    def rows(self, query: RunQuery) -> tuple[str, list[Any]]:
        """The selected rows, newest first (the caller reverses them), limited."""
        where, params = self.where(query)
        sql = (
            f"SELECT {self.columns} FROM polyloop_runs {where} "
            f"ORDER BY {self.started} DESC, run_id DESC"
        )
        if query.limit is not None:
            sql += f" LIMIT {self.placeholder}"
            params.append(min(query.limit, _INT64))  # a larger one is no limit, not an error
        return sql, params

    def usage_of(self, run_ids: Sequence[str]) -> tuple[str, list[Any]]:
        marks = ", ".join([self.placeholder] * len(run_ids))
        return (
            f"SELECT run_id, key, tokens FROM polyloop_run_usage WHERE run_id IN ({marks})",
            list(run_ids),
        )

    def usage_where(self, query: RunQuery) -> tuple[str, list[Any]]:
        """Every usage row of the runs ``query`` selects (its limit ignored)."""
        where, params = self.where(query)
        if not where:
            return "SELECT run_id, key, tokens FROM polyloop_run_usage", params
        return (
            "SELECT run_id, key, tokens FROM polyloop_run_usage WHERE run_id IN "
            f"(SELECT run_id FROM polyloop_runs {where})",
            params,
        )

    def groups(self, query: RunQuery) -> tuple[str, list[Any]]:
        """(stop reason, steps, executed actions, count) over the selected runs: from the
        tallies when the query filters by batch and stop reason at most, else by a scan."""
        if self.tallies and tallied(query):
            where, params = self.where(query, tally=True)
            return (
                "SELECT NULLIF(stop_reason, ''), steps, executed_actions, sum(runs) FROM "
                f"polyloop_run_tally {where} GROUP BY stop_reason, steps, executed_actions",
                params,
            )
        where, params = self.where(query)
        return (
            "SELECT stop_reason, steps, executed_actions, count(*) FROM polyloop_runs "
            f"{where} GROUP BY stop_reason, steps, executed_actions",
            params,
        )

    def usage_totals(self, query: RunQuery, total: str = "sum") -> tuple[str, list[Any]]:
        """Each usage key's total over the selected runs (``total``: the SQL aggregate): from
        the usage tally when the query filters by batch at most."""
        if self.tallies and tallied(query) and not query.stop_reasons:
            where, params = self.where(query, tally=True)
            return (
                f"SELECT key, {total}(tokens) FROM polyloop_usage_tally {where} GROUP BY key",
                params,
            )
        where, params = self.where(query)
        inner = "" if not where else f"WHERE run_id IN (SELECT run_id FROM polyloop_runs {where})"
        return (
            f"SELECT key, {total}(tokens) FROM polyloop_run_usage {inner} GROUP BY key",
            params,
        )


def tallied(query: RunQuery) -> bool:
    """Whether the tallies answer ``query``'s statistics (they are kept per batch and stop
    reason; a start time or a label needs the rows)."""
    return query.since is None and not query.labels


def batch_key(stored_batch: str | None) -> str:
    """A tally's key for a batch column value (``None`` included, unlike a primary key)."""
    return json.dumps(stored_batch)


@dataclass(frozen=True, slots=True)
class TallyChange:
    """What a batch of records changes in the tallies of its run's batch."""

    batch_key: str
    started: bool  # one more run of the batch, running
    finished: tuple[str, int, int] | None  # (stop reason, steps, executed actions) it ended with
    usage: list[tuple[str, int | float]]  # (encoded key, storable number)


def tally_tables(number_type: str) -> tuple[str, str]:
    """The two tally tables; ``number_type`` is the usage column's type (``""`` in SQLite, so
    an int stays an int and a float a float; ``numeric`` in PostgreSQL)."""
    return (
        "CREATE TABLE IF NOT EXISTS polyloop_run_tally (batch_key TEXT NOT NULL, stop_reason "
        "TEXT NOT NULL, steps BIGINT NOT NULL, executed_actions BIGINT NOT NULL, runs BIGINT "
        "NOT NULL, PRIMARY KEY (batch_key, stop_reason, steps, executed_actions))",
        "CREATE TABLE IF NOT EXISTS polyloop_usage_tally (batch_key TEXT NOT NULL, key TEXT NOT "
        f"NULL, tokens {number_type} NOT NULL, PRIMARY KEY (batch_key, key))",
    )


def tally_change(row: Sequence[Any], delta: IndexDelta) -> TallyChange:
    """The tallies' change for ``delta``, given the run's row after it (batch, steps, executed
    actions)."""
    stored_batch, steps, executed = row
    end = delta.finished
    return TallyChange(
        batch_key=batch_key(stored_batch),
        started=delta.started is not None,
        finished=None if end is None else (end.stop_reason.value, int(steps), int(executed)),
        # In key order: two commits never take the same rows' locks in opposite orders.
        usage=[(encoded(key), storable_number(n)) for key, n in sorted(delta.usage.items())],
    )


#: The run's row as :func:`tally_change` needs it.
TALLY_ROW = "SELECT batch, steps, executed_actions FROM polyloop_runs WHERE run_id = {ph}"
#: The tallies' contents, recomputed from the rows (the end of a migration, write-locked).
RUN_GROUPS = (
    "SELECT batch, coalesce(stop_reason, ''), CASE WHEN stop_reason IS NULL THEN 0 ELSE steps "
    "END, CASE WHEN stop_reason IS NULL THEN 0 ELSE executed_actions END, count(*) FROM "
    "polyloop_runs GROUP BY 1, 2, 3, 4"
)
USAGE_GROUPS = (
    "SELECT r.batch, u.key, sum(u.tokens) FROM polyloop_run_usage u JOIN polyloop_runs r ON "
    "r.run_id = u.run_id GROUP BY r.batch, u.key"
)


def tally_rebuild(
    ph: str, run_groups: Iterable[Sequence[Any]], usage_groups: Iterable[Sequence[Any]]
) -> list[tuple[str, tuple[Any, ...]]]:
    """Statements that replace both tallies by the groups of :data:`RUN_GROUPS` and
    :data:`USAGE_GROUPS`."""
    statements: list[tuple[str, tuple[Any, ...]]] = [
        ("DELETE FROM polyloop_run_tally", ()),
        ("DELETE FROM polyloop_usage_tally", ()),
    ]
    for batch, reason, steps, executed, runs in run_groups:
        statements.append(
            (
                "INSERT INTO polyloop_run_tally (batch_key, stop_reason, steps, "
                f"executed_actions, runs) VALUES ({ph}, {ph}, {ph}, {ph}, {ph})",
                (batch_key(batch), reason, int(steps), int(executed), int(runs)),
            )
        )
    for batch, key, tokens in usage_groups:
        statements.append(
            (
                f"INSERT INTO polyloop_usage_tally (batch_key, key, tokens) VALUES ({ph}, {ph}, "
                f"{ph})",
                (batch_key(batch), key, tokens),
            )
        )
    return statements


def tally_upserts(ph: str, change: TallyChange) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that apply ``change`` (both databases: ``INSERT … ON CONFLICT``)."""
    add_run = (
        "INSERT INTO polyloop_run_tally (batch_key, stop_reason, steps, executed_actions, runs) "
        f"VALUES ({ph}, {ph}, {ph}, {ph}, {ph}) ON CONFLICT (batch_key, stop_reason, steps, "
        "executed_actions) DO UPDATE SET runs = polyloop_run_tally.runs + excluded.runs"
    )
    statements: list[tuple[str, tuple[Any, ...]]] = []
    if change.started:
        statements.append((add_run, (change.batch_key, "", 0, 0, 1)))
    if change.finished is not None:
        reason, steps, executed = change.finished
        statements.append((add_run, (change.batch_key, "", 0, 0, -1)))
        statements.append((add_run, (change.batch_key, reason, steps, executed, 1)))
    for key, tokens in change.usage:
        statements.append(
            (
                "INSERT INTO polyloop_usage_tally (batch_key, key, tokens) VALUES "
                f"({ph}, {ph}, {ph}) ON CONFLICT (batch_key, key) DO UPDATE SET "
                "tokens = polyloop_usage_tally.tokens + excluded.tokens",
                (change.batch_key, key, tokens),
            )
        )
    return statements


def rows_to_summaries(
    rows: Iterable[Sequence[Any]], usage: Iterable[Sequence[Any]]
) -> list[RunSummary]:
    """Rows of :attr:`IndexSql.columns` (newest first) and usage rows, as summaries oldest
    first."""
    by_run: dict[str, dict[str, int | float]] = {}
    for run_id, key, tokens in usage:
        by_run.setdefault(str(run_id), {})[decoded(key)] = read_number(tokens)
    summaries = [
        RunSummary(
            run_id=str(run_id),
            batch=column_value(batch),
            task_id=column_value(task_id),
            labels=json.loads(labels),
            started_at=column_value(str(started_at)) or "",
            finished_at=column_value(finished_at),
            stop_reason=stop_reason,
            steps=int(steps),
            executed_actions=int(executed),
            usage=by_run.get(str(run_id), {}),
        )
        for (
            run_id,
            batch,
            task_id,
            labels,
            started_at,
            finished_at,
            stop_reason,
            steps,
            executed,
        ) in rows
    ]
    summaries.reverse()
    return summaries


def stats_from_groups(
    groups: Iterable[Sequence[Any]], usage_totals: Iterable[Sequence[Any]]
) -> RunStats:
    """:class:`RunStats` from the grouped scan and the usage sums."""
    tally = StatsTally()
    for stop_reason, step_count, executed_count, count in groups:
        if stop_reason is None:
            tally.add_running(int(count))
        else:
            tally.add_finished(str(stop_reason), int(step_count), int(executed_count), int(count))
    return tally.stats({decoded(key): read_number(total) for key, total in usage_totals})

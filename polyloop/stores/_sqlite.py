"""SQLiteStore: the embedded default store — one file, standard library ``sqlite3`` only.

Why it is built this way (the decision record is ``docs/design/0002-sqlite-durability.md``):

* WAL with ``synchronous=FULL``: the WAL is fsynced at every commit, so an append is durable
  when it returns, and readers never block the writer.
* ``isolation_level=None`` and an explicit ``BEGIN IMMEDIATE`` per commit: the write lock is
  taken *before* the log is read, so a second writer waits on the busy timeout. A deferred
  transaction that reads and then writes gets ``SQLITE_BUSY`` at once instead (SQLite cannot
  wait there without risking a deadlock), which would turn ordinary contention into errors.
* The append rules (:func:`polyloop.stores._rules.check_append_many`) run *inside* that
  transaction; the primary key ``(run_id, sequence)`` is a second fence under them. A batch
  (``append_many``) is one transaction: one fsync for all its records, all or nothing.
* The log's end is read only when this process does not know it (``docs/design/0003``): the
  length it last committed is a lower bound, and the primary key catches a stale one.
* A commit runs on the caller's thread when it cannot wait (busy timeout 0, the connection
  free); otherwise on the worker thread. ``commit_now`` is that caller's-thread commit alone
  (``polyloop.ports.InlineCommitRunStore``: the loop calls it without a task and awaits
  ``append_many`` when it declines). Every 32 commits, the commit's own thread checkpoints
  (``docs/design/0003``).
* Group commit (``docs/design/0005-group-commit.md``): a commit that meets another run's — one
  waiting or in flight on the worker, or one another run began less than ``_GROUP_WINDOW_S``
  ago — waits on the worker with the others, and the worker commits every waiting batch in one
  ``BEGIN IMMEDIATE`` transaction (one fsync), each batch under a ``SAVEPOINT`` of its own so a
  refused batch is rolled back alone. A run committing alone keeps the inline path.
* An existing file is inspected read-only before anything is written, so a file that is not a
  polyloop database is reported (``StoreCorrupted`` naming the path) and left byte-identical.
  A new file's directory is fsynced once it has its tables; if that fails, the store still
  works and the failure is logged (``polyloop`` logger, naming the file).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import stat
import struct
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from polyloop._base._closing import AsyncClosing
from polyloop._base._run_id import validate_run_id
from polyloop._base._run_index import RunQuery, RunStats, RunSummary
from polyloop.errors import RunConflict, SchemaVersionError, StoreCorrupted
from polyloop.stores._rules import check_append_many, check_batch, check_record, decode_log
from polyloop.stores._sqlite_index import (
    INDEX_TABLES,
    build_index,
    index_batch,
    index_complete,
    query_runs,
    run_stats,
)
from polyloop.types import Record, RunFinished, RunLog, RunStarted

__all__ = ["STORE_SCHEMA_MAJOR", "STORE_SCHEMA_MINOR", "SQLiteStore"]

_log = logging.getLogger("polyloop")

# The layout of the tables below. A reader refuses an unknown major (a newer polyloop changed
# the layout incompatibly); a newer minor only adds things an older reader may ignore.
STORE_SCHEMA_MAJOR = 1
# Minor 1: the run index (polyloop/stores/_sqlite_index.py); a 1.0 store gets it built by the
# first writing open.
STORE_SCHEMA_MINOR = 1

_SCHEMA = (
    "CREATE TABLE polyloop_schema (major INTEGER NOT NULL, minor INTEGER NOT NULL)",
    f"INSERT INTO polyloop_schema (major, minor) VALUES ({STORE_SCHEMA_MAJOR}, "
    f"{STORE_SCHEMA_MINOR})",
    # WITHOUT ROWID: the primary key is the table's only index, and it is the access path of
    # every query (the last record of a run, a run's log in order, the distinct run ids).
    "CREATE TABLE polyloop_records ("
    " run_id TEXT NOT NULL,"
    " sequence INTEGER NOT NULL,"
    " kind TEXT NOT NULL,"
    " body TEXT NOT NULL,"
    " PRIMARY KEY (run_id, sequence)"
    ") WITHOUT ROWID",
    *INDEX_TABLES,
)
_RECORD_COLUMNS = {"run_id", "sequence", "kind", "body"}
_INSERT = "INSERT INTO polyloop_records (run_id, sequence, kind, body) VALUES (?, ?, ?, ?)"
_Rows = list[tuple[str, int, str, str]]

# Pages of a new store. Every commit rewrites the pages it touches into the WAL, and an action
# step's two commits append a few records at the end of the log: 1 KiB pages made a commit of
# two records (1.5 KB and 140 B) 285 us instead of 375 us with SQLite's default 4 KiB (write +
# fsync of 1 KB alone: 222 us) on the development VM (docs/design/0003). Reads (resume, the
# CLI) follow a few more pages per large record; they are off the hot path. A store created
# with another page size keeps it.
PAGE_SIZE = 1024

_SQLITE_MAGIC = b"SQLite format 3\x00"
_DEFAULT_BUSY_TIMEOUT_S = 60.0

# Commits on the caller's thread (docs/design/0003): a commit slower than this — a disk that
# stalls fsync — sends the next _SLOW_PAUSE_COMMITS commits back to the worker thread, so the
# event loop is blocked by at most one slow fsync in that many.
_SLOW_INLINE_COMMIT_S = 0.010
_SLOW_PAUSE_COMMITS = 1000
# SQLite's automatic checkpoint (1000 pages) would stall one commit for milliseconds; ours, a
# PASSIVE one, follows every this many commits on the committing thread: short, and the WAL then
# starts over instead of growing (a commit that extends the file costs more). It counts in the
# slow-commit measure above. On the worker it cost more: the next commit waited for it anyway,
# through a thread hand-off (docs/design/0003).
_CHECKPOINT_EVERY_COMMITS = 32
# Group commit (docs/design/0005): a commit begun less than this long after another run's joins
# the group on the worker instead of committing inline. Runs that commit this close together
# are busy at once: while one commit's fsync blocks the event loop, the others' steps could have
# run, and their commits could have shared the fsync. A run alone never sees another run's
# commit, so it always commits inline; a sparse crowd (runs waiting seconds on a model) rarely
# does, and pays at most a thread hand-off when it does.
_GROUP_WINDOW_S = 0.005
# The savepoint each batch of a group commits under; a refused batch is rolled back to it.
_SAVEPOINT = "polyloop_batch"

# Connections inherited through fork() are never used or closed in the child (closing one
# there could checkpoint or unlock on the parent's behalf); they are kept here instead.
_inherited_connections: list[sqlite3.Connection] = []


class SQLiteStore(AsyncClosing):
    """A run store in one SQLite file, durable when ``append`` returns.

    ``path`` is resolved against the current directory when the store is made; nothing else
    happens until first use (or ``async with``), when the file is created if it does not exist.
    A missing or empty file becomes a new store. An existing file that is not a polyloop
    database (random bytes, a truncated database, an SQLite database with other tables) raises
    ``StoreCorrupted`` naming the path and is left untouched; a store written by a newer,
    incompatible polyloop raises ``SchemaVersionError``.

    Several processes may use one file at once: appends serialise on SQLite's write lock and
    wait up to ``busy_timeout_s`` for it. Within a process, one connection (guarded by a lock)
    is used from the store's own worker thread, and an append commits on the calling thread
    only when nothing can make it wait: the connection is open and idle and the write lock
    free at once. Anything else — opening, reading, a lock held by another writer, a disk that
    stalled a commit — runs on the worker, so the event loop never waits on a lock, and waits
    on the disk only for the fsync of a commit it asked for. Commits of several runs made at
    the same moment wait for the worker's next group commit: one transaction and one fsync for
    all of them, each batch still all or nothing (docs/design/0005). Nothing loop-bound is made
    here, so a store may be used from successive event loops; ``aclose()`` releases the
    connection and the thread.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_s: float = _DEFAULT_BUSY_TIMEOUT_S
    ) -> None:
        if busy_timeout_s <= 0:
            raise ValueError(f"busy_timeout_s must be > 0, got {busy_timeout_s!r}")
        self._path = Path(path).absolute()
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        # The connection's busy timeout now (under self._lock): the worker waits for SQLite's
        # write lock, the caller's thread never does (see _append_inline).
        self._busy_ms = self._busy_timeout_ms
        self._lock = threading.Lock()  # guards the connection
        self._conn: sqlite3.Connection | None = None
        self._conn_pid = 0
        self._worker_lock = threading.Lock()  # guards the worker's creation
        self._worker: _Worker | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None  # one per store, not per reopen
        # run id -> the length this process last committed for it (unfinished runs only);
        # read and written under self._lock, on whichever thread commits.
        self._lengths: dict[str, int] = {}
        # Commits since the last checkpoint (under self._lock, on whichever thread commits).
        self._uncheckpointed = 0
        # How many more commits go to the worker after a slow inline one (callers' side only;
        # a lost update between two event loops only shifts the pause by one commit).
        self._inline_paused = 0
        # Group commit (docs/design/0005). The batches waiting for the worker's next group, and
        # whether a group commit is queued or running on the worker (both under _group_lock;
        # _group_pid: the process they belong to, reset in a forked child).
        self._group_lock = threading.Lock()
        self._waiting: list[_Waiter] = []
        self._group_queued = False
        self._group_pid = os.getpid()
        # The run and start time of the last commit begun (callers' side, like _inline_paused).
        self._last_run = ""
        self._last_at = -_GROUP_WINDOW_S

    @property
    def path(self) -> Path:
        """The database file (absolute)."""
        return self._path

    # ------------------------------------------------------------------ the RunStore seam

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        check_record(run_id, record, sequence)
        await self.append_many(run_id, (record,), sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        """Append ``records`` at ``sequence``, ``sequence + 1``, … in one durable transaction.

        All or nothing: the append rules apply to each record in order, and the first violation
        is raised with nothing written. One commit, so one WAL fsync. It runs on the calling
        thread when the connection is open, idle and the write lock free at once, and no other
        run is committing; otherwise — another run's commit is near, another writer holds the
        lock, the worker is busy, the disk was slow — it waits for the worker's next group
        commit, which commits every batch then waiting in one transaction (docs/design/0005):
        still all or nothing per batch, fenced, and durable before this returns.
        """
        batch, rows = _checked_rows(run_id, records, sequence)
        if self._contended(run_id) or not self._append_inline(run_id, batch, sequence, rows):
            await self._join_group(run_id, batch, sequence, rows)

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        """``append_many`` when it can commit on this thread without waiting; ``False``: nothing
        was done, await ``append_many``. The loop calls it directly, with no task
        (``polyloop.ports.InlineCommitRunStore``, docs/design/0003)."""
        if self._inline_paused:  # append_many counts the pause down, once per commit
            return False
        if self._contended(run_id):  # join the others' group commit (append_many)
            return False
        batch, rows = _checked_rows(run_id, records, sequence)
        return self._append_inline(run_id, batch, sequence, rows)

    async def read_log(self, run_id: str) -> RunLog:
        validate_run_id(run_id)
        log: RunLog = await self._in_worker(self._read_log, run_id)
        return log

    async def run_ids(self) -> list[str]:
        run_ids: list[str] = await self._in_worker(self._run_ids)
        return run_ids

    async def query_runs(self, query: RunQuery) -> list[RunSummary]:
        """The run index's rows ``query`` selects (``polyloop.ports.IndexedRunStore``)."""
        rows: list[RunSummary] = await self._in_worker(
            self._with_connection, lambda conn: query_runs(conn, query)
        )
        return rows

    async def run_stats(self, query: RunQuery) -> RunStats:
        """The statistics of the rows ``query`` selects (``polyloop.ports.IndexedRunStore``)."""
        stats: RunStats = await self._in_worker(
            self._with_connection, lambda conn: run_stats(conn, query)
        )
        return stats

    async def aclose(self) -> None:
        """Close the connection. The store may be used again afterwards (it reopens)."""
        with self._worker_lock:
            worker, self._worker = self._worker, None
        if worker is None or worker.pid != os.getpid():
            self._close()
            return
        try:
            await worker.call(self._close)  # after every call already queued
        finally:
            worker.stop()

    async def __aenter__(self) -> SQLiteStore:
        # Opening here makes a bad file fail at `async with`, not at the first append.
        await self._in_worker(self._with_connection, lambda conn: None)
        return self

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self._path)!r})"

    # ------------------------------------------------------------------ worker-thread side

    async def _in_worker(self, call: Callable[..., Any], *args: Any) -> Any:
        """Run ``call(*args)`` on this store's worker thread, from whichever loop is running."""
        return await self._current_worker().call(call, *args)

    def _current_worker(self) -> _Worker:
        with self._worker_lock:
            if self._worker is None or self._worker.pid != os.getpid():
                # A worker inherited through fork() has no thread in this process: make one.
                self._worker = _Worker()
                if self._finalizer is not None:  # the previous worker is closed or not ours
                    self._finalizer.detach()
                # A store never closed: end its worker too.
                self._finalizer = weakref.finalize(self, self._worker.stop)
            return self._worker

    # ------------------------------------------------------------------ group commit

    def _contended(self, run_id: str) -> bool:
        """Whether this commit should join a group (docs/design/0005): one is waiting or in
        flight on the worker, or another run began a commit less than ``_GROUP_WINDOW_S`` ago."""
        if self._group_queued:
            return True
        return self._last_run != run_id and time.perf_counter() - self._last_at < _GROUP_WINDOW_S

    def _note(self, run_id: str, batch: tuple[Record, ...], at: float) -> None:
        """Remember the run whose commit began at ``at``; a run's last commit (``RunFinished``)
        leaves nothing to meet, so runs one after another never look concurrent."""
        self._last_run = run_id
        self._last_at = -_GROUP_WINDOW_S if isinstance(batch[-1], RunFinished) else at

    async def _join_group(
        self, run_id: str, batch: tuple[Record, ...], sequence: int, rows: _Rows
    ) -> None:
        """Wait for the worker's next group commit to commit this batch (or refuse it alone).

        Returns once the group's ``COMMIT`` is durable. Cancelled before its group began, the
        batch is dropped, nothing written; after, the group commits it whole regardless.
        """
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop, loop.create_future(), run_id, batch, sequence, rows)
        self._note(run_id, batch, time.perf_counter())
        worker = self._current_worker()
        if self._group_pid != os.getpid():
            # Inherited through fork(): the parent's waiters are not ours, and its lock may have
            # been held by the parent's worker at the fork.
            self._group_lock = threading.Lock()
            self._waiting, self._group_queued = [], False
            self._group_pid = os.getpid()
        with self._group_lock:
            self._waiting.append(waiter)
            start, self._group_queued = not self._group_queued, True
        while start and not worker.submit(self._commit_waiting, worker):
            worker = self._current_worker()  # closed meanwhile (aclose): a new one
        await waiter.future

    def _commit_waiting(self, worker: _Worker) -> None:
        """On the worker: commit the waiting batches as one group, hand each waiter its outcome
        once the ``COMMIT`` is durable, and go on while more are waiting."""
        while True:
            with self._group_lock:
                # A waiter cancelled before its group began gave up: nothing of it is written.
                group = [waiter for waiter in self._waiting if not waiter.future.cancelled()]
                self._waiting = []
            outcomes: list[BaseException | None] = []
            if group:
                try:
                    outcomes = self._with_connection(partial(self._commit_group, group=group))
                except BaseException as exc:  # the shared transaction: nothing of it is written
                    outcomes = [exc] * len(group)
            with self._group_lock:
                # Cleared before the waiters wake: a run whose commit follows its group's alone
                # commits inline again.
                more = bool(self._waiting)
                self._group_queued = more
            # One wake-up per event loop for the whole group, not one per waiter: waking a loop
            # from another thread is the durable path's own largest cost (design note 0005).
            settled: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[None], Any]]] = {}
            for waiter, outcome in zip(group, outcomes, strict=True):
                settled.setdefault(waiter.loop, []).append((waiter.future, outcome))
            for loop, futures in settled.items():
                with contextlib.suppress(RuntimeError):  # that loop has closed
                    loop.call_soon_threadsafe(_settle_all, futures)
            # Calls queued behind us (a read) go first, then the next group. A stopped worker
            # takes no more jobs: the groups still waiting are committed here.
            if not more or (not worker.idle() and worker.submit(self._commit_waiting, worker)):
                return

    def _commit_group(
        self, conn: sqlite3.Connection, *, group: list[_Waiter]
    ) -> list[BaseException | None]:
        """One transaction for every batch of ``group``, each fenced and inserted under its own
        savepoint; each batch's outcome: ``None`` (committed) or the error that refused it alone.
        An error of the transaction itself — its ``COMMIT``, the write lock's busy timeout, the
        database ending it — is raised: then nothing of the group is written."""
        if len(group) == 1:  # no savepoint needed: the batch's error is the transaction's
            (waiter,) = group
            try:
                self._begin(conn)
                self._commit_batch(conn, waiter.run_id, waiter.batch, waiter.sequence, waiter.rows)
            except Exception as exc:
                return [self._store_error(exc)]
            return [None]
        outcomes: list[BaseException | None] = []
        self._begin(conn)
        try:
            for waiter in group:
                conn.execute(f"SAVEPOINT {_SAVEPOINT}")
                try:
                    self._write_batch(
                        conn, waiter.run_id, waiter.batch, waiter.sequence, waiter.rows
                    )
                    outcomes.append(None)
                except Exception as exc:
                    # SQLite ended the transaction (an I/O error), or the file is damaged: the
                    # group fails whole. Anything else refused this batch alone.
                    if not conn.in_transaction or (
                        isinstance(exc, sqlite3.DatabaseError) and _is_corruption(exc)
                    ):
                        raise
                    conn.execute(f"ROLLBACK TO {_SAVEPOINT}")  # this batch alone, whole
                    outcomes.append(exc)
                conn.execute(f"RELEASE {_SAVEPOINT}")
            conn.execute("COMMIT")
        except BaseException:
            for waiter in group:
                self._lengths.pop(waiter.run_id, None)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        for waiter, outcome in zip(group, outcomes, strict=True):
            if outcome is None:
                self._committed(waiter.run_id, waiter.batch, waiter.sequence)
            else:
                self._lengths.pop(waiter.run_id, None)
        self._after_commit(conn)
        return outcomes

    def _begin(self, conn: sqlite3.Connection) -> None:
        # IMMEDIATE: take the write lock before reading the log (see the module docstring).
        conn.execute("BEGIN IMMEDIATE")

    def _store_error(self, exc: BaseException) -> BaseException:
        if isinstance(exc, sqlite3.DatabaseError) and _is_corruption(exc):
            return StoreCorrupted(f"{self._path}: damaged database ({exc})")
        return exc

    def _append_inline(
        self, run_id: str, batch: tuple[Record, ...], sequence: int, rows: _Rows
    ) -> bool:
        """Commit on the calling thread if that cannot wait; ``False``: nothing done, use the
        worker.

        The worker's thread hand-off costs two cross-thread wake-ups per commit, more than the
        commit's own SQLite work (docs/design/0003). What the event loop must never do is wait:
        so only a connection that is open and not in use (the lock is taken without blocking),
        and a write lock that is free at once (busy timeout 0 for the ``BEGIN``), are used here.
        """
        if self._inline_paused:  # a recent inline commit was slow: the worker takes this one
            self._inline_paused -= 1
            return False
        conn = self._conn
        if conn is None or self._conn_pid != os.getpid():
            return False
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if conn is not self._conn:  # closed or reopened meanwhile
                return False
            started = time.perf_counter()
            self._set_busy_timeout(conn, 0)
            try:
                self._begin(conn)
            except sqlite3.OperationalError:  # another writer holds the lock: do not wait here
                return False
            self._note(run_id, batch, started)
            try:
                self._commit_batch(conn, run_id, batch, sequence, rows)
            except sqlite3.DatabaseError as exc:
                if _is_corruption(exc):
                    raise StoreCorrupted(f"{self._path}: damaged database ({exc})") from None
                raise
            if time.perf_counter() - started > _SLOW_INLINE_COMMIT_S:
                self._inline_paused = _SLOW_PAUSE_COMMITS
            return True
        finally:
            self._lock.release()

    def _commit_batch(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        batch: tuple[Record, ...],
        sequence: int,
        rows: _Rows,
    ) -> None:
        """Inside a ``BEGIN IMMEDIATE`` transaction holding this batch alone: write it, commit
        — or roll back."""
        try:
            self._write_batch(conn, run_id, batch, sequence, rows)
            conn.execute("COMMIT")
        except BaseException:
            self._lengths.pop(run_id, None)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._committed(run_id, batch, sequence)
        self._after_commit(conn)

    def _write_batch(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        batch: tuple[Record, ...],
        sequence: int,
        rows: _Rows,
    ) -> None:
        """Fence and insert one run's batch inside an already-open transaction; nothing else.

        The one place a batch meets the tables, whichever way it commits (inline, alone on the
        worker, or in a group under a savepoint): what must change with a run's records in the
        same transaction belongs here. Raises the append rule's error (or the database's) and
        leaves the rolling back to the caller, which owns the transaction.
        """
        self._fence(conn, run_id, batch, sequence)
        try:
            conn.executemany(_INSERT, rows)
        except sqlite3.IntegrityError:
            # The cached length was stale (another process appended): read the log to
            # raise the precise error; the primary key already refused the batch.
            self._fence(conn, run_id, batch, sequence, cached=False)
            raise RunConflict(
                f"run {run_id!r}: a record at sequence {sequence} already exists"
            ) from None
        index_batch(conn, run_id, batch)  # the run index, in the same transaction

    def _committed(self, run_id: str, batch: tuple[Record, ...], sequence: int) -> None:
        """Remember the log's end after a durable commit of ``batch`` (the fence's lower bound)."""
        if isinstance(batch[-1], RunFinished):
            self._lengths.pop(run_id, None)
        else:
            self._lengths[run_id] = sequence + len(batch)

    def _after_commit(self, conn: sqlite3.Connection) -> None:
        """Count a transaction, and checkpoint after every ``_CHECKPOINT_EVERY_COMMITS``."""
        self._uncheckpointed += 1
        if self._uncheckpointed >= _CHECKPOINT_EVERY_COMMITS:
            self._uncheckpointed = 0
            # Copy the WAL into the database file, so the next commit starts the WAL over.
            # PASSIVE never waits (no busy handler): it does what it can now, best effort.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def _set_busy_timeout(self, conn: sqlite3.Connection, ms: int) -> None:
        """Give the connection this busy timeout (0 on the caller's thread, the store's own on
        the worker), with a statement only when it changes: one per switch of thread, not two
        per commit."""
        if self._busy_ms != ms:
            conn.execute(f"PRAGMA busy_timeout={ms}")
            self._busy_ms = ms

    def _fence(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        batch: tuple[Record, ...],
        sequence: int,
        *,
        cached: bool = True,
    ) -> None:
        """Apply the append rules to ``batch``, reading the log's end only when it must.

        The length this process last committed is a lower bound of the log's (it only grows):
        when the caller's ``sequence`` equals it, the rules are checked against it without a
        read, and a stale value shows as a primary-key conflict. A ``RunStarted`` always reads
        (the key cannot tell "exists" from "free").
        """
        known = cached and self._lengths.get(run_id) == sequence
        if known and not any(isinstance(record, RunStarted) for record in batch):
            check_append_many(run_id, batch, sequence=sequence, length=sequence, finished=False)
            return
        last = conn.execute(
            "SELECT sequence, kind FROM polyloop_records WHERE run_id = ? "
            "ORDER BY sequence DESC LIMIT 1",
            (run_id,),
        ).fetchone()
        length = 0 if last is None else int(last[0]) + 1
        finished = last is not None and last[1] == RunFinished.kind
        check_append_many(run_id, batch, sequence=sequence, length=length, finished=finished)

    def _read_log(self, run_id: str) -> RunLog:
        rows: list[Any] = self._with_connection(
            lambda conn: conn.execute(
                "SELECT sequence, kind, body FROM polyloop_records WHERE run_id = ? "
                "ORDER BY sequence",
                (run_id,),
            ).fetchall()
        )
        return decode_log(run_id, rows, where=str(self._path))

    def _run_ids(self) -> list[str]:
        rows: list[Any] = self._with_connection(
            lambda conn: conn.execute("SELECT DISTINCT run_id FROM polyloop_records").fetchall()
        )
        return sorted(str(row[0]) for row in rows)

    def _close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._conn_pid == os.getpid():
                conn.close()

    def _with_connection(self, use: Any) -> Any:
        """Run ``use(connection)`` under the lock, opening the connection first if needed."""
        with self._lock:
            if self._conn is not None and self._conn_pid != os.getpid():
                _inherited_connections.append(self._conn)
                self._conn = None
            if self._conn is None:
                self._conn = self._open()
                self._conn_pid = os.getpid()
                self._busy_ms = self._busy_timeout_ms  # sqlite3.connect(timeout=...) set it
            self._set_busy_timeout(self._conn, self._busy_timeout_ms)
            try:
                return use(self._conn)
            except sqlite3.DatabaseError as exc:
                if _is_corruption(exc):
                    raise StoreCorrupted(f"{self._path}: damaged database ({exc})") from None
                raise

    # ------------------------------------------------------------------ opening

    def _open(self) -> sqlite3.Connection:
        fresh = _inspect_file(self._path)
        try:
            conn = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,  # used from worker threads, always under self._lock
            )
        except sqlite3.Error as exc:
            raise StoreCorrupted(f"{self._path}: cannot open as a database ({exc})") from None
        try:
            self._prepare(conn, fresh)
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: sqlite3.Connection, fresh: bool) -> None:
        try:
            if not fresh and self._validate(conn) == "ours":
                _set_durability(conn)
                if not index_complete(conn):  # written by a polyloop without the run index
                    build_index(conn, str(self._path))
                return
            # A missing or empty file, or an SQLite database with no schema at all. The page
            # size must be set before the file's first page is written (a no-op on a database
            # that already has pages); WAL before the tables are made, so the new file never
            # exists in rollback-journal mode.
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            _set_durability(conn)
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Another process may have initialised the file while we waited for the lock.
                if self._validate(conn) == "empty":
                    for statement in _SCHEMA:
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if fresh:
                _fsync_directory(self._path.parent, self._path)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and not _is_corruption(exc):
                raise
            raise StoreCorrupted(f"{self._path}: not a polyloop database ({exc})") from None

    def _validate(self, conn: sqlite3.Connection) -> str:
        """Read-only look at the schema: ``"ours"``, ``"empty"``, or raise naming the file."""
        objects = conn.execute("SELECT type, name FROM sqlite_master").fetchall()
        if not objects:
            return "empty"
        tables = {name for kind, name in objects if kind == "table"}
        if "polyloop_schema" not in tables:
            shown = ", ".join(sorted(tables)[:5]) or "no tables"
            raise StoreCorrupted(
                f"{self._path}: an SQLite database but not a polyloop store (it has: {shown}); "
                "refusing to add tables to it"
            )
        versions = conn.execute("SELECT major, minor FROM polyloop_schema").fetchall()
        if len(versions) != 1 or not all(isinstance(v, int) for v in versions[0]):
            raise StoreCorrupted(f"{self._path}: polyloop_schema must hold one (major, minor) row")
        major, minor = versions[0]
        if major != STORE_SCHEMA_MAJOR:
            raise SchemaVersionError(
                f"{self._path}: store schema version {major}.{minor} is not supported "
                f"(this polyloop reads {STORE_SCHEMA_MAJOR}.x); use a matching polyloop version"
            )
        columns = {row[1] for row in conn.execute("PRAGMA table_info(polyloop_records)")}
        if not columns >= _RECORD_COLUMNS:
            raise StoreCorrupted(f"{self._path}: table polyloop_records is missing or malformed")
        return "ours"


@dataclass(slots=True, eq=False)
class _Waiter:
    """A batch waiting for the worker's next group commit, and where to hand its outcome."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    run_id: str
    batch: tuple[Record, ...]
    sequence: int
    rows: _Rows


# (loop, future, call, args): the call, and where to hand its outcome back (nowhere: a job
# that hands its outcomes back itself, the group commit).
_Job = tuple[
    asyncio.AbstractEventLoop | None,
    "asyncio.Future[Any] | None",
    Callable[..., Any],
    tuple[Any, ...],
]


class _Worker:
    """One thread that runs a store's blocking calls in order and hands each result back to the
    event loop that asked for it.

    Why not ``asyncio.to_thread`` or a ``ThreadPoolExecutor``: the calls serialise on one
    connection anyway, and at fsync speeds the hand-off is a large share of an append. With an
    fsync as the work, this queue added 85-125 µs per call on the development VM, a one-thread
    executor 125-190 µs, and the shared pool more again — against a 190 µs fsync
    (docs/design/0002-sqlite-durability.md). A dedicated thread also keeps the intent log from
    queueing behind slow synchronous tools, which run in the shared pool.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._stopped = False
        self._stop_lock = threading.Lock()  # a job is never queued behind the end
        # The thread gets the queue, not this object, so an unclosed store can be collected.
        # Daemon: an idle worker must not keep the interpreter alive.
        threading.Thread(
            target=_serve, args=(self._jobs,), name="polyloop-sqlite", daemon=True
        ).start()

    async def call(self, call: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((loop, future, call, args))
        return await future

    def submit(self, call: Callable[..., Any], *args: Any) -> bool:
        """Queue ``call(*args)``, which hands its outcome back itself; ``False`` if stopped."""
        with self._stop_lock:
            if self._stopped:
                return False
            self._jobs.put((None, None, call, args))
            return True

    def idle(self) -> bool:
        """No call is queued (the one running, if any, aside)."""
        return self._jobs.empty()

    def stop(self) -> None:
        """End the thread once the calls already queued are done."""
        with self._stop_lock:
            self._stopped = True
            self._jobs.put(None)


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    while (job := jobs.get()) is not None:
        _run(*job)
        del job  # hold no reference to the store while idle, so an unclosed one is collected


def _run(
    loop: asyncio.AbstractEventLoop | None,
    future: asyncio.Future[Any] | None,
    call: Callable[..., Any],
    args: tuple[Any, ...],
) -> None:
    if loop is None or future is None:  # it hands its outcome back itself
        try:
            call(*args)
        except BaseException:  # a bug: keep the thread serving the other calls
            _log.exception("polyloop-sqlite: a job that hands back its own outcome failed")
        return
    if future.cancelled():  # the caller gave up before we started: do nothing
        return
    result: Any = None
    error: BaseException | None = None
    try:
        result = call(*args)
    except BaseException as exc:  # handed to the caller, whatever it is
        error = exc
    with contextlib.suppress(RuntimeError):  # that loop has closed: nobody is waiting
        loop.call_soon_threadsafe(_settle, future, result, error)


def _settle_all(futures: list[tuple[asyncio.Future[None], BaseException | None]]) -> None:
    """On the waiters' loop: each group commit's outcome to its waiter, in the group's order."""
    for future, error in futures:
        _settle(future, None, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _checked_rows(
    run_id: str, records: Sequence[Record], sequence: int
) -> tuple[tuple[Record, ...], _Rows]:
    """The checked batch and its rows, encoded on the caller's side once: a record that cannot
    be encoded writes nothing."""
    batch = check_batch(run_id, records, sequence)
    return batch, [(run_id, sequence + n, r.kind, r.to_json()) for n, r in enumerate(batch)]


def _set_durability(conn: sqlite3.Connection) -> None:
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreCorrupted(f"cannot switch the database to WAL mode (it stays in {mode!r})")
    conn.execute("PRAGMA synchronous=FULL")  # fsync the WAL at every commit: durable on return
    conn.execute("PRAGMA fullfsync=ON")  # macOS: fsync alone does not reach the platter
    conn.execute("PRAGMA checkpoint_fullfsync=ON")
    conn.execute("PRAGMA wal_autocheckpoint=0")  # SQLiteStore checkpoints itself (_commit)


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _inspect_file(path: Path) -> bool:
    """Check an existing file without opening it as a database; return whether it is fresh.

    Fresh means missing or empty (SQLite itself treats an empty file as an empty database).
    Anything else must start with an SQLite header and be as long as the header says, so a
    truncated database is refused before SQLite could try to use it.
    """
    # Looked at before and after the main file: while a checkpoint runs (another connection
    # closing, say) the main file may legitimately be shorter than its header already says —
    # pages are copied in page order, page 1 first — and SQLite recovers that from the WAL.
    wal_before = _wal_in_use(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise StoreCorrupted(
                f"{path}: cannot create a store here, directory {path.parent} does not exist"
            ) from None
        return True
    except OSError as exc:
        raise StoreCorrupted(f"{path}: cannot be read ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise StoreCorrupted(f"{path}: is a directory, not a polyloop database file")
    if not stat.S_ISREG(info.st_mode):
        raise StoreCorrupted(f"{path}: is not a regular file")
    if info.st_size == 0:
        return True
    try:
        with path.open("rb") as file:
            header = file.read(100)
    except OSError as exc:
        raise StoreCorrupted(f"{path}: cannot be read ({exc.strerror})") from None
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise StoreCorrupted(f"{path}: not a polyloop database (no SQLite header)")
    (page_size,) = struct.unpack(">H", header[16:18])
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise StoreCorrupted(f"{path}: not a polyloop database (bad SQLite page size)")
    change_counter, page_count = struct.unpack(">II", header[24:32])
    (valid_for,) = struct.unpack(">I", header[92:96])
    short = valid_for == change_counter and info.st_size < page_count * page_size
    # The file grows by whole pages only, so a partial page is damage in any case; a short file
    # is damage only if no checkpoint was under way and its size held still while we looked.
    if info.st_size % page_size != 0 or (
        short and not wal_before and not _wal_in_use(path) and _size_or_none(path) == info.st_size
    ):
        raise StoreCorrupted(
            f"{path}: truncated database ({info.st_size} bytes, the header says "
            f"{page_count} pages of {page_size})"
        )
    return False


def _wal_in_use(path: Path) -> bool:
    return bool(_size_or_none(path.with_name(path.name + "-wal")))


def _size_or_none(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _fsync_directory(directory: Path, database: Path) -> None:
    """Make a new file's directory entry durable (SQLite syncs its WAL's entry, not the db's).

    A failure is logged, not raised: the store is usable, but a power loss may now lose the new
    file whole — which its owner must be able to find out.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        if os.name != "nt":  # Windows cannot open a directory; nothing more can be done there
            _log.warning(_DIRECTORY_NOT_SYNCED, database, directory, exc_info=True)
        return
    try:
        os.fsync(fd)
    except OSError:
        _log.warning(_DIRECTORY_NOT_SYNCED, database, directory, exc_info=True)
    finally:
        os.close(fd)


_DIRECTORY_NOT_SYNCED = (
    "SQLiteStore(%r): syncing the new database's directory %s failed; the store works, but a "
    "power loss may lose the file's directory entry (and every run in it)"
)

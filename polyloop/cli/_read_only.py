"""The stores ``polyloop runs`` and ``polyloop show`` read: a SQLite file is opened read-only.

Reading must never create, truncate or modify the user's file: a missing file, a 0-byte file,
a directory, a file that is not SQLite and another application's SQLite database are each
refused with one line naming the file, which is left byte-identical. The file is opened with
SQLite's URI ``mode=ro``, so no write (not even a WAL checkpoint when it closes) can reach it.
"""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path
from typing import Any

from polyloop._base._run_index import RunQuery, RunStats, RunSummary
from polyloop.errors import IndexNotBuilt, StoreCorrupted
from polyloop.ports import RunStore
from polyloop.stores import _postgres_store, open_store, sqlite_path
from polyloop.stores._rules import decode_log
from polyloop.stores._sqlite import SQLiteStore, _inspect_file, _is_corruption
from polyloop.stores._sqlite_index import index_complete, query_runs, run_stats
from polyloop.types import RunLog

__all__ = ["NoStore", "ReadOnlySQLite", "open_for_reading"]


class NoStore(Exception):
    """Nothing has been recorded at the place named (a failure at run time, not a usage error)."""


def open_for_reading(url: str) -> RunStore | ReadOnlySQLite:
    """The store ``url`` names, for reading only.

    A SQLite file (``sqlite:///…`` or a plain path) is checked and opened read-only here, so a
    file that is not a polyloop store is refused before anything could touch it. Raises
    ``ValueError`` for a URL of an unknown form (a usage error); :class:`NoStore` or
    ``StoreCorrupted`` when the file cannot be read as a store.
    """
    path = sqlite_path(url)
    if path is None and url != "memory:":
        # PostgreSQL, without migrating a store written by an earlier polyloop (only reading).
        return _postgres_store(url, migrate=False)
    if path is None:
        return open_store(url)  # memory: (empty)
    reader = ReadOnlySQLite(path)
    reader.open(url)
    return reader


class ReadOnlySQLite:
    """``run_ids``, ``read_log`` and the run index (``query_runs``, ``run_stats``) of a
    polyloop SQLite store, through a read-only connection."""

    def __init__(self, path: str) -> None:
        self.path = Path(path).absolute()
        self._conn: sqlite3.Connection | None = None

    def open(self, url: str) -> None:
        path = self.path
        try:
            info = path.stat()
        except FileNotFoundError:
            raise NoStore(f"no store at {path} (nothing has been recorded with {url})") from None
        except OSError as exc:
            raise StoreCorrupted(f"{path}: cannot be read ({exc.strerror})") from None
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            raise NoStore(f"{path}: an empty file, not a polyloop store (nothing recorded in it)")
        _inspect_file(path)  # a directory, not SQLite, truncated: refused without opening it
        try:
            conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5.0)
        except sqlite3.Error as exc:
            raise StoreCorrupted(f"{path}: cannot open as a database ({exc})") from None
        try:
            if _validate(conn, path) == "empty":
                raise NoStore(f"{path}: an SQLite database with no polyloop store in it")
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    async def run_ids(self) -> list[str]:
        rows = self._query("SELECT DISTINCT run_id FROM polyloop_records", ())
        return sorted(str(row[0]) for row in rows)

    async def read_log(self, run_id: str) -> RunLog:
        rows = self._query(
            "SELECT sequence, kind, body FROM polyloop_records WHERE run_id = ? ORDER BY sequence",
            (run_id,),
        )
        return decode_log(run_id, rows, where=str(self.path))

    async def query_runs(self, query: RunQuery) -> list[RunSummary]:
        """The run index's rows; ``IndexNotBuilt`` for a store written without the index (this
        reader never builds it: that is a write)."""
        rows: list[RunSummary] = self._indexed(lambda conn: query_runs(conn, query))
        return rows

    async def run_stats(self, query: RunQuery) -> RunStats:
        stats: RunStats = self._indexed(lambda conn: run_stats(conn, query))
        return stats

    def _indexed(self, use: Any) -> Any:
        if self._conn is None:
            raise StoreCorrupted(f"{self.path}: not open")
        try:
            if not index_complete(self._conn):
                raise IndexNotBuilt(f"{self.path}: the run index is not built yet")
            return use(self._conn)
        except sqlite3.DatabaseError as exc:
            if _is_corruption(exc):
                raise StoreCorrupted(f"{self.path}: damaged database ({exc})") from None
            raise StoreCorrupted(f"{self.path}: cannot be read ({exc})") from None

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _query(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        if self._conn is None:
            raise StoreCorrupted(f"{self.path}: not open")
        try:
            return self._conn.execute(sql, parameters).fetchall()
        except sqlite3.DatabaseError as exc:
            if _is_corruption(exc):
                raise StoreCorrupted(f"{self.path}: damaged database ({exc})") from None
            raise StoreCorrupted(f"{self.path}: cannot be read ({exc})") from None


def _validate(conn: sqlite3.Connection, path: Path) -> str:
    """The store's own schema check (``"ours"``, ``"empty"``, or raise naming the file)."""
    try:
        return SQLiteStore(path)._validate(conn)
    except sqlite3.DatabaseError as exc:
        raise StoreCorrupted(f"{path}: not a polyloop database ({exc})") from None

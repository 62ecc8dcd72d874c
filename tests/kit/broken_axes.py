"""Stores that break a promise only somewhere on an axis the probes did not vary (issue 30 §1):
identity, place, time and size. Each was reported conformant by the kit before its probe
varied that axis; each stands beside a correct twin (``MemoryStore``, ``LineFileStore`` or
``SqliteLogStore`` of ``broken_stores``) that must stay clean.

Named by ``StoreSamples(factory="tests.kit.broken_axes:<class>")``, so a second process imports
this module: it imports only the standard library and polyloop's core.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from polyloop import Record, RunLog, RunStarted, record_from_json
from polyloop.stores import MemoryStore
from tests.kit.broken_stores import LineFileStore, SqliteLogStore, _batch_refusal

# Identity: run ids from the whole grammar.


class IntKeyedRunIds(MemoryStore):
    """Keys a run whose id is all digits by its integer value ("numeric ids are row ids"):
    ``0042`` and ``42`` share one log."""

    @staticmethod
    def _key(run_id: str) -> str:
        return str(int(run_id)) if run_id.isdigit() else run_id

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await super().append(self._key(run_id), record, sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await super().append_many(self._key(run_id), records, sequence=sequence)

    async def read_log(self, run_id: str) -> RunLog:
        return await super().read_log(self._key(run_id))


class SqliteStringColumn(SqliteLogStore):
    """``run_id STRING``: SQLite gives the declared type ``STRING`` numeric affinity (only
    ``TEXT`` is text), so an id that looks like a number is stored as one — ``007`` becomes
    ``7``, and ``run_ids()`` hands back an int."""

    def __init__(self, directory: Path | str) -> None:
        self._db = sqlite3.connect(Path(directory) / "string.db", timeout=10)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS log (run_id STRING, sequence INTEGER, "
            "record TEXT, PRIMARY KEY (run_id, sequence))"
        )
        self._db.commit()


# Place: a second process on the same data, after this one read and cached.


class ProcessWideLogCache(LineFileStore):
    """Caches each run's log in a class-level dict (shared by every object of the process, so
    objects in one process agree), updated by its own appends: a second process's appends are
    never seen."""

    _CACHE: ClassVar[dict[tuple[str, str], list[Record]]] = {}

    def _read(self, run_id: str) -> list[Record]:
        key = (str(self.directory), run_id)
        if key not in self._CACHE:
            self._CACHE[key] = self._on_disk(run_id)
        return list(self._CACHE[key])

    async def _write(self, run_id: str, line: bytes) -> None:
        await super()._write(run_id, line)
        self._CACHE[(str(self.directory), run_id)] = self._on_disk(run_id)


class ProcessWideFence(LineFileStore):
    """Fences appends with a class-level ``{run: next sequence}`` (an in-process counter, taken
    for a lock): reads come from disk, but a second process's appends do not move the counter,
    so this process accepts an append at a sequence another process already used."""

    _NEXT: ClassVar[dict[tuple[str, str], int]] = {}

    def _next(self, run_id: str) -> int:
        key = (str(self.directory), run_id)
        if key not in self._NEXT:
            self._NEXT[key] = len(self._on_disk(run_id))
        return self._NEXT[key]

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await self.append_many(run_id, (record,), sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        log = self._on_disk(run_id)[: self._next(run_id)]
        refusal = _batch_refusal(run_id, log, records, sequence)
        if refusal is not None:
            raise refusal
        await LineFileStore.append_many(self, run_id, records, sequence=len(self._on_disk(run_id)))
        self._NEXT[(str(self.directory), run_id)] = sequence + len(records)


# Time: the same calls under another wall clock, date and time zone.


class LeaseExpiringStart(LineFileStore):
    """Treats a run whose last append is more than an hour old (by the wall clock) as abandoned:
    a new start takes it over and replaces its log ("stale run takeover")."""

    def _lease(self, run_id: str) -> Path:
        return self.directory / f"{run_id}.lease"

    async def _write(self, run_id: str, line: bytes) -> None:
        await super()._write(run_id, line)
        self._lease(run_id).write_text(repr(time.time()), encoding="utf-8")

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        lease = self._lease(run_id)
        abandoned = lease.exists() and time.time() - float(lease.read_text("utf-8")) > 3600
        if isinstance(record, RunStarted) and sequence == 0 and abandoned:
            self._path(run_id).unlink()  # abandoned: start over
        await super().append(run_id, record, sequence=sequence)


class LocalTimeOrdered(LineFileStore):
    """Stamps each line with the local wall-clock time and reads a log back sorted by the stamp
    (``ORDER BY created_at``): right while the clock only moves forward in one time zone."""

    async def _write(self, run_id: str, line: bytes) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time())).encode()
        parts = []
        for part in line.splitlines(keepends=True):  # a batch's "+" mark stays first
            mark = part[:1] if part.startswith(b"+") else b""
            parts.append(mark + stamp + b"\t" + part[len(mark) :])
        stamped = b"".join(parts)
        await super()._write(run_id, stamped)

    def _on_disk(self, run_id: str) -> list[Record]:
        text = self._committed(run_id).decode("utf-8")
        lines = [line.removeprefix("+") for line in text.split("\n") if line]
        stamped = [line.split("\t", 1) for line in lines]
        return [record_from_json(body) for _, body in sorted(stamped, key=lambda pair: pair[0])]


# Size: logs and records past the page, buffer and cap sizes of real code.


class PagedReadsDropLastPage(MemoryStore):
    """Reads a log in pages of 100 records, counting the pages with a floor division: a last
    page shorter than 100 is dropped once there is a full page before it."""

    async def read_log(self, run_id: str) -> RunLog:
        records = (await super().read_log(run_id)).records
        pages = max(len(records) // 100, 1)
        return RunLog(tuple(r for p in range(pages) for r in records[p * 100 : (p + 1) * 100]))


class LinesIn64KiB(LineFileStore):
    """Reads its file with ``readline(65536)`` (a fixed line buffer, as a stream reader's limit):
    a record whose line is longer than 64 KiB comes back in pieces."""

    def _committed(self, run_id: str) -> bytes:
        path = self._path(run_id)
        if not path.exists():
            return b""
        chunks = []
        with path.open("rb") as handle:
            while chunk := handle.readline(65536):
                chunks.append(chunk if chunk.endswith(b"\n") else chunk + b"\n")
        data = b"".join(chunks)
        end = start = 0
        while (newline := data.find(b"\n", start)) != -1:
            if data[start : start + 1] != b"+":
                end = newline + 1
            start = newline + 1
        return data[:end]


__all__ = [
    "IntKeyedRunIds",
    "LeaseExpiringStart",
    "LinesIn64KiB",
    "LocalTimeOrdered",
    "PagedReadsDropLastPage",
    "ProcessWideFence",
    "ProcessWideLogCache",
    "SqliteStringColumn",
]

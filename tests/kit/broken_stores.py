"""Stores for the matrices of the promises that need a factory (crash, store objects) and of
the store suite's deeper probes: correct twins, and stores that lose, tear or misplace records.

Those with a directory are named by ``StoreSamples(factory="tests.kit.broken_stores:<class>")``,
so the crash probe's writer process imports this module: it imports only the standard library
and polyloop's core (``tests.kit.broken`` imports pytest and Hypothesis, which would make the
writer start slowly). Each such class is called with a directory and keeps its data there. The
``MemoryStore`` subclasses at the end need none (``test_matrix_store_depth.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from polyloop import (
    ModelCallIntent,
    Record,
    RunAlreadyExists,
    RunAlreadyFinished,
    RunConflict,
    RunFinished,
    RunLog,
    RunStarted,
    record_from_json,
    validate_run_id,
)
from polyloop.stores import MemoryStore


def _refusal(run_id: str, log: list[Record], record: Record, sequence: int) -> Exception | None:
    if isinstance(record, RunStarted) and log:
        return RunAlreadyExists(run_id)
    if log and isinstance(log[-1], RunFinished):
        return RunAlreadyFinished(run_id)
    if sequence != len(log):
        return RunConflict(f"{run_id}: sequence {sequence}, log has {len(log)} records")
    return None


def _batch_refusal(
    run_id: str, log: list[Record], records: Sequence[Record], sequence: int
) -> Exception | None:
    """The append rules for each record of a batch in order, as if appended one by one."""
    shadow = list(log)
    for at, record in enumerate(records, start=sequence):
        refusal = _refusal(run_id, shadow, record, at)
        if refusal is not None:
            return refusal
        shadow.append(record)
    return None


class LineFileStore:
    """Correct: one file per run, one line per record. A record is committed by its newline: a
    write can be cut short by a kill (even a single ``os.write``, one page at a time), so a
    last line without one is an append that never returned — ignored, and truncated away by
    the next append. A batch is written in one write, every line but its last marked ``+``: it
    counts only once its last line is complete."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def _path(self, run_id: str) -> Path:
        validate_run_id(run_id)
        return self.directory / f"{run_id}.jsonl"

    def _committed(self, run_id: str) -> bytes:
        path = self._path(run_id)
        data = path.read_bytes() if path.exists() else b""
        end = start = 0
        while (newline := data.find(b"\n", start)) != -1:
            if data[start : start + 1] != b"+":
                end = newline + 1
            start = newline + 1
        return data[:end]

    def _on_disk(self, run_id: str) -> list[Record]:
        text = self._committed(run_id).decode("utf-8")
        return [record_from_json(line.removeprefix("+")) for line in text.split("\n") if line]

    def _read(self, run_id: str) -> list[Record]:
        return self._on_disk(run_id)

    async def _write(self, run_id: str, line: bytes) -> None:
        committed = len(self._committed(run_id))
        descriptor = os.open(self._path(run_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.ftruncate(descriptor, committed)
            os.write(descriptor, line)
        finally:
            os.close(descriptor)

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        refusal = _refusal(run_id, self._read(run_id), record, sequence)
        if refusal is not None:
            raise refusal
        await self._write(run_id, (record.to_json() + "\n").encode("utf-8"))

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        refusal = _batch_refusal(run_id, self._read(run_id), records, sequence)
        if refusal is not None:
            raise refusal
        last = len(records) - 1
        lines = [("" if n == last else "+") + r.to_json() + "\n" for n, r in enumerate(records)]
        await self._write(run_id, "".join(lines).encode("utf-8"))

    async def read_log(self, run_id: str) -> RunLog:
        return RunLog(tuple(self._read(run_id)))

    async def run_ids(self) -> list[str]:
        return sorted(path.stem for path in self.directory.glob("*.jsonl"))


class NonAtomicAppend(LineFileStore):
    """The naive line store: reads every line as a record and writes each line in two halves
    with a pause between, so a kill in the pause leaves half a record that the next read
    chokes on (the pause makes the kill land there every time)."""

    def _committed(self, run_id: str) -> bytes:
        path = self._path(run_id)
        return path.read_bytes() if path.exists() else b""

    async def _write(self, run_id: str, line: bytes) -> None:
        half = len(line) // 2
        await super()._write(run_id, line[:half])
        await asyncio.sleep(0.05)
        await super()._write(run_id, line[half:])


class TornManifestOnOpen(NonAtomicAppend):
    """Also rewrites a manifest (``manifest.json``, the runs it holds) in two halves on every
    append, and reads it when opened: a kill between the halves leaves half a JSON document,
    and reopening the store then fails with ``JSONDecodeError``."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(directory)
        manifest = self.directory / "manifest.json"
        self.runs: list[str] = json.loads(manifest.read_text()) if manifest.exists() else []

    async def _write(self, run_id: str, line: bytes) -> None:
        self.runs = sorted({*self.runs, run_id})
        text = json.dumps(self.runs * 50).encode()
        manifest = self.directory / "manifest.json"
        manifest.write_bytes(text[: len(text) // 2])
        await asyncio.sleep(0.05)
        manifest.write_bytes(text)
        await super()._write(run_id, line)


class NotDurable(LineFileStore):
    """Acknowledges before writing: a background timer writes the lines 0.2 s later, reads in
    this process see them at once. A killed process, or a second store object, loses them."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(directory)
        self._pending: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()

    def _read(self, run_id: str) -> list[Record]:
        with self._lock:
            text = b"".join(self._pending.get(run_id, [])).decode()
            pending = [
                record_from_json(line.removeprefix("+")) for line in text.split("\n") if line
            ]
            return self._on_disk(run_id) + pending

    async def _write(self, run_id: str, line: bytes) -> None:
        with self._lock:
            self._pending.setdefault(run_id, []).append(line)
        timer = threading.Timer(0.2, self._flush)
        timer.daemon = True
        timer.start()

    def _flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
            for run_id, lines in pending.items():
                # The late write of a store whose directory is gone (the test is over) is lost.
                with contextlib.suppress(FileNotFoundError), self._path(run_id).open("ab") as file:
                    file.write(b"".join(lines))


class SqliteLogStore:
    """Correct: a SQLite table, one committed transaction per append."""

    def __init__(self, directory: Path | str) -> None:
        self._db = sqlite3.connect(Path(directory) / "log.db", timeout=10)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS log "
            "(run_id TEXT, sequence INTEGER, record TEXT, PRIMARY KEY (run_id, sequence))"
        )
        self._db.commit()

    def _read(self, run_id: str) -> list[Record]:
        rows = self._db.execute(
            "SELECT record FROM log WHERE run_id = ? ORDER BY sequence", (run_id,)
        ).fetchall()
        return [record_from_json(row[0]) for row in rows]

    def _commit(self) -> None:
        self._db.commit()

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        refusal = _refusal(run_id, self._read(run_id), record, sequence)
        if refusal is not None:
            raise refusal
        self._db.execute("INSERT INTO log VALUES (?, ?, ?)", (run_id, sequence, record.to_json()))
        self._commit()

    async def read_log(self, run_id: str) -> RunLog:
        return RunLog(tuple(self._read(run_id)))

    async def run_ids(self) -> list[str]:
        return [row[0] for row in self._db.execute("SELECT DISTINCT run_id FROM log")]

    async def aclose(self) -> None:
        self._db.close()


class ForgetsToCommit(SqliteLogStore):
    """The classic: the inserts stay in an open transaction. This connection reads its own
    writes, so every in-process promise holds; no other connection ever sees them."""

    def _commit(self) -> None:
        pass


# --------------------------------------------------------------------------- issue #21
# Class 10: kills inside a write. Each writes a record's line in 64 KiB pieces, flushing and
# syncing each (so a crash "loses little"): a big record takes many write() calls, and a kill
# among them leaves the start of a line. Records of a few KB (all the old probe wrote) take one.

_PIECE = 64 * 1024


class ChunkedLineFileStore(LineFileStore):
    """Correct twin of the two below: writes in pieces, commits a record by its newline."""

    async def _write(self, run_id: str, line: bytes) -> None:
        committed = len(self._committed(run_id))
        descriptor = os.open(self._path(run_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.ftruncate(descriptor, committed)
            for start in range(0, len(line), _PIECE):
                os.write(descriptor, line[start : start + _PIECE])
                os.fsync(descriptor)
        finally:
            os.close(descriptor)


class ChunkedReadsEveryLine(ChunkedLineFileStore):
    """The how-to's second version: reads every line as a record, a torn last one included —
    after a kill inside a big write the next read raises ``ValueError: malformed record``."""

    def _committed(self, run_id: str) -> bytes:
        path = self._path(run_id)
        return path.read_bytes() if path.exists() else b""


class ChunkedSkipsTornLines(ChunkedLineFileStore):
    """A tolerant reader: skips a line it cannot decode and appends after it without repairing
    the file — the next record is glued to the torn piece, unreadable, and silently lost."""

    def _committed(self, run_id: str) -> bytes:
        path = self._path(run_id)
        return path.read_bytes() if path.exists() else b""

    def _on_disk(self, run_id: str) -> list[Record]:
        records: list[Record] = []
        for line in self._committed(run_id).decode("utf-8", "replace").split("\n"):
            with contextlib.suppress(ValueError):
                if line:
                    records.append(record_from_json(line.removeprefix("+")))
        return records


# Class 9: a batch under a crash.


class BatchOneRecordAtATime(LineFileStore):
    """Checks the whole batch against the rules first (so every in-process batch promise
    holds), then writes its records one by one, each committed on its own: a kill between them
    leaves the first records of a batch the loop committed as one."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        refusal = _batch_refusal(run_id, self._read(run_id), records, sequence)
        if refusal is not None:
            raise refusal
        for record in records:
            await self._write(run_id, (record.to_json() + "\n").encode("utf-8"))


# Class 8: state kept in the store object.


class CachesRunState(LineFileStore):
    """Keeps each run's length and started/finished flags in the object, loaded on the first
    touch and updated by its own appends — so the fences need no read. Right while this object
    is the only writer; a second object on the same files is invisible to it."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(directory)
        self._state: dict[str, list[Record]] = {}

    def _known(self, run_id: str) -> list[Record]:
        if run_id not in self._state:
            self._state[run_id] = self._on_disk(run_id)
        return self._state[run_id]

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        refusal = _refusal(run_id, self._known(run_id), record, sequence)
        if refusal is not None:
            raise refusal
        await self._write(run_id, (record.to_json() + "\n").encode("utf-8"))
        self._known(run_id).append(record)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        refusal = _batch_refusal(run_id, self._known(run_id), records, sequence)
        if refusal is not None:
            raise refusal
        last = len(records) - 1
        lines = [("" if n == last else "+") + r.to_json() + "\n" for n, r in enumerate(records)]
        await self._write(run_id, "".join(lines).encode("utf-8"))
        self._known(run_id).extend(records)

    async def read_log(self, run_id: str) -> RunLog:
        self._known(run_id)
        return RunLog(tuple(self._on_disk(run_id)))


class BatchFencedFromCache(LineFileStore):
    """Fences single appends on what is on disk, and batches on the run's length kept in the
    object (loaded on the object's first batch, moved on by its own writes): the batch path was
    written apart, for speed, and only ever tested with one store object."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(directory)
        self._seen: dict[str, list[Record]] = {}

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await super().append(run_id, record, sequence=sequence)
        if run_id in self._seen:
            self._seen[run_id].append(record)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        seen = self._seen.setdefault(run_id, self._on_disk(run_id))
        refusal = _batch_refusal(run_id, seen, records, sequence)
        if refusal is not None:
            raise refusal
        last = len(records) - 1
        lines = [("" if n == last else "+") + r.to_json() + "\n" for n, r in enumerate(records)]
        await self._write(run_id, "".join(lines).encode("utf-8"))
        seen.extend(records)


class CachesRunListing(LineFileStore):
    """Lists runs from a set loaded when the object was opened plus the runs it started
    itself: a run another object (another process) started is never listed by this one."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(directory)
        self._listed = {path.stem for path in self.directory.glob("*.jsonl")}

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await super().append(run_id, record, sequence=sequence)
        self._listed.add(run_id)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await super().append_many(run_id, records, sequence=sequence)
        self._listed.add(run_id)

    async def run_ids(self) -> list[str]:
        return sorted(self._listed)


# Issue 31: a power loss. Each of these keeps every other promise of the suite (the crash
# probe kills processes, and the kernel keeps what a killed process wrote); only storage that
# loses what was not synced catches them. Twins: SyncedLineFileStore, RenamedIntoPlace and
# WalFullSqliteStore.


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class SyncedLineFileStore(LineFileStore):
    """Correct: fsyncs the run's file before an append returns, and the directory after
    creating the file (a new name is durable only once its directory is synced)."""

    async def _write(self, run_id: str, line: bytes) -> None:
        path = self._path(run_id)
        created = not path.exists()
        committed = len(self._committed(run_id))
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.ftruncate(descriptor, committed)
            self._put(descriptor, line)
            self._sync_file(descriptor)
        finally:
            os.close(descriptor)
        if created:
            self._sync_directory()

    def _put(self, descriptor: int, data: bytes) -> None:
        while data:
            data = data[os.write(descriptor, data) :]

    def _sync_file(self, descriptor: int) -> None:
        os.fsync(descriptor)

    def _sync_directory(self) -> None:
        _sync_directory(self.directory)


class SlowSyncedLineFileStore(SyncedLineFileStore):
    """Correct, and slow: a quarter of a second per append (the power-loss probe's writer runs
    long enough to be interrupted)."""

    async def _write(self, run_id: str, line: bytes) -> None:
        await asyncio.sleep(0.25)
        await super()._write(run_id, line)


class FencesOnCommitCount(SyncedLineFileStore):
    """Fences on the number of commits in the run's file, not of records (a batch's lines but
    its last are marked ``+``; this counts the unmarked ones). Right with single appends; after
    a batch of three it counts one, and refuses its own next append at the right sequence with
    ``RunConflict`` (issue 37: the power-loss probe's writer meets it in its second round)."""

    def _fence(self, run_id: str, sequence: int) -> None:
        lines = self._committed(run_id).split(b"\n")
        commits = sum(1 for line in lines if line and not line.startswith(b"+"))
        if commits and sequence != commits:
            raise RunConflict(f"{run_id}: sequence {sequence}, the log has {commits} commits")

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        if not isinstance(record, RunStarted):
            self._fence(run_id, sequence)
        await super().append(run_id, record, sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        self._fence(run_id, sequence)
        await super().append_many(run_id, records, sequence=sequence)


class KeptElsewhere(SyncedLineFileStore):
    """Correct, but keeps its data in the directory ``POLYLOOP_TEST_ELSEWHERE`` names, whatever
    directory it is given — as a database server's store does."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(os.environ["POLYLOOP_TEST_ELSEWHERE"])


class NeverFsyncs(SyncedLineFileStore):
    """Writes and returns: the page cache holds the record, and a power loss takes it."""

    def _sync_file(self, descriptor: int) -> None:
        pass

    def _sync_directory(self) -> None:
        pass


class SyncsFileNotDirectory(SyncedLineFileStore):
    """Fsyncs every write, never the directory: a new run's file name is not durable, and a
    power loss takes the whole run with it."""

    def _sync_directory(self) -> None:
        pass


class SyncsBeforeLastWrite(SyncedLineFileStore):
    """Writes a batch line by line and syncs before the last line, not after it: the line that
    completes the batch (and a single append's only line) is still in the page cache."""

    def _put(self, descriptor: int, data: bytes) -> None:
        lines = data.splitlines(keepends=True)
        for line in lines[:-1]:
            super()._put(descriptor, line)
        os.fsync(descriptor)
        super()._put(descriptor, lines[-1])

    def _sync_file(self, descriptor: int) -> None:
        pass


class RenamedIntoPlace(LineFileStore):
    """Correct: rewrites a run's whole file on every append — a temporary file, fsynced, renamed
    over the old one, then the directory fsynced (the rename is durable only then)."""

    async def _write(self, run_id: str, line: bytes) -> None:
        path = self._path(run_id)
        temporary = path.with_name(f".{path.name}.tmp")
        data = self._committed(run_id) + line
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while data:
                data = data[os.write(descriptor, data) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.rename(temporary, path)
        self._sync_directory()

    def _sync_directory(self) -> None:
        _sync_directory(self.directory)

    async def run_ids(self) -> list[str]:
        return sorted(p.stem for p in self.directory.glob("*.jsonl") if not p.name.startswith("."))


class RenameWithoutDirectorySync(RenamedIntoPlace):
    """Renames the synced temporary file into place and returns: the rename is not durable, so
    after a power loss the run's file is the old one (or none)."""

    def _sync_directory(self) -> None:
        pass


class WalFullSqliteStore(SqliteLogStore):
    """Correct: SQLite in WAL mode with ``synchronous=FULL`` (the WAL is synced at every commit,
    and its directory when SQLite creates it)."""

    SYNCHRONOUS = "FULL"

    def __init__(self, directory: Path | str) -> None:
        path = Path(directory) / "wal.db"
        created = not path.exists()
        self._db = sqlite3.connect(path, timeout=10)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={self.SYNCHRONOUS}")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS log "
            "(run_id TEXT, sequence INTEGER, record TEXT, PRIMARY KEY (run_id, sequence))"
        )
        self._db.commit()
        if created:
            _sync_directory(Path(directory))


class WalNormalSqliteStore(WalFullSqliteStore):
    """``synchronous=NORMAL`` in WAL mode: a commit is not synced (only a checkpoint is) —
    safe against a process crash, not against a power loss."""

    SYNCHRONOUS = "NORMAL"


class WalOffSqliteStore(WalFullSqliteStore):
    """``synchronous=OFF``: SQLite never syncs; the operating system decides when data lands."""

    SYNCHRONOUS = "OFF"


# Class 4: run ids the old suite never used (it wrote only 32 lower-case hex digits).


class NoCaseSqliteLogStore(SqliteLogStore):
    """``run_id TEXT COLLATE NOCASE``: runs whose ids differ only in case share one log."""

    def __init__(self, directory: Path | str) -> None:
        self._db = sqlite3.connect(Path(directory) / "nocase.db", timeout=10)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS log (run_id TEXT COLLATE NOCASE, sequence INTEGER, "
            "record TEXT, PRIMARY KEY (run_id, sequence))"
        )
        self._db.commit()


class FilesKeyedByPrefix(LineFileStore):
    """Names each run's file by the first 64 characters of its id (a file-name limit someone
    assumed): runs whose ids share those characters share one file."""

    def _path(self, run_id: str) -> Path:
        validate_run_id(run_id)
        return self.directory / f"{run_id[:64]}.jsonl"


class LowerCasesRunIds(MemoryStore):
    """Keys every log by the lower-cased run id (a case-insensitive lookup), and lists the keys."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await super().append(run_id.lower(), record, sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await super().append_many(run_id.lower(), records, sequence=sequence)

    async def read_log(self, run_id: str) -> RunLog:
        return await super().read_log(run_id.lower())


class TruncatesRunIdsTo64(MemoryStore):
    """Keeps the first 64 characters of a run id (a ``VARCHAR(64)`` column that truncates)."""

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await super().append(run_id[:64], record, sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await super().append_many(run_id[:64], records, sequence=sequence)

    async def read_log(self, run_id: str) -> RunLog:
        return await super().read_log(run_id[:64])


# Class 9: batches in any order the rules accept.


_STEP_ORDER = (
    "run_started",
    "model_call_intent",
    "model_replied",
    "action_intent",
    "step_completed",
    "run_finished",
)


class BatchGroupedByKind(MemoryStore):
    """Writes a batch's records grouped by kind (one bulk insert per kind's table), the tables
    in the order of a step: the loop's usual batches, already in that order, read back right."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await super().append_many(run_id, records, sequence=sequence)
        log = self._logs[run_id]
        rows = log[sequence:]
        grouped = sorted(rows, key=lambda row: _STEP_ORDER.index(row[1]))
        log[sequence:] = [(sequence + n, kind, body) for n, (_, kind, body) in enumerate(grouped)]


class BatchDeduplicated(MemoryStore):
    """Drops a record of a batch equal to an earlier one (a content-hash key, ``INSERT OR
    IGNORE``): the fence counts the batch as sent, the log holds fewer records."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await super().append_many(run_id, records, sequence=sequence)
        log = self._logs[run_id]
        seen: set[str] = set()
        kept: list[tuple[int, str, str]] = []
        for row in log[sequence:]:
            if row[2] not in seen:
                seen.add(row[2])
                kept.append(row)
        log[sequence:] = [(sequence + n, kind, body) for n, (_, kind, body) in enumerate(kept)]


# Issue 22: the run index (run_store.index_agrees_with_log), each beside MemoryStore.


class IndexForgetsStopReason(MemoryStore):
    """Indexes a finish's time and counts but not its stop reason (a column the UPDATE misses):
    every finished run stays ``running`` in ``polyloop stats``."""

    def _index_batch(self, run_id: str, batch: Sequence[Record]) -> None:
        super()._index_batch(run_id, batch)
        self._index[run_id] = dataclasses.replace(self._index[run_id], stop_reason=None)


class IndexCountsIntentsAsSteps(MemoryStore):
    """Counts a step at each model-call intent instead of at ``StepCompleted`` (the same on a
    log without retries, until a step's records arrive in separate commits)."""

    def _index_batch(self, run_id: str, batch: Sequence[Record]) -> None:
        before = self._index.get(run_id)
        super()._index_batch(run_id, batch)
        steps = (0 if before is None else before.steps) + sum(
            isinstance(record, ModelCallIntent) for record in batch
        )
        self._index[run_id] = dataclasses.replace(self._index[run_id], steps=steps)


class IndexedBeforeTheFence(MemoryStore):
    """Updates the index in its own step before the batch is fenced and written (outside the
    records' transaction): a batch the append rules refuse still changes the row."""

    def _index_batch(self, run_id: str, batch: Sequence[Record]) -> None:
        """The commit no longer indexes: ``append_many`` did, first."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        MemoryStore._index_batch(self, run_id, tuple(records))
        MemoryStore.commit_now(self, run_id, records, sequence=sequence)  # fenced, written

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        return False  # the loop then awaits append_many, which indexes first


# --------------------------------------------------------------------------- issue #30
# Stores that let one process at a time open their data (DuckDB, an embedded database with a
# lock on its file): a store is not required to serve several processes at once, so the crash
# probe must neither blame them for it nor call them conformant when it could not run.


class OneProcessAtATime(LineFileStore):
    """Correct, and one process at a time: holds an exclusive POSIX lock (``lockf``) on its
    directory's lock file while open, as DuckDB does on its database file. Objects in the
    same process share the lock (POSIX locks belong to the process); another process that
    opens the store while one has it open gets ``OSError``."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(directory)
        self._lock_file: int | None = os.open(self.directory / "store.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.lockf(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(self._lock_file)
            raise OSError(f"the store in {self.directory} is open in another process") from error

    async def aclose(self) -> None:
        if self._lock_file is not None:
            os.close(self._lock_file)  # releases the lock (a killed process's goes with it)
            self._lock_file = None


class OwnedByOneProcess(LineFileStore):
    """Correct, and never opened by a second process: the first process that opens the data
    owns it for good (a store served by a server inside the application's process). The crash
    probe cannot run a writer on it: the two crash promises are unverifiable, with the reason."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(directory)
        owner = self.directory / "owner"
        if not owner.exists():
            owner.write_text(str(os.getpid()))
        if owner.read_text() != str(os.getpid()):
            raise OSError(f"the store in {self.directory} belongs to process {owner.read_text()}")


# --------------------------------------------------------------------------- issue #37
# Exact comparisons (§2): an index that hands back 42.0 for the 42 in its log "agreed" with it
# under ``==``. Twin: the same index kept as JSON text, which keeps ints and floats apart.


class IndexUsageInRealColumn(MemoryStore):
    """Keeps the run index's usage in a REAL column (SQLite's ``REAL``, DuckDB's ``DOUBLE``):
    every token count comes back a float, ``406.0`` for the log's ``406``."""

    def _index_batch(self, run_id: str, batch: Sequence[Record]) -> None:
        super()._index_batch(run_id, batch)
        row = self._index[run_id]
        usage = {key: float(value) for key, value in row.usage.items()}
        self._index[run_id] = dataclasses.replace(row, usage=usage)


class IndexUsageAsJsonText(MemoryStore):
    """Correct: keeps the run index's usage as JSON text, which reads ints back as ints."""

    def _index_batch(self, run_id: str, batch: Sequence[Record]) -> None:
        super()._index_batch(run_id, batch)
        row = self._index[run_id]
        usage = json.loads(json.dumps(row.usage))
        self._index[run_id] = dataclasses.replace(row, usage=usage)

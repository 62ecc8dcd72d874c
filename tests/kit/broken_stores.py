"""Stores for the crash promises' matrix: one correct, three that lose or tear records.

They are named by ``StoreSamples(factory="tests.kit.broken_stores:<class>")``, so the crash
probe's writer processes import this module once per round: it imports only the standard
library and polyloop's core (``tests.kit.broken`` imports pytest and Hypothesis, which would
make every writer start slowly). Each class is called with a directory and keeps its data there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from pathlib import Path

from polyloop import (
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


def _refusal(run_id: str, log: list[Record], record: Record, sequence: int) -> Exception | None:
    if isinstance(record, RunStarted) and log:
        return RunAlreadyExists(run_id)
    if log and isinstance(log[-1], RunFinished):
        return RunAlreadyFinished(run_id)
    if sequence != len(log):
        return RunConflict(f"{run_id}: sequence {sequence}, log has {len(log)} records")
    return None


class LineFileStore:
    """Correct: one file per run, one line per record. A record is committed by its newline: a
    write can be cut short by a kill (even a single ``os.write``, one page at a time), so a
    last line without one is an append that never returned — ignored, and truncated away by
    the next append."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def _path(self, run_id: str) -> Path:
        validate_run_id(run_id)
        return self.directory / f"{run_id}.jsonl"

    def _committed(self, run_id: str) -> bytes:
        path = self._path(run_id)
        data = path.read_bytes() if path.exists() else b""
        return data[: data.rfind(b"\n") + 1]

    def _on_disk(self, run_id: str) -> list[Record]:
        text = self._committed(run_id).decode("utf-8")
        return [record_from_json(line) for line in text.split("\n") if line]

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


class NotDurable(LineFileStore):
    """Acknowledges before writing: a background timer writes the lines 0.2 s later, reads in
    this process see them at once. A killed process, or a second store object, loses them."""

    def __init__(self, directory: Path | str) -> None:
        super().__init__(directory)
        self._pending: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()

    def _read(self, run_id: str) -> list[Record]:
        with self._lock:
            pending = [record_from_json(line.decode()) for line in self._pending.get(run_id, [])]
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

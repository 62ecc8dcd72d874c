"""MemoryStore: the reference store, and the default when ``run()`` gets ``store=None``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from polyloop._base._closing import AsyncClosing
from polyloop._base._run_id import validate_run_id
from polyloop._base._run_index import (
    RunQuery,
    RunStats,
    RunSummary,
    advance,
    index_delta,
    newest_last,
    stats_of,
)
from polyloop.stores._rules import check_append_many, check_batch, check_record, decode_log
from polyloop.types import Record, RunFinished, RunLog


class MemoryStore(AsyncClosing):
    """An in-process store that keeps each record as its canonical JSON text.

    Every record goes through the same encoding and decoding as in the durable stores, so a
    record that cannot be written or read back fails here exactly as it would on disk: no test
    passes on memory and fails on SQLite. Nothing loop-bound is created, so one store can be
    used from successive event loops.
    """

    def __init__(self) -> None:
        self._logs: dict[str, list[tuple[int, str, str]]] = {}  # (sequence, kind, body) rows
        self._index: dict[str, RunSummary] = {}  # the run index (polyloop.ports.IndexedRunStore)

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        check_record(run_id, record, sequence)
        await self.append_many(run_id, (record,), sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        self.commit_now(run_id, records, sequence=sequence)

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        """``append_many``'s whole work, which never waits; always done (``True``). The loop
        calls it directly, with no task (``polyloop.ports.InlineCommitRunStore``)."""
        batch = check_batch(run_id, records, sequence)
        # Encoded first, as the durable stores do: a record that cannot be encoded writes nothing.
        rows = [(sequence + n, record.kind, record.to_json()) for n, record in enumerate(batch)]
        # No await between the check and the write: the event loop cannot interleave another
        # append here, so the check-then-write is atomic without a lock.
        log = self._logs.get(run_id, [])
        finished = bool(log) and log[-1][1] == RunFinished.kind
        check_append_many(run_id, batch, sequence=sequence, length=len(log), finished=finished)
        log.extend(rows)
        self._logs[run_id] = log
        self._index_batch(run_id, batch)
        return True

    def _index_batch(self, run_id: str, batch: Sequence[Record]) -> None:
        """Bring the run's index row up to date with a batch just written (same step, no await)."""
        self._index[run_id] = advance(self._index.get(run_id), run_id, index_delta(batch))

    async def query_runs(self, query: RunQuery) -> list[RunSummary]:
        """The index rows ``query`` selects (``polyloop.ports.IndexedRunStore``)."""
        await asyncio.sleep(0)
        # Copies: a caller that edits a row's labels or usage must not edit the index.
        return [
            replace(row, labels=dict(row.labels), usage=dict(row.usage))
            for row in newest_last(self._index.values(), query)
        ]

    async def run_stats(self, query: RunQuery) -> RunStats:
        """The statistics of the rows ``query`` selects (``polyloop.ports.IndexedRunStore``)."""
        await asyncio.sleep(0)
        return stats_of(newest_last(self._index.values(), replace(query, limit=None)))

    async def read_log(self, run_id: str) -> RunLog:
        validate_run_id(run_id)
        await asyncio.sleep(0)  # a real suspension point, like every other store
        return decode_log(run_id, self._logs.get(run_id, ()), where=repr(self))

    async def run_ids(self) -> list[str]:
        return sorted(self._logs)

    async def aclose(self) -> None:
        """Nothing to release; present so every store is used the same way."""

    def __repr__(self) -> str:
        return f"MemoryStore(runs={len(self._logs)})"

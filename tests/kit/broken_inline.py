"""Stores that offer the inline commit (``InlineCommitRunStore.commit_now``), right and wrong.

Issue #24: the loop commits through ``commit_now`` in the run's own task whenever a store
offers it, so the run-store suite checks it (``inline_commit_*``). Each store here keeps its
records in a :class:`MemoryStore` and awaits its ``append_many`` correctly; only ``commit_now``
differs. ``DeclinesEveryOtherCommit`` is the correct twin: it declines every other batch, with
no side effect, and commits the rest whole.

Imported by the pytester sandboxes through ``tests.kit.broken`` (re-exported there).
"""

from __future__ import annotations

from collections.abc import Sequence

from polyloop.stores import MemoryStore
from polyloop.types import Record, RunFinished, RunLog, RunStarted

__all__ = [
    "CommitsNowButWritesLater",
    "DeclinesAfterWriting",
    "DeclinesEveryOtherCommit",
    "InlineCommitBackwards",
    "InlineCommitUnfenced",
    "InlineCommitUntilTheBadRecord",
]


class _InlineStore:
    """A store of someone else's: ``append_many`` awaited correctly, ``commit_now`` its own."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.calls = 0

    async def append(self, run_id: str, record: Record, *, sequence: int) -> None:
        await self.inner.append(run_id, record, sequence=sequence)

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        self.flush()
        await self.inner.append_many(run_id, records, sequence=sequence)

    async def read_log(self, run_id: str) -> RunLog:
        return await self.inner.read_log(run_id)

    async def run_ids(self) -> list[str]:
        return await self.inner.run_ids()

    def flush(self) -> None:
        """Nothing is ever held back here (see ``CommitsNowButWritesLater``)."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        self.calls += 1
        return self.inner.commit_now(run_id, records, sequence=sequence)


class DeclinesEveryOtherCommit(_InlineStore):
    """Correct: declines every other call (as a store whose lock is busy does), doing nothing."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        self.calls += 1
        if self.calls % 2:
            return False
        return self.inner.commit_now(run_id, records, sequence=sequence)


class DeclinesAfterWriting(_InlineStore):
    """Tries a fast write, finds it "too slow" afterwards and declines — the batch is written."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        self.calls += 1
        self.inner.commit_now(run_id, records, sequence=sequence)
        return self.calls % 2 == 0  # "that took long: let the awaited path do it"


class InlineCommitUntilTheBadRecord(_InlineStore):
    """Commits record by record, so a batch breaking a rule halfway leaves its first half."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        for offset, record in enumerate(records):
            self.inner.commit_now(run_id, (record,), sequence=sequence + offset)
        return True


class InlineCommitUnfenced(_InlineStore):
    """Appends at the log's end whatever ``sequence`` the caller gave (no fence)."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        length = len(self.inner._logs.get(run_id, ()))
        return self.inner.commit_now(run_id, records, sequence=length)


class CommitsNowButWritesLater(_InlineStore):
    """Returns ``True`` at once and writes the batch at its next commit (a write-behind
    buffer): the batch is not in the log when ``commit_now`` returns."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[tuple[str, Sequence[Record], int]] = []

    def flush(self) -> None:
        held, self.held = self.held, []
        for run_id, records, sequence in held:
            self.inner.commit_now(run_id, records, sequence=sequence)

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        self.flush()
        self.held.append((run_id, records, sequence))
        return True


class InlineCommitBackwards(_InlineStore):
    """Writes the records of a batch newest first when the append rules let it (no start, no
    finish in the batch) — ``append_many`` keeps their order."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        fenced = any(isinstance(r, RunStarted | RunFinished) for r in records)
        batch = tuple(records) if fenced else tuple(reversed(records))
        return self.inner.commit_now(run_id, batch, sequence=sequence)

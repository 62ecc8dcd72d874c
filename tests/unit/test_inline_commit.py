"""The inline commit is a protocol of the run-store port, not an exact type (#24 §1).

``InlineCommitRunStore.commit_now`` commits a batch without awaiting, or declines with no side
effect; the loop finds it once per run through the port. Before, only exactly ``SQLiteStore`` and
``MemoryStore`` had it: a subclass silently lost it (a task per commit), and a third-party store
never could have it. The rule that keeps a subclass's own ``append_many`` from being bypassed:
``commit_now`` is used only when the class that defines it is the class that defines
``append_many`` or a subclass of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

import polyloop
from polyloop import Record
from polyloop.ports import BatchRunStore, InlineCommitRunStore
from polyloop.stores import MemoryStore, SQLiteStore
from polyloop.stores import _sqlite as sqlite_module
from tests.unit._doubles import GOAL, StoreWrapper, agent
from tests.unit.test_commit_now import INSTANT, tasks_made_by_a_run

pytestmark = pytest.mark.asyncio


class TracedSQLiteStore(SQLiteStore):
    """A subclass that changes nothing about committing (it only names itself)."""

    def __repr__(self) -> str:
        return f"TracedSQLiteStore({str(self.path)!r})"


async def test_an_sqlite_subclass_keeps_the_inline_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loaded machine's fsync may pass the slow-commit mark, which rightly sends the next
    # commits to the worker; that policy is not what this test is about.
    monkeypatch.setattr(sqlite_module, "_SLOW_INLINE_COMMIT_S", 3600.0)
    async with TracedSQLiteStore(tmp_path / "runs.db") as store:
        assert await tasks_made_by_a_run(store, steps=5) == 0  # on main: one task per commit


class ThirdPartyStore(StoreWrapper):
    """A store of someone else's that offers the inline commit by implementing the protocol."""

    def __init__(self, *, accept: bool = True) -> None:
        super().__init__()
        self.accept = accept
        self.inline: list[int] = []
        self.awaited: list[int] = []

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        self.awaited.append(sequence)
        await self.inner.append_many(run_id, records, sequence=sequence)

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        if not self.accept:
            return False
        self.inline.append(sequence)
        return self.inner.commit_now(run_id, records, sequence=sequence)


async def test_a_third_party_store_gets_the_inline_commit_by_implementing_it() -> None:
    store = ThirdPartyStore()
    assert isinstance(store, InlineCommitRunStore)

    assert await tasks_made_by_a_run(store, steps=2) == 0
    assert store.inline == [0, 2, 4, 6, 8]
    assert store.awaited == []


async def test_a_declined_inline_commit_is_awaited_instead() -> None:
    store = ThirdPartyStore(accept=False)

    assert await tasks_made_by_a_run(store, steps=2) == 5  # one task per commit
    assert store.awaited == [0, 2, 4, 6, 8]


class OwnBatchCommit(ThirdPartyStore):
    """Overrides the batch commit only: its inherited commit_now would bypass it."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        await asyncio.sleep(0)
        await super().append_many(run_id, records, sequence=sequence)


class OwnBothCommits(OwnBatchCommit):
    """Overrides both: its commit_now is its own, so it is used."""

    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        return super().commit_now(run_id, records, sequence=sequence)


class BatchMixin:
    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        raise AssertionError("never reached in this test")


class InlineMixin:
    def commit_now(self, run_id: str, records: Sequence[Record], *, sequence: int) -> bool:
        raise AssertionError("a commit_now that does not know this class's append_many ran")


class UnrelatedMixins(InlineMixin, BatchMixin, StoreWrapper):
    """commit_now from one class, append_many from another it does not derive from."""


async def test_a_subclass_overriding_only_the_batch_commit_loses_the_stale_fast_path() -> None:
    store = OwnBatchCommit()

    await polyloop.run(agent(max_steps=2), GOAL, store=store, run_id="r", **INSTANT)

    assert store.inline == []
    assert store.awaited == [0, 2, 4, 6, 8]


async def test_a_subclass_overriding_both_commits_keeps_the_fast_path() -> None:
    store = OwnBothCommits()

    assert await tasks_made_by_a_run(store, steps=2) == 0
    assert store.inline == [0, 2, 4, 6, 8]


async def test_the_fast_path_rule() -> None:
    from polyloop._loop._commit import inline_commit

    memory, wrapper = MemoryStore(), StoreWrapper()
    assert inline_commit(memory) is not None
    assert inline_commit(wrapper) is None  # no commit_now at all
    assert inline_commit(OwnBatchCommit()) is None
    assert inline_commit(OwnBothCommits()) is not None
    assert inline_commit(UnrelatedMixins()) is None
    patched = ThirdPartyStore()
    patched.append_many = patched.append_many  # type: ignore[method-assign]
    assert inline_commit(patched) is None  # an instance's own append_many: not bypassed
    patched.commit_now = patched.commit_now  # type: ignore[method-assign]
    assert inline_commit(patched) is not None


async def test_the_bundled_stores_offer_it() -> None:
    assert isinstance(MemoryStore(), InlineCommitRunStore)
    assert isinstance(MemoryStore(), BatchRunStore)
    assert issubclass(SQLiteStore, InlineCommitRunStore)

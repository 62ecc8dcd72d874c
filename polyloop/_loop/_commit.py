"""How the loop commits records: the strategies and the cancellation protocol of a commit.

One reason to change: how a batch of records becomes durable. Three strategies, picked once per
run from the store's port (never its concrete type):

* inline — the store offers :class:`~polyloop.ports.InlineCommitRunStore` and accepts the batch
  now: no task, no shield, no event-loop turn (the loop's largest own cost per commit,
  docs/design/0003);
* a task awaiting ``append_many`` — one commit for the batch;
* a task awaiting ``append`` per record — a store without ``append_many``.

A commit is never cut in half by cancellation: the awaited strategies run as a task of their
own, and a cancellation waits for it to land (:func:`wait_out`); the inline one has no await to
cut it at. Any other store's coroutine runs as a task, where ``asyncio.timeout``, ``TaskGroup``
and anyio cancel scopes bind to the task that runs them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from polyloop.ports import BatchRunStore, InlineCommitRunStore, RunStore
from polyloop.types import Record, RunFinished, RunStarted

__all__ = ["Commit", "Committer", "inline_commit", "wait_out"]

InlineCommit = Callable[..., bool]


def _defined_by(store: object, name: str) -> object | None:
    """The object whose namespace gives ``store.name``: the instance itself, or a class."""
    if name in getattr(store, "__dict__", {}):
        return store
    for cls in type(store).__mro__:
        if name in vars(cls):
            return cls
    return None


def inline_commit(store: RunStore) -> InlineCommit | None:
    """The store's ``commit_now`` if the loop may call it instead of awaiting ``append_many``.

    The rule: the class that defines ``commit_now`` is the class that defines ``append_many``
    or a subclass of it (an attribute set on the instance counts as the most derived), so a
    subclass that overrides ``append_many`` alone is never bypassed by an inherited fast path.
    """
    if not isinstance(store, InlineCommitRunStore):
        return None
    inline, batch = _defined_by(store, "commit_now"), _defined_by(store, "append_many")
    if inline is store or (
        batch is not store
        and isinstance(inline, type)
        and isinstance(batch, type)
        and issubclass(inline, batch)
    ):
        return store.commit_now
    return None


async def wait_out(task: asyncio.Future[None]) -> bool:
    """Wait until ``task`` is done even if we are cancelled meanwhile.

    Returns whether a cancellation arrived (or the task itself was cancelled); the caller
    re-raises it once it has looked at the task's result. This is how an append is never cut in
    half: it runs as its own task and a cancellation waits for it instead of interrupting it.
    """
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
        except BaseException:  # the task failed; the caller reads task.exception()
            break
    return cancelled or task.cancelled()


@dataclass(slots=True)
class Commit:
    """What one commit did: ``written`` records from ``sequence`` on (a store without
    ``append_many`` may have written part of the batch), and how it ended."""

    sequence: int
    written: tuple[Record, ...]
    cancelled: bool  # a cancellation arrived while it was awaited: re-raise it
    error: BaseException | None  # the store's, nothing more was written (even if cancelled)
    inline: bool  # committed in the caller's task, with no await


class Committer:
    """The run's position in its log, the records held for the next commit, and the commits."""

    def __init__(self, run_id: str, store: RunStore) -> None:
        self.run_id = run_id
        self.store = store
        self.sequence = 0  # the next record's index in the log
        self.started = False
        self.finished = False
        self.pending: list[Record] = []  # held for the next commit
        # Once per run: a runtime Protocol check walks the class's attributes every time.
        self.batch_store = store if isinstance(store, BatchRunStore) else None
        self.commit_now = inline_commit(store)

    def continue_at(self, sequence: int) -> None:
        """Continue a started run whose log has ``sequence`` records."""
        self.started = True
        self.sequence = sequence

    def defer(self, record: Record) -> None:
        """Hold a record no side effect waits for; it rides in the next commit."""
        self.pending.append(record)

    def take_held(self) -> Record | None:
        """The last held record, the others held still (a flush commits them with it)."""
        if not self.pending:
            return None
        return self.pending.pop()

    async def commit(self, record: Record) -> Commit:
        """Commit the held records and ``record`` as one batch: inline if the store accepts it
        now, else as a task that a cancellation waits out."""
        batch, self.pending = (*self.pending, record), []
        sequence = self.sequence
        error: BaseException | None = None
        try:
            done = self.commit_now is not None and self.commit_now(
                self.run_id, batch, sequence=sequence
            )
        except Exception as exc:  # from the store, nothing written: as a failed task would be
            done, error = True, exc
        cancelled = False
        if done:
            if error is None:
                self._appended(batch)
        else:  # as its own task: further cancellations wait for the commit to land
            task = asyncio.ensure_future(self._write(batch))
            cancelled = await wait_out(task)
            error = None if task.cancelled() else task.exception()
        return Commit(sequence, batch[: self.sequence - sequence], cancelled, error, done)

    async def _write(self, batch: tuple[Record, ...]) -> None:
        """One durable point: the whole batch in one commit when the store can, else in order."""
        if self.batch_store is not None:
            await self.batch_store.append_many(self.run_id, batch, sequence=self.sequence)
            self._appended(batch)
            return
        for record in batch:  # a store without append_many: one commit per record
            await self.store.append(self.run_id, record, sequence=self.sequence)
            self._appended((record,))

    def _appended(self, records: Sequence[Record]) -> None:
        self.sequence += len(records)
        for record in records:
            if isinstance(record, RunStarted):
                self.started = True
            elif isinstance(record, RunFinished):
                self.finished = True

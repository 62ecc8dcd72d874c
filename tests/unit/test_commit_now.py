"""The bundled stores commit in the run's own task; every other store's commit is a task (#13).

A task, a shield and their event-loop turns per commit were the loop's largest own cost
(docs/design/0003). A store offering ``InlineCommitRunStore.commit_now`` — ``MemoryStore`` and
``SQLiteStore`` do — commits synchronously when nothing can make it wait, so there is no await
to cut the commit at (``test_inline_commit.py``: the protocol). Any other store's
``append_many`` runs as a task of its own, as before: that is what makes
``asyncio.timeout``, ``TaskGroup`` and anyio cancel scopes inside a store bind to the task that
runs them (a commit started in the run's task and finished in another breaks all three), and a
subclass's own ``append_many`` is always the one called.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine, Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

import polyloop
from polyloop import ModelCallIntent, ModelReply, Record, StopReason
from polyloop.ports import RunStore
from polyloop.stores import MemoryStore, SQLiteStore
from polyloop.stores import _sqlite as sqlite_module
from tests.unit._doubles import GOAL, StoreWrapper, act, agent, kinds, script
from tests.unit.test_sqlite_store import started

pytestmark = pytest.mark.asyncio


class InstantModel:
    async def complete(self, messages: Sequence[polyloop.Message]) -> ModelReply:
        return ModelReply(text="go")


class InstantParser:
    def parse(self, reply: ModelReply) -> polyloop.Action:
        return polyloop.Action(text="go")


class InstantExecutor:
    async def execute(self, action: polyloop.Action) -> polyloop.ActionOutcome:
        return polyloop.ActionOutcome(status=polyloop.ActionStatus.EXECUTED, observation="ok")


INSTANT: dict[str, Any] = {
    "model": InstantModel(),
    "parser": InstantParser(),
    "executor": InstantExecutor(),
}


class TaskCounter:
    """A task factory that counts the tasks made while it is installed; ``on_task`` is called
    when each is made."""

    def __init__(self, on_task: Callable[[], None] = lambda: None) -> None:
        self.made = 0
        self.on_task = on_task

    def __call__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
        **kwargs: Any,
    ) -> asyncio.Task[Any]:
        self.made += 1
        self.on_task()
        return asyncio.Task(coro, loop=loop, **kwargs)


async def tasks_made_by_a_run(
    store: RunStore, steps: int, on_task: Callable[[], None] = lambda: None
) -> int:
    loop = asyncio.get_running_loop()
    counter = TaskCounter(on_task)
    loop.set_task_factory(counter)
    try:
        result = await polyloop.run(agent(max_steps=steps), GOAL, store=store, **INSTANT)
    finally:
        loop.set_task_factory(None)
    assert result.stop_reason is StopReason.STEP_BUDGET
    return counter.made


async def test_a_memory_store_commits_with_no_task() -> None:
    assert await tasks_made_by_a_run(MemoryStore(), steps=5) == 0  # was two a step


@pytest.fixture
def steady_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """No fsync counts as slow: the store's pause after a slow inline commit (docs/design/0003,
    tested in test_sqlite_inline_commits.py) would otherwise send commits to the worker thread
    whenever the machine is loaded, and these tests are about the rule, not the disk."""
    monkeypatch.setattr(sqlite_module, "_SLOW_INLINE_COMMIT_S", 3600.0)


async def test_an_open_sqlite_store_commits_with_no_task(tmp_path: Path, steady_disk: None) -> None:
    async with SQLiteStore(tmp_path / "runs.db") as store:
        assert await tasks_made_by_a_run(store, steps=5) == 0


async def test_an_sqlite_commit_that_must_wait_is_a_task(tmp_path: Path, steady_disk: None) -> None:
    async with SQLiteStore(tmp_path / "runs.db") as store:
        other_writer = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
        other_writer.execute("BEGIN IMMEDIATE")  # holds the write lock until a task is made
        try:
            made = await tasks_made_by_a_run(store, steps=3, on_task=other_writer.rollback)
        finally:
            other_writer.close()
    assert made == 1  # the first commit could not start at once: a task; the others: none


class CountingMemoryStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        self.batches.append(sequence)
        await super().append_many(run_id, records, sequence=sequence)


class CountingSQLiteStore(SQLiteStore):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.batches: list[int] = []

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        self.batches.append(sequence)
        await super().append_many(run_id, records, sequence=sequence)


async def test_a_subclass_append_many_is_always_called(tmp_path: Path) -> None:
    memory = CountingMemoryStore()
    sqlite = CountingSQLiteStore(tmp_path / "runs.db")
    async with sqlite:
        await polyloop.run(agent(max_steps=2), GOAL, store=memory, run_id="r", **INSTANT)
        await polyloop.run(agent(max_steps=2), GOAL, store=sqlite, run_id="r", **INSTANT)

    # [started, intent], then per step [replied, action intent], [completed, intent or finished]
    expected = [0, 2, 4, 6, 8]
    assert memory.batches == expected
    assert sqlite.batches == expected


class TimeoutStore(StoreWrapper):
    """A store whose commit guards its own await with ``asyncio.timeout``, as a network client
    does; ``hang`` makes the guarded await outlast it."""

    def __init__(self, *, hang: bool) -> None:
        super().__init__()
        self.hang = hang

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        async with asyncio.timeout(0.05):
            await asyncio.sleep(1 if self.hang else 0)
        await self.inner.append_many(run_id, records, sequence=sequence)


async def test_a_stores_own_timeout_guards_its_commit() -> None:
    store = TimeoutStore(hang=False)
    result = await polyloop.run(agent(max_steps=2), GOAL, store=store, run_id="r", **INSTANT)

    assert result.stop_reason is StopReason.STEP_BUDGET
    assert kinds(await store.read_log("r"))[-1] == "run_finished"


async def test_a_stores_own_timeout_is_its_error_not_a_cancelled_run() -> None:
    store = TimeoutStore(hang=True)

    with pytest.raises(TimeoutError):  # a commit begun in the run's task would cancel the run
        await polyloop.run(agent(max_steps=2), GOAL, store=store, run_id="r", **INSTANT)

    assert await store.run_ids() == []  # the commit of RunStarted failed whole


class CancelScopeStore(StoreWrapper):
    """A store whose commit runs inside an anyio cancel scope (httpx/httpcore timeouts are)."""

    async def append_many(self, run_id: str, records: Sequence[Record], *, sequence: int) -> None:
        anyio = pytest.importorskip("anyio")
        with anyio.fail_after(5):
            await asyncio.sleep(0)
        await self.inner.append_many(run_id, records, sequence=sequence)


async def test_a_store_using_an_anyio_cancel_scope_commits() -> None:
    store = CancelScopeStore()
    result = await polyloop.run(agent(max_steps=2), GOAL, store=store, run_id="r", **INSTANT)

    assert result.stop_reason is StopReason.STEP_BUDGET


async def test_a_run_whose_seams_never_suspend_still_lets_a_timeout_in() -> None:
    store = MemoryStore()
    endless = agent(max_steps=10**9, max_executed_actions=10**9)

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await polyloop.run(endless, GOAL, store=store, run_id="r", **INSTANT)

    log = await store.read_log("r")
    assert log.finished is not None
    assert log.finished.stop_reason is StopReason.CANCELLED
    assert len(log.records) > 4  # it ran steps before the deadline cut in


async def test_other_tasks_run_between_the_commits_of_a_run_that_never_suspends() -> None:
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    ticking = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    before = turns
    try:
        result = await polyloop.run(agent(max_steps=20), GOAL, store=MemoryStore(), **INSTANT)
    finally:
        ticking.cancel()

    assert result.stop_reason is StopReason.STEP_BUDGET
    assert turns - before >= 2 * 20  # at least one turn per commit (two commits a step)


class IntrudingExecutor:
    """Appends a record of its own at the log's end (a second writer), then answers."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def execute(self, action: polyloop.Action) -> polyloop.ActionOutcome:
        log = await self.store.read_log("r")
        intent = ModelCallIntent(step_index=9, prompt_chars=1)
        await self.store.append("r", intent, sequence=len(log.records))
        return polyloop.ActionOutcome(status=polyloop.ActionStatus.EXECUTED, observation="ok")


class Sink:
    def __init__(self) -> None:
        self.sequences: list[int] = []

    async def emit(self, event: polyloop.Event) -> None:
        self.sequences.append(event.sequence)


async def test_a_refused_inline_commit_writes_nothing_and_raises_the_stores_error() -> None:
    store, sink = MemoryStore(), Sink()
    seams: dict[str, Any] = {**INSTANT, "executor": IntrudingExecutor(store)}

    with pytest.raises(polyloop.RunConflict):
        await polyloop.run(agent(max_steps=2), GOAL, store=store, run_id="r", events=sink, **seams)

    assert kinds(await store.read_log("r")) == [
        "run_started",
        "model_call_intent",
        "model_replied",
        "action_intent",
        "model_call_intent",  # the intruder's, at 4: the run's [completed, intent] was refused
    ]
    assert sink.sequences == [0, 1, 2, 3]


async def test_a_paused_sqlite_store_counts_its_pause_down_once_per_commit(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "runs.db") as store:
        await store.append("r", started("r"), sequence=0)
        store._inline_paused = 2  # a slow commit sent the next two to the worker
        intent = ModelCallIntent(step_index=0, prompt_chars=1)

        assert (
            store.commit_now("r", [intent], sequence=1) is False
        )  # the loop then awaits append_many
        assert store._inline_paused == 2
        await store.append_many("r", [intent], sequence=1)
        assert store._inline_paused == 1


async def test_the_log_of_a_run_through_a_suspending_store_is_complete() -> None:
    store = TimeoutStore(hang=False)
    await polyloop.run(agent(max_steps=1), GOAL, store=store, run_id="r", **script(act()).kwargs())

    assert kinds(await store.read_log("r")) == [
        "run_started",
        "model_call_intent",
        "model_replied",
        "action_intent",
        "step_completed",
        "run_finished",
    ]

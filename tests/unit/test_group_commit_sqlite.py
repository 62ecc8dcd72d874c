"""SQLiteStore's side of group commit (docs/design/0005): when a commit leaves the inline path.

A commit joins a group when another run's commit is near: one waiting or in flight on the
worker, or one another run began less than ``_GROUP_WINDOW_S`` ago. ``commit_now`` then declines
with nothing done, and ``append_many`` commits on the worker. A run alone, and runs one after
another, stay inline (``test_sqlite_inline_commits.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from polyloop import ModelCallIntent
from polyloop.stores import SQLiteStore
from polyloop.stores import _sqlite as sqlite_module
from tests.unit.test_sqlite_inline_commits import CommitThreads
from tests.unit.test_sqlite_store import finished, started

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SQLiteStore]:
    monkeypatch.setattr(sqlite_module, "_SLOW_INLINE_COMMIT_S", 3600.0)  # a steady disk
    async with SQLiteStore(tmp_path / "runs.db") as opened:
        yield opened


async def traced(store: SQLiteStore) -> CommitThreads:
    trace = CommitThreads()
    await store._in_worker(store._with_connection, lambda conn: conn.set_trace_callback(trace))
    return trace


def intent(step: int) -> ModelCallIntent:
    return ModelCallIntent(step_index=step, prompt_chars=1)


async def test_a_commit_right_after_another_runs_leaves_the_inline_path(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_GROUP_WINDOW_S", 3600.0)  # "right after", always
    await store.append("a", started("a"), sequence=0)
    await store.append("b", started("b"), sequence=0)
    trace = await traced(store)

    declined = store.commit_now("a", (intent(1),), sequence=1)

    assert declined is False
    assert len((await store.read_log("a")).records) == 1  # declined: nothing written
    await store.append_many("a", (intent(1),), sequence=1)
    assert trace.threads == ["polyloop-sqlite"]  # committed by the worker's group
    assert len((await store.read_log("a")).records) == 2


async def test_commits_of_one_run_stay_inline_however_close_together(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_GROUP_WINDOW_S", 3600.0)
    await store.append("a", started("a"), sequence=0)
    trace = await traced(store)

    assert store.commit_now("a", (intent(1),), sequence=1) is True
    assert store.commit_now("a", (intent(2),), sequence=2) is True
    assert store.commit_now("a", (finished(),), sequence=3) is True
    # A finished run leaves nothing to meet: the next run's first commit is inline too.
    assert store.commit_now("b", (started("b"),), sequence=0) is True

    assert trace.threads == [threading.current_thread().name] * 4


async def test_another_runs_commit_outside_the_window_does_not_group(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_GROUP_WINDOW_S", 0.0)  # never "right after"
    await store.append("a", started("a"), sequence=0)
    await store.append("b", started("b"), sequence=0)
    trace = await traced(store)

    for step in (1, 2):
        assert store.commit_now("a", (intent(step),), sequence=step) is True
        assert store.commit_now("b", (intent(step),), sequence=step) is True

    assert trace.threads == [threading.current_thread().name] * 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
async def test_a_child_forked_while_a_group_waits_commits_on_its_own(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_GROUP_WINDOW_S", 3600.0)
    await store.append("p1", started("p1"), sequence=0)
    await store.append("p2", started("p2"), sequence=0)
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:  # the worker is busy (the connection itself is free)
        holding.set()
        release.wait(60)

    held = asyncio.ensure_future(store._in_worker(hold))
    assert await asyncio.to_thread(holding.wait, 60)
    waiting = asyncio.ensure_future(store.append_many("p1", (intent(1),), sequence=1))
    await asyncio.sleep(0)  # p1's batch waits for a group, queued behind the held worker

    pid = os.fork()
    if pid == 0:  # the child: the parent's waiter, group and worker are not its own
        code = 1
        try:
            asyncio.run(store.append("child", started("child"), sequence=0))
            code = 0
        finally:
            os._exit(code)
    try:
        deadline = time.monotonic() + 60
        while (done := await asyncio.to_thread(os.waitpid, pid, os.WNOHANG))[0] == 0:
            assert time.monotonic() < deadline, "the forked child never committed"
            await asyncio.sleep(0.01)
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)  # only if it hung: it was reaped above otherwise
            await asyncio.to_thread(os.waitpid, pid, 0)
    release.set()
    await asyncio.gather(held, waiting)

    assert os.waitstatus_to_exitcode(done[1]) == 0
    assert len((await store.read_log("child")).records) == 1
    assert len((await store.read_log("p1")).records) == 2

"""SQLiteStore commits on the caller's thread when nothing can make it wait (issue #13: the
thread hand-off cost two cross-thread wake-ups per commit, more than SQLite's own work).

What must hold: a steady-state commit runs on the event-loop thread; anything that could make
the loop wait — another writer holding the lock, the worker using the connection, a connection
not yet open — goes to the worker instead, and a disk that stalls sends commits back to the
worker for a while. A checkpoint follows every 32nd commit on the thread that made it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from polyloop import ModelCallIntent
from polyloop.stores import SQLiteStore
from polyloop.stores import _sqlite as sqlite_module
from tests.unit.test_sqlite_store import finished, started

pytestmark = pytest.mark.asyncio


class CommitThreads:
    """Which thread ran each COMMIT (the connection's statement trace)."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def __call__(self, statement: str) -> None:
        if statement == "COMMIT":
            self.threads.append(threading.current_thread().name)


@pytest_asyncio.fixture
async def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SQLiteStore]:
    # A steady disk: on a loaded machine an fsync over 10 ms would send the next commits to the
    # worker (the slow-commit pause, tested on its own below), and which thread ran a commit is
    # what these tests check. A test of the pause sets the threshold itself.
    monkeypatch.setattr(sqlite_module, "_SLOW_INLINE_COMMIT_S", 3600.0)
    async with SQLiteStore(tmp_path / "runs.db") as opened:
        yield opened


async def traced(store: SQLiteStore) -> CommitThreads:
    trace = CommitThreads()
    await store._in_worker(store._with_connection, lambda conn: conn.set_trace_callback(trace))
    return trace


async def intents(store: SQLiteStore, run_id: str, start: int, count: int) -> None:
    for n in range(start, start + count):
        await store.append(run_id, ModelCallIntent(step_index=n, prompt_chars=1), sequence=n)


async def test_a_steady_commit_runs_on_the_event_loop_thread(store: SQLiteStore) -> None:
    trace = await traced(store)
    await store.append("r", started("r"), sequence=0)

    await intents(store, "r", 1, 5)

    assert trace.threads == [threading.current_thread().name] * 6
    assert len((await store.read_log("r")).records) == 6


async def test_a_connection_not_yet_open_is_opened_on_the_worker(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    loop_thread = threading.current_thread().name
    opened_on: list[str] = []
    real_open = store._open

    def open_and_note() -> sqlite3.Connection:
        opened_on.append(threading.current_thread().name)
        return real_open()

    store._open = open_and_note  # type: ignore[method-assign]
    try:
        await store.append("r", started("r"), sequence=0)
    finally:
        await store.aclose()

    assert opened_on == ["polyloop-sqlite"]
    assert loop_thread != "polyloop-sqlite"


async def test_a_write_lock_held_elsewhere_never_blocks_the_event_loop(
    store: SQLiteStore,
) -> None:
    trace = await traced(store)
    await store.append("r", started("r"), sequence=0)
    other = sqlite3.connect(store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock

    append = asyncio.create_task(intents(store, "r", 1, 1))
    before = time.monotonic()
    for _ in range(5):  # the append runs here: had it waited for the lock on this thread, the
        await asyncio.sleep(0)  # loop would be stuck for the busy timeout (60 s)
    stuck_s = time.monotonic() - before
    waiting_meanwhile = not append.done()
    other.execute("ROLLBACK")
    await append
    other.close()

    assert stuck_s < 5  # far below the 60 s busy timeout: the loop did not wait for the lock
    assert waiting_meanwhile  # the append waits for it elsewhere
    assert trace.threads == [threading.current_thread().name, "polyloop-sqlite"]
    assert len((await store.read_log("r")).records) == 2


async def test_a_connection_in_use_by_the_worker_sends_the_commit_there(
    store: SQLiteStore,
) -> None:
    trace = await traced(store)
    await store.append("r", started("r"), sequence=0)

    with store._lock:  # the worker is in the middle of something
        append = asyncio.create_task(intents(store, "r", 1, 1))
        await asyncio.sleep(0.05)
        assert not append.done()
    await append

    assert trace.threads[-1] == "polyloop-sqlite"


async def test_a_slow_commit_sends_the_next_ones_to_the_worker(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = await traced(store)
    await store.append("r", started("r"), sequence=0)
    monkeypatch.setattr(sqlite_module, "_SLOW_INLINE_COMMIT_S", 0.0)  # every commit is "slow"
    monkeypatch.setattr(sqlite_module, "_SLOW_PAUSE_COMMITS", 3)

    await intents(store, "r", 1, 5)

    loop = threading.current_thread().name
    worker = "polyloop-sqlite"
    # The slow inline commit, three on the worker, then inline again (and slow again).
    assert trace.threads == [loop, loop, worker, worker, worker, loop]


class Statements:
    """Every statement the connection ran, with the thread that ran it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, statement: str) -> None:
        self.seen.append((statement, threading.current_thread().name))

    def count(self, fragment: str) -> int:
        return sum(fragment in statement for statement, _ in self.seen)


async def statements_of(store: SQLiteStore) -> Statements:
    statements = Statements()
    await store._in_worker(store._with_connection, lambda c: c.set_trace_callback(statements))
    return statements


async def test_checkpoints_follow_every_nth_commit_on_its_thread_and_keep_the_wal_bounded(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements = await statements_of(store)
    monkeypatch.setattr(sqlite_module, "_CHECKPOINT_EVERY_COMMITS", 10)
    await store.append("r", started("r"), sequence=0)
    wal = store.path.with_name(store.path.name + "-wal")

    await intents(store, "r", 1, 200)
    size_after_200 = wal.stat().st_size
    await intents(store, "r", 201, 200)

    checkpoints = [(n, thread) for n, (s, thread) in enumerate(statements.seen) if "wal_" in s]
    loop = threading.current_thread().name
    assert [thread for _, thread in checkpoints] == [loop] * 40  # every 10th of 401 commits
    commits = [n for n, (s, _) in enumerate(statements.seen) if s == "COMMIT"]
    # Each right after the commit that made it due, before the next one begins.
    assert [n for n, _ in checkpoints] == [commits[9 + 10 * k] + 1 for k in range(40)]
    assert wal.stat().st_size == size_after_200  # reused from its start, never grown again
    assert size_after_200 < 401 * 100  # ten commits' worth, not the whole log
    assert len((await store.read_log("r")).records) == 401


async def test_a_checkpoint_on_a_commit_sent_to_the_worker_runs_there(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements = await statements_of(store)
    monkeypatch.setattr(sqlite_module, "_CHECKPOINT_EVERY_COMMITS", 2)
    await store.append("r", started("r"), sequence=0)

    with store._lock:  # the worker is busy: the second commit goes there, and so does its turn
        append = asyncio.create_task(intents(store, "r", 1, 1))
        await asyncio.sleep(0.05)
    await append

    assert [thread for s, thread in statements.seen if "wal_" in s] == ["polyloop-sqlite"]


async def test_inline_commits_set_the_busy_timeout_once_not_per_commit(
    store: SQLiteStore,
) -> None:
    statements = await statements_of(store)
    await store.append("r", started("r"), sequence=0)

    await intents(store, "r", 1, 50)
    inline_timeouts = statements.count("busy_timeout")
    await store.read_log("r")  # the worker needs the store's busy timeout back
    await intents(store, "r", 51, 1)

    assert statements.count("COMMIT") == 52
    assert inline_timeouts == 1  # 0 once, for all 51 commits (it was two statements a commit)
    # Back to the store's own for the worker's read, and to 0 for the next inline commit.
    assert [s for s, _ in statements.seen if "busy_timeout" in s][-2:] == [
        "PRAGMA busy_timeout=60000",
        "PRAGMA busy_timeout=0",
    ]


async def test_new_stores_use_small_pages_and_old_ones_keep_theirs(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA page_size=4096")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()  # an empty database with 4 KiB pages, as SQLite makes by default
    for path, expected in ((tmp_path / "new.db", sqlite_module.PAGE_SIZE), (old, 4096)):
        async with SQLiteStore(path) as store:
            await store.append("r", started("r"), sequence=0)
        check = sqlite3.connect(path)
        assert check.execute("PRAGMA page_size").fetchone()[0] == expected, path
        check.close()
    assert sqlite_module.PAGE_SIZE == 1024


async def test_a_commit_on_the_loop_is_visible_to_another_connection_when_append_returns(
    store: SQLiteStore,
) -> None:
    await store.append("r", started("r"), sequence=0)
    reader = sqlite3.connect(store.path)
    for n in range(1, 20):
        await intents(store, "r", n, 1)
        count = reader.execute(
            "SELECT COUNT(*) FROM polyloop_records WHERE run_id = 'r'"
        ).fetchone()[0]
        assert count == n + 1
    reader.close()


async def test_runs_one_after_another_commit_on_the_event_loop_thread(store: SQLiteStore) -> None:
    # Group commit (docs/design/0005) is for runs committing at the same moment: a run that
    # starts as soon as the previous one finished is alone, and keeps the inline commit.
    trace = await traced(store)
    for run_id in ("first", "second", "third"):
        await store.append(run_id, started(run_id), sequence=0)
        await intents(store, run_id, 1, 2)
        await store.append(run_id, finished(), sequence=3)

    assert trace.threads == [threading.current_thread().name] * 12
